// The entity and relation graph: typed nodes, typed edges with confidence and source,
// filtered by type; a node's neighbourhood with ?focus=<id>.

import { api, p } from "../api.js";
import { clear, fmtNum, h, link, short, swatch, table } from "../dom.js";
import { drawGraph, forceLayout } from "../graph.js";

export async function graphPage(view, pid, query) {
  const types = query.getAll("type"), rels = query.getAll("rel");
  const focus = query.get("focus") || undefined;
  const events = query.get("events") === "1";
  const data = await api(`${p(pid)}/graph`, {
    query: { entity_type: types, relation_type: rels, focus, hops: focus ? 2 : undefined,
      include_events: events || undefined, limit: 300 },
  });
  const go = (change) => {
    const q = new URLSearchParams();
    const next = { type: types, rel: rels, focus, events: events ? "1" : "", ...change };
    for (const t of next.type) q.append("type", t);
    for (const r of next.rel) q.append("rel", r);
    if (next.focus) q.set("focus", next.focus);
    if (next.events) q.set("events", "1");
    location.hash = link(["p", pid, "graph"], q);
  };
  const flip = (list, v) => (list.includes(v) ? list.filter((x) => x !== v) : [...list, v]);
  const filterBox = (id, label, counts, chosen, key) => h("div", { class: "filters", id },
    h("strong", {}, label),
    Object.entries(counts).map(([t, n]) => h("label", {}, h("input", {
      type: "checkbox", value: t, checked: chosen.includes(t),
      onchange: () => go({ [key]: flip(chosen, t) }),
    }), " ", swatch(t), `${t} (${n})`)));

  const nodes = data.nodes.map((n) => ({
    ...n, label: n.name, sub: `${n.type}${n.kind === "event" ? " event" : ""}`,
    focus: n.id === focus, title: `${n.type} ${n.id}\n${n.name}\n${n.text}`,
  }));
  const edges = data.edges.map((e) => ({
    ...e, label: `${e.type} ${fmtNum(e.confidence, 2)}`,
    title: `${e.type}  confidence ${fmtNum(e.confidence, 2)}  source ${e.source}\n` +
      `${e.from_id} → ${e.to_id}`,
  }));
  const box = [150, 34];
  const size = forceLayout(nodes, edges,
    { width: 980, height: nodes.length > 60 ? 760 : 560, box });
  const panel = h("div", { class: "card panel", id: "graph-panel" },
    h("p", { class: "muted" }, "Click a node or an edge for its details."));
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const showNode = (n) => clear(panel).append(
    h("h2", {}, n.name), h("dl", { class: "kv" },
      h("dt", {}, "id"), h("dd", { class: "mono" }, n.id),
      h("dt", {}, "kind"), h("dd", {}, n.kind), h("dt", {}, "type"), h("dd", {}, n.type)),
    h("pre", { class: "wrap" }, n.text),
    h("p", {}, h("a", { href: link(["p", pid, "graph"], { focus: n.id }), id: "focus-link" },
      "Neighbourhood (2 hops)"),
    n.kind === "event" ? [" · ", h("a", { href: link(["p", pid, "e", n.id]) }, "causal chain")]
      : ""));
  const showEdge = (e) => clear(panel).append(
    h("h2", {}, e.type), h("dl", { class: "kv", id: "edge-detail" },
      h("dt", {}, "from"), h("dd", {}, byId.get(e.from_id)?.name ?? e.from_id),
      h("dt", {}, "to"), h("dd", {}, byId.get(e.to_id)?.name ?? e.to_id),
      h("dt", {}, "confidence"), h("dd", {}, fmtNum(e.confidence, 2)),
      h("dt", {}, "source"), h("dd", {}, e.source),
      h("dt", {}, "id"), h("dd", { class: "mono" }, e.id)));
  const svg = drawGraph({ ...size, nodes, edges, box, edgeLabels: edges.length <= 80,
    onNode: showNode, onEdge: showEdge, cls: "entity-graph" });
  svg.id = "entity-graph";
  const name = (id) => byId.get(id)?.name ?? id;
  clear(view).append(
    h("h1", {}, focus ? `Neighbourhood of ${name(focus)}` : "Entities and relations"),
    focus ? h("p", {}, h("a", { href: link(["p", pid, "graph"]) }, "← whole graph")) : "",
    filterBox("filter-entity-type", "Entity types:", data.entity_types, types, "type"),
    filterBox("filter-relation-type", "Relation types:", data.relation_types, rels, "rel"),
    h("div", { class: "filters" }, h("label", {}, h("input", { type: "checkbox", id: "with-events",
      checked: events, onchange: () => go({ events: events ? "" : "1" }) }), " show events linked to these entities")),
    h("p", { class: "muted", id: "graph-status" }, `${nodes.length} nodes, ${edges.length} edges` +
      (data.truncated ? " (cut: narrow by type, or open a neighbourhood)" : "")),
    h("div", { class: "split" }, svg, panel),
    h("h2", {}, "Relations"),
    table(["from", "type", "to", { label: "confidence", cls: "num" }, "source"],
      edges.map((e) => h("tr", { class: "clickable relation-row", dataset: { edge: e.id },
        onclick: () => showEdge(e) },
      h("td", {}, swatch(byId.get(e.from_id)?.type), short(name(e.from_id), 50)),
      h("td", {}, e.type), h("td", {}, swatch(byId.get(e.to_id)?.type), short(name(e.to_id), 50)),
      h("td", { class: "num" }, fmtNum(e.confidence, 2)), h("td", {}, e.source))),
      { id: "relations" }));
}

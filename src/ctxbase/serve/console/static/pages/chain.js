// The causal chain of one event: its causes above, its effects below, as a layered graph.

import { api, p } from "../api.js";
import {
  agentName, clear, fmtTime, h, link, short, table, typeBadge, typeColour,
} from "../dom.js";
import { drawGraph, layeredLayout } from "../graph.js";

// A hidden (soft-deleted) cause or effect comes as a placeholder: its id, no text.
const isHidden = (ev) => (ev.marks || []).includes("hidden");
const evText = (ev, n) => (isHidden(ev) ? "[hidden] (restore brings it back)" : short(ev.text, n));

export async function chainPage(view, pid, eid) {
  const data = await api(`${p(pid)}/events/${encodeURIComponent(eid)}/chain`,
    { query: { depth: 10, limit: 100 } });
  const e = data.event;
  const nodes = [
    ...data.causes.map((c) => ({ ev: c.event, layer: -c.hops })),
    { ev: e, layer: 0, focus: true },
    ...data.effects.map((c) => ({ ev: c.event, layer: c.hops })),
  ].map((n) => ({
    // boxes take the type's colour, as the timeline's dots do (agents have their own palette)
    id: n.ev.id, layer: n.layer, focus: n.focus, type: n.ev.type, kind: "event",
    colour: typeColour(n.ev.type),
    label: `${n.ev.agent_id} · ${n.ev.type}`,
    sub: isHidden(n.ev) ? "[hidden]" : `#${n.ev.seq} ${short(n.ev.text, 40)}`,
    title: `${n.ev.id}\n${n.ev.agent_id} · ${n.ev.type} · ${fmtTime(n.ev.ts)}\n${evText(n.ev, 400)}`,
  }));
  const present = new Set(nodes.map((n) => n.id));
  const edges = [];
  for (const n of [...data.causes, { event: e }, ...data.effects]) {
    for (const parent of n.event.parent_event_ids) {
      if (present.has(parent)) {
        edges.push({ id: `${parent}>${n.event.id}`, from_id: parent, to_id: n.event.id,
          type: "CAUSED_BY", title: "caused" });
      }
    }
  }
  const size = layeredLayout(nodes);
  const svg = drawGraph({ ...size, nodes, edges, edgeLabels: false, cls: "chain",
    onNode: (n) => { if (n.id !== e.id) location.hash = link(["p", pid, "e", n.id]); } });
  svg.id = "chain-graph";
  const list = (title, items, id) => [h("h2", {}, `${title} (${items.length})`),
    items.length ? table(["hops", "time", "agent", "type", "text"], items.map((c) => h("tr", {
      class: "clickable chain-row", dataset: { event: c.event.id },
      onclick: () => { location.hash = link(["p", pid, "e", c.event.id]); },
    }, h("td", { class: "num" }, c.hops), h("td", { class: "mono" }, fmtTime(c.event.ts)),
    h("td", {}, agentName(c.event.agent_id)), h("td", {}, typeBadge(c.event.type)),
    h("td", { class: isHidden(c.event) ? "text muted" : "text" }, evText(c.event, 160)))), { id })
      : h("p", { class: "muted" }, "none")];
  clear(view).append(
    h("h1", {}, "Causal chain"),
    h("div", { class: "card", id: "event-detail" },
      h("dl", { class: "kv" },
        h("dt", {}, "event"), h("dd", { class: "mono" }, e.id),
        h("dt", {}, "session"), h("dd", {}, h("a", { href: link(["p", pid, "s", e.session_id]) },
          e.session_id), ` #${e.seq}`),
        h("dt", {}, "agent"), h("dd", {}, agentName(e.agent_id),
          e.agent_role ? ` (${e.agent_role})` : ""),
        h("dt", {}, "type"), h("dd", {}, typeBadge(e.type)),
        h("dt", {}, "time"), h("dd", {}, fmtTime(e.ts))),
      h("pre", { class: "wrap" }, e.text ?? JSON.stringify(e.data, null, 2))),
    h("p", { class: "muted" }, "Causes above, effects below; arrows run from cause to effect." +
      (data.truncated ? " (cut to the nearest 100 each way)" : "")),
    svg, ...list("Causes", data.causes, "causes"), ...list("Effects", data.effects, "effects"));
}

// Assembled contexts: the list (pick two to diff) and one assembly's trace.

import { api, p } from "../api.js";
import { clear, colour, fmtNum, fmtTime, h, link, s, short, swatch, table } from "../dom.js";

export async function contextsPage(view, pid, query) {
  const before = query.get("before") || undefined;
  const session = query.get("session") || undefined;
  const data = await api(`${p(pid)}/contexts`,
    { query: { before, session_id: session, limit: 50 } });
  const picked = { a: null, b: null };
  const compare = h("button", { type: "button", class: "primary", id: "compare", disabled: true,
    onclick: () => { location.hash = link(["p", pid, "diff", picked.a, picked.b]); } },
  "Compare A → B");
  const pick = (slot, cid) => {
    picked[slot] = cid;
    compare.disabled = !(picked.a && picked.b && picked.a !== picked.b);
  };
  const rows = data.contexts.map((c) => h("tr", { class: "context-row",
    dataset: { context: c.context_id } },
  h("td", {}, h("input", { type: "radio", name: "a", value: c.context_id, "aria-label": "A",
    onchange: () => pick("a", c.context_id) })),
  h("td", {}, h("input", { type: "radio", name: "b", value: c.context_id, "aria-label": "B",
    onchange: () => pick("b", c.context_id) })),
  h("td", { class: "mono" }, h("a", { href: link(["p", pid, "c", c.context_id]) }, c.context_id)),
  h("td", { class: "mono" }, fmtTime(c.created_at)), h("td", {}, c.agent_role || ""),
  h("td", {}, c.policy || ""), h("td", { class: "text" }, short(c.intent, 90)),
  h("td", { class: "num" }, c.total_tokens ?? ""), h("td", {}, c.session_id || "")));
  clear(view).append(h("h1", {}, session ? `Assembled contexts of ${session}` : "Assembled contexts"),
    session ? h("p", {}, h("a", { href: link(["p", pid, "contexts"]) }, "← every session")) : "",
    h("div", { class: "toolbar" }, compare, h("span", { class: "muted" },
      "Pick A and B to see what changed between two assemblies.")));
  if (!rows.length) {
    view.append(h("p", { class: "muted" }, "No context has been assembled in this project."));
    return;
  }
  view.append(table(["A", "B", "context", "time", "role", "policy", "intent",
    { label: "tokens", cls: "num" }, "session"], rows, { id: "contexts" }));
  if (data.next_before !== null) {
    const older = { before: data.next_before, ...(session ? { session } : {}) };
    view.append(h("p", {}, h("a", { id: "older", href: link(["p", pid, "contexts"], older) },
      "Older →")));
  }
}

// Tokens per layer as one stacked bar, with each layer's count in the legend.
export function tokenBar(byLayer, id) {
  const entries = Object.entries(byLayer).filter(([, n]) => n > 0);
  const total = entries.reduce((n, [, v]) => n + v, 0) || 1;
  const width = 900, barH = 26;
  const svg = s("svg", { id, width, height: barH + 4, viewBox: `0 0 ${width} ${barH + 4}` });
  let x = 0;
  for (const [layer, n] of entries) {
    const w = (width * n) / total;
    svg.append(s("rect", { x, y: 2, width: w, height: barH, fill: colour(layer),
      dataset: { layer } }, s("title", {}, `${layer}: ${n} tokens`)));
    if (w > 60) {
      svg.append(s("text", { x: x + 6, y: barH - 6, fill: "#fff" }, `${layer} ${n}`));
    }
    x += w;
  }
  const legend = h("div", { class: "filters" }, Object.entries(byLayer).map(([layer, n]) =>
    h("span", { class: "layer-tokens", dataset: { layer } }, swatch(layer), `${layer}: ${n}`)));
  return h("div", {}, svg, legend);
}

function scoreBadges(explain) {
  if (!explain) return "";
  const out = [];
  if (explain.keyword_rank != null) out.push(h("span", { class: "badge keyword" }, `keyword #${explain.keyword_rank}`));
  if (explain.similarity != null) out.push(h("span", { class: "badge vector" }, `vector ${fmtNum(explain.similarity)}`));
  if (explain.graph_via) out.push(h("span", { class: "badge graph" }, `graph ${explain.graph_via}`));
  return out;
}

// An event opens its causal chain, anything else its neighbourhood in the graph.
function itemLink(pid, kind, id) {
  return kind === "event" ? link(["p", pid, "e", id]) : link(["p", pid, "graph"], { focus: id });
}

export async function tracePage(view, pid, cid) {
  const t = await api(`${p(pid)}/contexts/${encodeURIComponent(cid)}`);
  const layerOf = new Map();
  for (const [layer, v] of Object.entries(t.layers || {})) {
    for (const item of v.items || []) layerOf.set(item.id, layer);
  }
  const dropped = new Map((t.dropped || []).map((d) => [d.id, d.reason]));
  const cands = (t.candidates || []).map((c) => {
    const kept = c.included && layerOf.has(c.id);
    return h("tr", { class: "candidate-row" + (kept ? "" : " dropped"), dataset: { id: c.id } },
      h("td", { class: "mono" }, h("a", { href: itemLink(pid, c.kind, c.id) }, short(c.id, 40))),
      h("td", {}, `${c.kind} · ${c.type}`),
      h("td", { class: "num" }, fmtNum(c.score)),
      h("td", {}, scoreBadges(c.explain)),
      h("td", {}, (c.strategies || []).join(", ")),
      h("td", {}, kept ? h("span", { class: "badge kept" }, `kept · ${layerOf.get(c.id)}`)
        : h("span", { class: "badge drop" }, `dropped · ${dropped.get(c.id) || c.dropped || "not included"}`)),
      h("td", {}, (c.reasons || []).join("; ")));
  });
  const layers = Object.entries(t.layers || {}).map(([layer, v]) => {
    const used = v.tokens ?? 0;
    // a layer spends its own quota first, then what the pool handed it (budget.py)
    const pooled = v.quota == null ? null : v.extra ?? null;
    return h("tr", { class: "layer-row", dataset: { layer } },
      h("td", {}, swatch(layer), layer),
      h("td", { class: "num quota" }, v.quota ?? "-"),
      h("td", { class: "num own" }, pooled == null ? "-" : used - pooled),
      h("td", { class: "num extra" }, pooled == null ? "-" : `+${pooled}`),
      h("td", { class: "num used" }, used), h("td", { class: "num" }, (v.items || []).length),
      h("td", {}, (v.items || []).map((i) => h("div", { class: "text", title: short(i.text, 600) },
        h("span", { class: "mono" }, short(i.id, 28)), ` [${i.source}] `, short(i.text, 90)))));
  });
  const considered = (t.search_considered || []).map((x) => h("tr", { class: "considered-row" },
    h("td", { class: "mono" }, short(x.owner_id || x.id, 40)), h("td", {}, x.strategy || ""),
    h("td", { class: "num" }, fmtNum(x.score, 4)), h("td", { class: "num" }, fmtNum(x.relative)),
    h("td", {}, scoreBadges(x)), h("td", {}, x.dropped || "")));
  // the text of a dropped event or entity comes from the console's trace read (views.trace)
  const drops = (t.dropped || []).map((d) => h("tr", { class: "drop-row",
    dataset: { id: d.id, reason: d.reason || "" } },
  h("td", { class: "mono" }, short(d.id, 40)), h("td", {}, d.layer || ""),
  h("td", {}, d.reason || ""), h("td", { class: "detail" }, d.detail || ""),
  h("td", { class: "text drop-text", title: short(d.text, 600) }, short(d.text, 100))));
  const relations = (t.relations || []).map((r) => h("tr", {},
    h("td", { class: "mono" }, short(r.from, 30)), h("td", {}, r.type),
    h("td", { class: "mono" }, short(r.to, 30)), h("td", { class: "num" }, fmtNum(r.confidence, 2)),
    h("td", {}, r.source || ""), h("td", {}, r.strategy || ""),
    h("td", {}, r.followed ? "followed" : "not followed")));
  clear(view).append(
    h("h1", {}, `Context ${t.context_id}`),
    h("div", { class: "card", id: "trace-summary" }, h("dl", { class: "kv" },
      h("dt", {}, "role"), h("dd", {}, t.agent_role ?? ""),
      h("dt", {}, "intent"), h("dd", {}, t.intent ?? ""),
      h("dt", {}, "policy"), h("dd", { id: "policy" }, `${t.policy} (from ${t.policy_source ?? "?"})`),
      h("dt", {}, "strategies"), h("dd", {}, (t.strategies || []).join(", ")),
      h("dt", {}, "session"), h("dd", {}, t.session_id
        ? h("a", { href: link(["p", pid, "s", t.session_id]) }, t.session_id) : "-"),
      h("dt", {}, "tokens"), h("dd", {}, `${t.total_tokens} of ${t.max_tokens}`),
      h("dt", {}, "time"), h("dd", {}, fmtTime(t.created_at)))),
    h("h2", {}, "Why this policy and these strategies"),
    h("ul", { id: "reasons" }, (t.reasons || []).map((r) => h("li", {}, r))),
    h("h2", {}, "Tokens per layer"), tokenBar(t.tokens_by_layer || {}, "token-bar"),
    table(["layer", { label: "quota", cls: "num" }, { label: "used of quota", cls: "num" },
      { label: "from pool", cls: "num" }, { label: "used", cls: "num" },
      { label: "items", cls: "num" }, "kept"], layers, { id: "layers" }),
    h("p", { class: "muted", id: "layers-note" }, "A layer first fills its own quota (its " +
      "share of the budget); what the layers leave unused goes to a pool handed out again, " +
      "the state's facts first, then memory, then history. Used = used of quota + from pool. " +
      "The bar counts each layer as it sits in the prompt, with its messages' frame (role, " +
      "heading, labels), so it reads more than the table's tokens of the items alone."),
    h("h2", {}, `Candidates (${cands.length})`),
    cands.length ? table(["id", "kind", { label: "score", cls: "num" }, "found by", "strategies",
      "outcome", "why"], cands, { id: "candidates" }) : h("p", { class: "muted" }, "none"),
    h("h2", {}, `Search hits considered (${considered.length})`),
    considered.length ? table(["item", "strategy", { label: "score", cls: "num" },
      { label: "relative", cls: "num" }, "found by", "dropped"], considered, { id: "considered" })
      : h("p", { class: "muted" }, "no search ran"),
    h("h2", {}, `Dropped (${drops.length})`),
    drops.length ? table(["id", "layer", "reason", "detail", "text"], drops, { id: "dropped" })
      : h("p", { class: "muted" }, "nothing was dropped"),
    h("h2", {}, `Relations (${relations.length})`),
    relations.length ? table(["from", "type", "to", { label: "conf.", cls: "num" }, "source",
      "strategy", ""], relations, { id: "trace-relations" }) : h("p", { class: "muted" }, "none"),
    h("h2", {}, "Timings (ms)"),
    h("p", { class: "mono" }, Object.entries(t.timings_ms || {}).map(([k, v]) => `${k} ${v}`).join(" · ")),
    ...((t.notes || []).length ? [h("h2", {}, "Notes"),
      h("ul", { id: "notes" }, t.notes.map((n) => h("li", {}, String(n))))] : []));
}

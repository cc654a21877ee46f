// Search with where each hit came from: keyword (BM25 rank), vector (similarity), graph.

import { api, p } from "../api.js";
import { agentName, clear, fmtNum, fmtTime, h, link, short, typeBadge } from "../dom.js";

const PRESETS = ["hybrid_graph", "hybrid", "keyword", "semantic"];

export async function searchPage(view, pid, query) {
  const q = query.get("q") || "";
  const preset = query.get("preset") || "hybrid_graph";
  const input = h("input", { type: "search", id: "search-input", value: q,
    placeholder: "search events, documents, code…", "aria-label": "query" });
  const select = h("select", { id: "search-preset", "aria-label": "preset" },
    PRESETS.map((x) => h("option", { value: x, selected: x === preset }, x)));
  const form = h("form", { class: "toolbar", id: "search-form", onsubmit: (ev) => {
    ev.preventDefault();
    if (input.value.trim()) {
      location.hash = link(["p", pid, "search"], { q: input.value.trim(), preset: select.value });
    }
  } }, input, select, h("button", { type: "submit", class: "primary" }, "Search"));
  clear(view).append(h("h1", {}, "Search"), form);
  input.focus();
  if (!q.trim()) return;
  const res = await api(`${p(pid)}/search`, { method: "POST",
    body: { query: q, preset, options: { top_k: TOP_K }, include_considered: true } });
  view.append(h("p", { class: "muted", id: "search-status" },
    `${res.results.length} hits · ${fmtNum(res.timings_ms.total ?? 0, 1)} ms` +
    (res.pending_vectors ? ` · ${res.pending_vectors} items without a vector yet` : "") +
    (res.embedder_error ? ` · embedder: ${res.embedder_error}` : "")));
  const out = leftOut(res);
  if (out.length) {
    // what the ranks skip (keyword #1 missing): rated wrong, retracted or expired, as the
    // command line's notes say it, with a rating's correction in the memory's place
    view.append(h("ul", { class: "muted", id: "search-left-out" }, out.map((c) =>
      h("li", {}, h("span", { class: "badge drop" }, leftOutWhy(c)), " ",
        h("span", { class: "mono" }, short(c.item.owner_id, 48)),
        c.correction ? h("span", {}, ` · correction: ${c.correction}`) : ""))));
  }
  view.append(h("ol", { id: "search-results" }, res.results.map((hit) => {
    const it = hit.item;
    const origin = [];
    if (hit.keyword_rank != null) origin.push(h("span", { class: "badge keyword" }, `keyword #${hit.keyword_rank}`));
    if (hit.semantic_rank != null || hit.similarity != null) {
      origin.push(h("span", { class: "badge vector" },
        `vector ${hit.semantic_rank != null ? "#" + hit.semantic_rank + " " : ""}sim ${fmtNum(hit.similarity)}`));
    }
    if (hit.retracted) origin.push(h("span", { class: "badge drop" }, "retracted"));
    if (hit.graph_via) {
      origin.push(h("span", { class: "badge graph" },
        `graph: ${hit.graph_via}${hit.graph_confidence != null ? ` (${fmtNum(hit.graph_confidence, 2)})` : ""}`));
    }
    const target = it.kind === "event"
      ? link(["p", pid, "e", it.owner_id]) : link(["p", pid, "graph"], { focus: it.owner_id });
    return h("li", { class: "card search-hit", dataset: { owner: it.owner_id } },
      // a type is a badge, an agent coloured text: palettes that share no colour
      h("div", {}, typeBadge(it.type), " ", h("strong", {}, it.kind), " ",
        h("a", { href: target, class: "mono" }, short(it.owner_id, 48)),
        h("span", { class: "muted" }, `  score ${fmtNum(hit.score, 4)}`),
        it.session_id ? h("span", { class: "muted" }, ` · session ${it.session_id}`) : "",
        it.agent_id ? h("span", {}, " · ", agentName(it.agent_id)) : "",
        it.path ? h("span", { class: "muted" }, ` · ${it.path}`) : "",
        h("span", { class: "muted" }, ` · ${fmtTime(it.ts)}`)),
      h("div", { class: "origin" }, origin),
      h("div", { class: "text" }, short(it.text, 220)),
      // near-identical memories folded into this hit: forgetting it leaves them
      (hit.duplicates || []).length
        ? h("div", { class: "muted duplicates" }, "same text also in: ",
          h("span", { class: "mono" }, hit.duplicates.join(", ")))
        : "");
  })));
}

const TOP_K = 20;

// The matches left out for their rating, a retraction or an expiry that could have ranked
// among the hits shown (scoring at least the last one when the page is full).
function leftOut(res) {
  const scores = res.results.map((r) => r.score);
  const floor = res.results.length >= TOP_K ? Math.min(...scores) : -Infinity;
  const seen = new Set();
  return (res.considered || []).filter((c) => {
    const why = c.dropped || "";
    const counted = c.retracted || c.expired || why.includes("below min_confidence");
    if (!counted || c.score < floor || seen.has(c.item.owner_id)) return false;
    seen.add(c.item.owner_id);
    return true;
  });
}

function leftOutWhy(c) {
  if (c.retracted) return "left out: retracted";
  if (c.expired) return "left out: expired";
  const label = (c.confidence_source || "").replace(/^feedback:/, "");
  return `left out: rated ${label || "low"}`;
}

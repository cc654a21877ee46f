// What changed between two assembled contexts.

import { api, p } from "../api.js";
import { clear, colour, fmtNum, h, link, short, swatch, table } from "../dom.js";

export async function diffPage(view, pid, a, b) {
  const d = await api(`${p(pid)}/contexts/diff`, { query: { before_id: a, after_id: b } });
  const signed = (n, digits = 0) => (n === null || n === undefined ? "-"
    : (n > 0 ? "+" : "") + (digits ? n.toFixed(digits) : String(n)));
  const deltaCls = (n) => (n > 0 ? "delta-pos" : n < 0 ? "delta-neg" : "");
  const items = (title, refs, id, mark) => [h("h2", {}, `${title} (${refs.length})`),
    refs.length ? table(["id", "layer", "source", { label: "score", cls: "num" }, "text"],
      refs.map((r) => h("tr", { class: `${id}-row` }, h("td", { class: "mono" }, `${mark} ${short(r.id, 40)}`),
        h("td", {}, r.layer), h("td", {}, r.source), h("td", { class: "num" }, fmtNum(r.score)),
        h("td", { class: "text" }, short(r.text, 100)))), { id })
      : h("p", { class: "muted" }, "none")];
  const maxTok = Math.max(1, ...d.tokens.flatMap((t) => [t.before, t.after]));
  const bar = (n, layer) => h("span", { class: "swatch", style: {
    width: `${Math.max(2, (160 * n) / maxTok)}px`, borderRadius: "2px", background: colour(layer),
  } }, "");
  const prompt = h("pre", { class: "diff", id: "prompt-diff" }, d.prompt_diff.map((line) =>
    h("span", { class: line.startsWith("+") && !line.startsWith("+++") ? "add"
      : line.startsWith("-") && !line.startsWith("---") ? "del"
        : line.startsWith("@@") ? "hunk" : "" }, line + "\n")));
  clear(view).append(
    h("h1", {}, "Context diff"),
    h("p", {}, h("a", { href: link(["p", pid, "c", a]), class: "mono" }, a), " → ",
      h("a", { href: link(["p", pid, "c", b]), class: "mono" }, b)),
    h("div", { class: "card", id: "diff-summary" }, d.is_empty ? "no differences" : [
      h("div", {}, `policy: ${d.policy[0]}` + (d.policy[0] !== d.policy[1] ? ` → ${d.policy[1]}` : " (same)")),
      h("div", {}, `strategies: ${[...d.strategies_added.map((x) => "+" + x),
        ...d.strategies_removed.map((x) => "-" + x)].join(", ") || "same"}`),
      h("div", {}, `tokens: ${signed(d.total_token_delta)} in all; ${d.added.length} added, ` +
        `${d.removed.length} removed, ${d.moved.length} moved, ${d.score_changes.length} rescored`)]),
    h("h2", {}, "Tokens per layer"),
    table(["layer", { label: "A", cls: "num" }, { label: "B", cls: "num" }, { label: "Δ", cls: "num" }, ""],
      d.tokens.map((t) => h("tr", { class: "token-row", dataset: { layer: t.layer } },
        h("td", {}, swatch(t.layer), t.layer), h("td", { class: "num" }, t.before),
        h("td", { class: "num" }, t.after),
        h("td", { class: `num ${deltaCls(t.delta)}` }, signed(t.delta)),
        h("td", {}, bar(t.before, t.layer), " ", bar(t.after, t.layer)))), { id: "token-diff" }),
    ...items("Added", d.added, "added", "+"), ...items("Removed", d.removed, "removed", "−"),
    h("h2", {}, `Moved (${d.moved.length})`),
    d.moved.length ? h("ul", { id: "moved" }, d.moved.map((m) => h("li", {}, `${m.id}: ${m.from_layer} → ${m.to_layer}`)))
      : h("p", { class: "muted" }, "none"),
    h("h2", {}, `Score changes (${d.score_changes.length})`),
    d.score_changes.length ? table(["id", "layer", { label: "A", cls: "num" }, { label: "B", cls: "num" },
      { label: "Δ", cls: "num" }], d.score_changes.map((c) => h("tr", {},
      h("td", { class: "mono" }, short(c.id, 40)), h("td", {}, c.layer),
      h("td", { class: "num" }, fmtNum(c.before)), h("td", { class: "num" }, fmtNum(c.after)),
      h("td", { class: "num" }, signed(c.delta, 3)))), { id: "score-changes" })
      : h("p", { class: "muted" }, "none"),
    h("h2", {}, "Drops"),
    !d.newly_dropped.length && !d.no_longer_dropped.length
      ? h("p", { class: "muted" }, "no change in what was dropped") : "",
    h("ul", { id: "drops" }, [
      ...d.newly_dropped.map(([id, reason]) => h("li", {}, `now dropped: ${id} (${reason})`)),
      ...d.no_longer_dropped.map((id) => h("li", {}, `no longer dropped: ${id}`))]),
    h("h2", {}, "Prompt"), prompt);
}

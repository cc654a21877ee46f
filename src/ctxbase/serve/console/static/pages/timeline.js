// A session's timeline: events by agent (lanes, coloured names), type (badges, coloured dots)
// and time, a page at a time.

import { api, p } from "../api.js";
import {
  agentColour, agentName, clear, fmtTime, h, link, s, short, table, typeBadge, typeColour,
} from "../dom.js";

const PAGE = 100;
// What a mark on an event means (its tooltip): out of prompts and searches.
const MARKS = {
  retracted: "retracted: left out of prompts and searches",
  expired: "per-turn tool result of an earlier turn: left out of prompts and searches",
  wrong: "rated wrong: left out of prompts and searches",
};

export async function timelinePage(view, pid, sid, query) {
  const started = performance.now();
  const agents = query.getAll("agent"), types = query.getAll("type");
  const after = query.get("after"), before = query.get("before");
  const data = await api(`${p(pid)}/timeline`, {
    query: { session_id: sid, after_seq: after, before_seq: before, limit: PAGE, agent: agents,
      type: types },
  });
  const here = (extra) => {
    const q = new URLSearchParams();
    for (const a of agents) q.append("agent", a);
    for (const t of types) q.append("type", t);
    for (const [k, v] of Object.entries(extra || {})) q.set(k, v);
    return link(["p", pid, "s", sid], q);
  };
  const allAgents = [...new Set(data.counts.map((c) => c.agent_id))].sort();
  const allTypes = [...new Set(data.counts.map((c) => c.type))].sort();
  const sessionTotal = data.counts.reduce((n, c) => n + c.count, 0);
  const ev = data.events;

  const toggle = (name, values, value) => {
    const next = values.includes(value) ? values.filter((v) => v !== value) : [...values, value];
    const q = new URLSearchParams();
    for (const a of name === "agent" ? next : agents) q.append("agent", a);
    for (const t of name === "type" ? next : types) q.append("type", t);
    location.hash = link(["p", pid, "s", sid], q);
  };
  const checks = (name, all, chosen) => h("div", { class: "filters", id: `filter-${name}` },
    h("strong", {}, name === "agent" ? "Agents:" : "Types:"),
    all.map((v) => h("label", {}, h("input", {
      type: "checkbox", value: v, checked: chosen.includes(v),
      onchange: () => toggle(name, chosen, v),
    }), " ", name === "agent" ? agentName(v) : typeBadge(v))));

  const first = ev.length ? ev[0].seq : null, last = ev.length ? ev[ev.length - 1].seq : null;
  const pager = h("div", { class: "toolbar", id: "pager" },
    h("button", { type: "button", id: "page-first", disabled: !data.has_before,
      onclick: () => { location.hash = here(); } }, "⇤ First"),
    h("button", { type: "button", id: "page-prev", disabled: !data.has_before,
      onclick: () => { location.hash = here({ before: first }); } }, "← Earlier"),
    h("span", { id: "page-status" }, ev.length
      ? `events #${first}–#${last} · ${ev.length} shown of ${data.total}` +
        (data.total !== sessionTotal ? ` (filtered; ${sessionTotal} in the session)` : "")
      : "no events"),
    h("button", { type: "button", id: "page-next", disabled: !data.has_after,
      onclick: () => { location.hash = here({ after: last }); } }, "Later →"),
    h("button", { type: "button", id: "page-last", disabled: !data.has_after,
      onclick: () => { location.hash = here({ before: Number.MAX_SAFE_INTEGER }); } }, "Last ⇥"));

  // Each row is a link to the event (keyboard, ctrl-click, middle click, copy address); a
  // click anywhere else in the row opens it too.
  const rows = ev.map((e) => {
    const href = link(["p", pid, "e", e.id]);
    return h("tr", { class: "clickable event-row", dataset: { event: e.id, seq: e.seq },
      onclick: (click) => openRow(click, href) },
    h("td", { class: "num" }, h("a", { class: "event-link", href }, e.seq)),
    h("td", { class: "mono" }, fmtTime(e.ts)),
    h("td", {}, agentName(e.agent_id), e.agent_role ? ` (${e.agent_role})` : ""),
    h("td", {}, typeBadge(e.type)),
    h("td", { class: "num" }, e.parent_event_ids.length || ""),
    h("td", { class: "text", title: short(e.text, 600) },
      (data.marks[e.id] || []).map((m) => h("span", { class: "badge drop mark", title: MARKS[m] || m,
        dataset: { mark: m } }, m)),
      h("a", { class: "row-link", href, tabindex: "-1" },
        short(e.text ?? JSON.stringify(e.data)))));
  });

  const info = data.session;
  clear(view).append(
    h("h1", {}, `Session ${info.session_id}`),
    h("p", { class: "muted", id: "session-summary" }, [info.title, `status ${info.status}`,
      eventCount(sessionTotal, data.hidden), plural(allAgents.length, "agent")]
      .filter(Boolean).join(" · "), " · ",
    h("a", { id: "session-contexts", href: link(["p", pid, "contexts"], { session: sid }) },
      "contexts assembled in this session")),
    checks("agent", allAgents, agents), checks("type", allTypes, types),
    lanes(pid, ev, allAgents), pager,
    table([{ label: "#", cls: "num" }, "time", "agent", "type", { label: "causes", cls: "num" },
      "text"], rows, { id: "timeline" }));
  view.dataset.renderMs = String(Math.round(performance.now() - started));
}

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

// "1 event (1 hidden)": hidden (soft-deleted) events are in no count or page.
export function eventCount(shown, hidden) {
  return plural(shown, "event") + (hidden ? ` (${hidden} hidden)` : "");
}

// A click on the row outside its links: a modified click opens a new tab, as on a link.
function openRow(click, href) {
  if (click.target.closest("a") || getSelection().toString()) return;
  if (click.ctrlKey || click.metaKey || click.shiftKey) window.open(href, "_blank", "noopener");
  else location.hash = href;
}

// One lane per agent; x is time across the page; a dot per event, coloured by type.
function lanes(pid, events, agents) {
  const laneH = 26, left = 130, width = 1100, height = 20 + laneH * Math.max(1, agents.length);
  const svg = s("svg", { id: "lanes", width, height, viewBox: `0 0 ${width} ${height}` });
  if (!events.length) return svg;
  const t0 = events[0].ts, t1 = events[events.length - 1].ts;
  const span = t1 - t0 || 1;
  const x = (e, i) => t1 === t0
    ? left + ((width - left - 20) * i) / Math.max(1, events.length - 1)
    : left + ((width - left - 20) * (e.ts - t0)) / span;
  agents.forEach((a, i) => {
    const y = 14 + i * laneH + laneH / 2;
    svg.append(s("line", { class: "lane", x1: left, x2: width - 10, y1: y, y2: y }),
      s("text", { x: 8, y: y + 4, class: "lane-agent", style: { fill: agentColour(a) } },
        short(a, 18)));
  });
  const lane = new Map(agents.map((a, i) => [a, i]));
  events.forEach((e, i) => {
    const y = 14 + (lane.get(e.agent_id) ?? 0) * laneH + laneH / 2;
    svg.append(s("a", { href: link(["p", pid, "e", e.id]) },
      s("circle", { cx: x(e, i), cy: y, r: 5, fill: typeColour(e.type), class: "node",
        dataset: { event: e.id } }, s("title", {}, `#${e.seq} ${e.type} ${fmtTime(e.ts)}\n` +
        short(e.text, 200)))));
  });
  svg.append(s("text", { x: left, y: height - 2, class: "muted" }, fmtTime(t0)),
    s("text", { x: width - 12, y: height - 2, "text-anchor": "end" }, fmtTime(t1)));
  return svg;
}

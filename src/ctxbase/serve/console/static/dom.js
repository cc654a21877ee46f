// Small DOM helpers. Everything that came from the API is put in as text (textContent or
// attribute values), never parsed as HTML.

const SVG_NS = "http://www.w3.org/2000/svg";

function fill(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "style") Object.assign(el.style, v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function fmtTime(ts) {
  if (ts === null || ts === undefined) return "-";
  const d = new Date(ts * 1000);
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

export function fmtNum(x, digits = 3) {
  if (x === null || x === undefined) return "-";
  return Number.isInteger(x) ? String(x) : x.toFixed(digits);
}

export function short(text, n = 120) {
  const flat = String(text ?? "").replace(/\s+/g, " ").trim();
  return flat.length <= n ? flat : flat.slice(0, n - 1) + "…";
}

// A stable colour per name (types, agents, layers).
const PALETTE = ["#2f5bd3", "#d9822b", "#1b998b", "#c2185b", "#7b5ea7", "#5c8a00",
  "#00838f", "#b8860b", "#6d4c41", "#e53935", "#3949ab", "#00897b"];
// Assembly layers keep one colour each, in prompt order.
const FIXED = { overhead: "#9aa3b5", system: "#3949ab", state: "#7b5ea7", task: "#d9822b",
  memory: "#1b7f3b", history: "#6d4c41", input: "#00838f" };
export function colour(name) {
  if (Object.hasOwn(FIXED, name)) return FIXED[name];
  let x = 0;
  for (const ch of String(name)) x = (x * 31 + ch.codePointAt(0)) >>> 0;
  return PALETTE[x % PALETTE.length];
}

export function swatch(name) {
  return h("span", { class: "swatch", style: { background: colour(name) } });
}

// Event types and agents are told apart by shape and by palette: a type is a tinted badge
// (the built-in types keep one colour each), an agent coloured text with a square mark,
// from a palette that shares no colour with the types'.
const EVENT_TYPE_COLOURS = { user_message: "#2f5bd3", assistant_message: "#1b998b",
  system: "#6d4c41", model_call: "#7b5ea7", tool_invocation: "#d9822b", tool_result: "#5c8a00",
  internal_thought: "#8a93a6" };
const TYPE_PALETTE = ["#00838f", "#b8860b", "#3949ab", "#8d6e63", "#00897b", "#9e7700"];
const AGENT_PALETTE = ["#c2185b", "#d32f2f", "#8e24aa", "#2e7d32", "#a15c00", "#455a64",
  "#f06292", "#212121"];

function hashed(name, palette) {
  let x = 0;
  for (const ch of String(name)) x = (x * 31 + ch.codePointAt(0)) >>> 0;
  return palette[x % palette.length];
}

export function typeColour(type) {
  if (Object.hasOwn(EVENT_TYPE_COLOURS, type)) return EVENT_TYPE_COLOURS[type];
  return hashed(type, TYPE_PALETTE);
}

export function agentColour(agent) {
  return hashed(agent, AGENT_PALETTE);
}

export function typeBadge(type) {
  const c = typeColour(type);
  return h("span", { class: "badge etype", dataset: { type },
    style: { background: `${c}1f`, borderColor: c, color: c } }, type);
}

export function agentMark(agent) {
  return h("span", { class: "swatch agent-swatch", style: { background: agentColour(agent) } });
}

export function agentName(agent) {
  return h("span", { class: "agent", dataset: { agent }, style: { color: agentColour(agent) } },
    agentMark(agent), agent);
}

export function table(headers, rows, attrs = {}) {
  return h("table", attrs,
    h("thead", {}, h("tr", {}, headers.map((x) =>
      typeof x === "string" ? h("th", {}, x) : h("th", { class: x.cls }, x.label)))),
    h("tbody", {}, rows));
}

// Hash routes: "#/p/<pid>/s/<sid>?after=3" -> {parts: ["p", pid, "s", sid], query}.
export function parseHash(hash) {
  const raw = (hash || "").replace(/^#/, "");
  const [path, qs] = raw.split("?", 2);
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(qs || "") };
}

export function link(parts, query) {
  const path = "#/" + parts.map((p) => encodeURIComponent(p)).join("/");
  const qs = query ? new URLSearchParams(query).toString() : "";
  return qs ? `${path}?${qs}` : path;
}

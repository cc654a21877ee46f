// Graphs drawn as SVG: a layered layout (causal chains: causes above, effects below) and a
// force layout snapped to a grid (entity graph). No library: a few hundred nodes at most are
// drawn at once.

import { colour, s } from "./dom.js";

let markerSeq = 0;

// Layered: each node has an integer `layer`; rows top to bottom, nodes spread in a row.
export function layeredLayout(nodes, { nodeW = 190, rowH = 92, margin = 24 } = {}) {
  const rows = new Map();
  for (const n of nodes) {
    if (!rows.has(n.layer)) rows.set(n.layer, []);
    rows.get(n.layer).push(n);
  }
  const layers = [...rows.keys()].sort((a, b) => a - b);
  const widest = Math.max(1, ...[...rows.values()].map((r) => r.length));
  const width = Math.max(720, widest * (nodeW + 24) + 2 * margin);
  layers.forEach((layer, i) => {
    const row = rows.get(layer);
    const step = (width - 2 * margin) / row.length;
    row.forEach((n, j) => {
      n.x = margin + step * (j + 0.5);
      n.y = margin + 26 + i * rowH;
    });
  });
  return { width, height: margin * 2 + 52 + (layers.length - 1) * rowH };
}

// Force-directed (Fruchterman-Reingold) from a deterministic start, so a view redraws alike.
// It runs in grid units (a cell is a box plus the gap around it, wider than tall, as the
// boxes are), then each node moves to the nearest free cell, the best connected first: no
// two boxes overlap and every box lies inside the view, which grows taller when the nodes
// need more rows than `height` holds.
export function forceLayout(nodes, edges, { width = 960, height = 620, box = [176, 40],
  gap = [50, 36], margin = 14, iterations = 250 } = {}) {
  const n = nodes.length;
  const [bw, bh] = box;
  const cellW = bw + gap[0], cellH = bh + gap[1];
  const cols = Math.max(1, Math.floor((width - 2 * margin + gap[0]) / cellW));
  // a grid with room to spare, so the layout's shape survives the snapping
  const rows = Math.max(1, Math.floor((height - 2 * margin + gap[1]) / cellH),
    Math.ceil((n * 1.5) / cols));
  height = Math.max(height, 2 * margin + rows * cellH - gap[1]);
  const x0 = (width - (cols * cellW - gap[0])) / 2 + bw / 2;
  const y0 = (height - (rows * cellH - gap[1])) / 2 + bh / 2;

  const index = new Map(nodes.map((node, i) => [node.id, i]));
  const links = edges
    .map((e) => [index.get(e.from_id), index.get(e.to_id)])
    .filter(([a, b]) => a !== undefined && b !== undefined && a !== b);
  const k = 1; // an edge's ideal length: one cell
  const far = 9; // nodes 3 cells or more apart do not push: the parts stay near each other
  const cu = (cols - 1) / 2, cv = (rows - 1) / 2;
  const u = new Float64Array(n), v = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const a = (2 * Math.PI * i) / Math.max(1, n), r = 0.6 + 0.4 * ((i * 7) % 11) / 10;
    u[i] = cu + 0.45 * cu * r * Math.cos(a);
    v[i] = cv + 0.45 * cv * r * Math.sin(a);
  }
  let t = Math.max(cols, rows) / 8;
  const du = new Float64Array(n), dv = new Float64Array(n);
  for (let it = 0; it < iterations; it++) {
    du.fill(0); dv.fill(0);
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        let ddu = u[i] - u[j], ddv = v[i] - v[j];
        let d2 = ddu * ddu + ddv * ddv;
        if (d2 > far) continue;
        if (d2 < 1e-4) { ddu = 0.01 * (i - j); ddv = 0.01; d2 = ddu * ddu + ddv * ddv; }
        const f = (k * k) / d2;
        du[i] += ddu * f; dv[i] += ddv * f; du[j] -= ddu * f; dv[j] -= ddv * f;
      }
    }
    for (const [a, b] of links) {
      const ddu = u[a] - u[b], ddv = v[a] - v[b];
      const f = Math.sqrt(ddu * ddu + ddv * ddv) / k;
      du[a] -= ddu * f; dv[a] -= ddv * f; du[b] += ddu * f; dv[b] += ddv * f;
    }
    for (let i = 0; i < n; i++) {
      du[i] += (cu - u[i]) * GRAVITY; // a pull to the centre keeps the parts together
      dv[i] += (cv - v[i]) * GRAVITY;
      const d = Math.sqrt(du[i] * du[i] + dv[i] * dv[i]) || 1;
      const step = Math.min(d, t);
      u[i] = Math.min(cols - 1, Math.max(0, u[i] + (du[i] / d) * step));
      v[i] = Math.min(rows - 1, Math.max(0, v[i] + (dv[i] / d) * step));
    }
    t = Math.max(0.01, t * 0.97);
  }
  const cell = snapToGrid(u, v, links, cols, rows);
  nodes.forEach((node, i) => {
    node.x = x0 + (cell[i] % cols) * cellW;
    node.y = y0 + Math.floor(cell[i] / cols) * cellH;
  });
  return { width, height };
}
const GRAVITY = 0.3;

// The free cell nearest each node's position, the best connected nodes first.
function snapToGrid(u, v, links, cols, rows) {
  const degree = new Array(u.length).fill(0);
  for (const [a, b] of links) { degree[a]++; degree[b]++; }
  const order = [...degree.keys()].sort((a, b) => degree[b] - degree[a] || a - b);
  const taken = new Uint8Array(cols * rows);
  const cell = new Array(u.length);
  for (const i of order) {
    let best = -1, bestD = Infinity;
    for (let c = 0; c < taken.length; c++) {
      if (taken[c]) continue;
      const ddu = (c % cols) - u[i], ddv = Math.floor(c / cols) - v[i];
      const d = ddu * ddu + ddv * ddv;
      if (d < bestD) { bestD = d; best = c; }
    }
    taken[best] = 1;
    cell[i] = best;
  }
  return cell;
}

// `text` cut (with "…") to fit `px` pixels in the page's font, measured, not guessed: a
// Chinese character is about twice as wide as a Latin letter.
let measurer = null;
export function fitText(text, px, size = 11) {
  const flat = String(text ?? "").replace(/\s+/g, " ").trim();
  measurer ??= document.createElement("canvas").getContext("2d");
  measurer.font = `${size}px ${getComputedStyle(document.documentElement).fontFamily}`;
  const width = (x) => measurer.measureText(x).width;
  if (width(flat) <= px) return flat;
  const chars = [...flat];
  let lo = 0, hi = chars.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (width(chars.slice(0, mid).join("") + "…") <= px) lo = mid; else hi = mid - 1;
  }
  return chars.slice(0, lo).join("") + "…";
}

function arrowMarker(id) {
  return s("marker", {
    id, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7,
    orient: "auto-start-reverse",
  }, s("path", { d: "M0,0 L10,5 L0,10 z", fill: "#9aa3b5" }));
}

// Where the line from (x1,y1) to the centre of a w*h box at (x2,y2) meets the box.
function clip(x1, y1, x2, y2, w, hgt) {
  const ddx = x1 - x2, ddy = y1 - y2;
  if (!ddx && !ddy) return [x2, y2];
  const sx = ddx ? (w / 2) / Math.abs(ddx) : Infinity, sy = ddy ? (hgt / 2) / Math.abs(ddy) : Infinity;
  const f = Math.min(sx, sy, 1);
  return [x2 + ddx * f, y2 + ddy * f];
}

// nodes: {id, x, y, label, sub, type, focus}; edges: {id, from_id, to_id, label, title}
export function drawGraph({ nodes, edges, width, height, box = [176, 40], onNode, onEdge,
  edgeLabels = true, cls = "graph" }) {
  const marker = `arrow-${++markerSeq}`;
  const svg = s("svg", {
    class: cls, width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
  }, s("defs", {}, arrowMarker(marker)));
  const at = new Map(nodes.map((n) => [n.id, n]));
  const [bw, bh] = box;
  const edgeLayer = s("g", { class: "edges" });
  for (const e of edges) {
    const a = at.get(e.from_id), b = at.get(e.to_id);
    if (!a || !b) continue;
    const [x2, y2] = clip(a.x, a.y, b.x, b.y, bw + 6, bh + 6);
    const g = s("g", { class: "edge-g", dataset: { edge: e.id, type: e.type || "" } },
      s("title", {}, e.title || e.label || ""),
      s("line", { class: "edge", x1: a.x, y1: a.y, x2, y2, "marker-end": `url(#${marker})` }));
    if (edgeLabels && e.label) {
      // a label between two boxes side by side would hide under them: above the row instead
      const flat = Math.abs(a.y - b.y) < bh;
      const y = flat ? Math.min(a.y, b.y) - bh / 2 - 4 : (a.y + b.y) / 2 - 3;
      g.append(s("text", {
        class: "edge-label", x: (a.x + b.x) / 2, y, "text-anchor": "middle",
      }, e.label));
    }
    if (onEdge) {
      g.addEventListener("click", (ev) => { ev.stopPropagation(); onEdge(e, g); });
      g.style.cursor = "pointer";
    }
    edgeLayer.append(g);
  }
  svg.append(edgeLayer);
  const nodeLayer = s("g", { class: "nodes" });
  for (const n of nodes) {
    const fillColour = n.colour || colour(n.type);
    const g = s("g", {
      class: "node" + (n.focus ? " focus" : ""), transform: `translate(${n.x},${n.y})`,
      dataset: { node: n.id, type: n.type },
    },
    s("title", {}, n.title || `${n.label}\n${n.sub || ""}`),
    // an opaque box first: an edge or its label passing under a node does not show through
    s("rect", { x: -bw / 2, y: -bh / 2, width: bw, height: bh, rx: 6, fill: "#fff" }),
    s("rect", { x: -bw / 2, y: -bh / 2, width: bw, height: bh, rx: 6, fill: fillColour,
      "fill-opacity": n.kind === "event" ? 0.18 : 0.16 }),
    s("rect", { x: -bw / 2, y: -bh / 2, width: 5, height: bh, rx: 2, fill: fillColour }),
    s("text", { x: -bw / 2 + 10, y: -3, class: "label" }, fitText(n.label, bw - 18)),
    s("text", { x: -bw / 2 + 10, y: 12, class: "muted sub", fill: "#687085" },
      fitText(n.sub || "", bw - 18)));
    if (onNode) g.addEventListener("click", () => onNode(n, g));
    nodeLayer.append(g);
  }
  svg.append(nodeLayer);
  return svg;
}

// Graphs drawn as SVG: a layered layout (causal chains: causes above, effects below) and a
// force layout (entity graph). No library: a few hundred nodes at most are drawn at once.

import { colour, s, short } from "./dom.js";

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
export function forceLayout(nodes, edges, { width = 960, height = 620, iterations = 220 } = {}) {
  const n = nodes.length;
  const index = new Map(nodes.map((node, i) => [node.id, i]));
  const area = width * height;
  const k = Math.sqrt(area / Math.max(1, n)) * 0.75;
  nodes.forEach((node, i) => {
    const a = (2 * Math.PI * i) / Math.max(1, n);
    const r = Math.min(width, height) * 0.38 * (0.6 + 0.4 * ((i * 7) % 11) / 10);
    node.x = width / 2 + r * Math.cos(a);
    node.y = height / 2 + r * Math.sin(a);
  });
  const links = edges
    .map((e) => [index.get(e.from_id), index.get(e.to_id)])
    .filter(([a, b]) => a !== undefined && b !== undefined && a !== b);
  let t = width / 10;
  const dx = new Float64Array(n), dy = new Float64Array(n);
  for (let it = 0; it < iterations; it++) {
    dx.fill(0); dy.fill(0);
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        let ddx = nodes[i].x - nodes[j].x, ddy = nodes[i].y - nodes[j].y;
        let d2 = ddx * ddx + ddy * ddy;
        if (d2 < 0.01) { ddx = 0.1 * (i - j); ddy = 0.1; d2 = ddx * ddx + ddy * ddy; }
        const f = (k * k) / d2;
        dx[i] += ddx * f; dy[i] += ddy * f; dx[j] -= ddx * f; dy[j] -= ddy * f;
      }
    }
    for (const [a, b] of links) {
      const ddx = nodes[a].x - nodes[b].x, ddy = nodes[a].y - nodes[b].y;
      const d = Math.sqrt(ddx * ddx + ddy * ddy) || 0.01;
      const f = d / k;
      dx[a] -= ddx * f; dy[a] -= ddy * f; dx[b] += ddx * f; dy[b] += ddy * f;
    }
    for (let i = 0; i < n; i++) {
      // a weak pull to the centre keeps separate components on screen
      dx[i] += (width / 2 - nodes[i].x) * 0.02 * k / 10;
      dy[i] += (height / 2 - nodes[i].y) * 0.02 * k / 10;
      const d = Math.sqrt(dx[i] * dx[i] + dy[i] * dy[i]) || 1;
      const step = Math.min(d, t);
      nodes[i].x = Math.min(width - 40, Math.max(40, nodes[i].x + (dx[i] / d) * step));
      nodes[i].y = Math.min(height - 24, Math.max(24, nodes[i].y + (dy[i] / d) * step));
    }
    t = Math.max(0.5, t * 0.97);
  }
  return { width, height };
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
      g.append(s("text", {
        class: "edge-label", x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 3, "text-anchor": "middle",
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
    const fillColour = colour(n.type);
    const g = s("g", {
      class: "node" + (n.focus ? " focus" : ""), transform: `translate(${n.x},${n.y})`,
      dataset: { node: n.id, type: n.type },
    },
    s("title", {}, n.title || `${n.label}\n${n.sub || ""}`),
    s("rect", { x: -bw / 2, y: -bh / 2, width: bw, height: bh, rx: 6, fill: fillColour,
      "fill-opacity": n.kind === "event" ? 0.18 : 0.16 }),
    s("rect", { x: -bw / 2, y: -bh / 2, width: 5, height: bh, rx: 2, fill: fillColour }),
    s("text", { x: -bw / 2 + 10, y: -3 }, short(n.label, 28)),
    s("text", { x: -bw / 2 + 10, y: 12, class: "muted", fill: "#687085" }, short(n.sub || "", 30)));
    if (onNode) g.addEventListener("click", () => onNode(n, g));
    nodeLayer.append(g);
  }
  svg.append(nodeLayer);
  return svg;
}

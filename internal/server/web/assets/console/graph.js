// The transitions a field actually took, drawn as a graph: one box per
// value, laid out left to right by how many moves it is from a new
// document, and an arrow per transition labelled with its count.

import { s, statusLabel, statusClass } from "./ui.js";

const COL = 150; // distance between columns
const ROW = 70; // distance between boxes in a column
const W = 100; // box size
const H = 36;
const LOOP_ROOM = 62; // above the boxes, for moves that keep the value
const BACK_ROOM = 62; // below, for moves back to an earlier value
const EDGE = 16;

export function transitionGraph(transitions) {
  const key = (v) => JSON.stringify(v ?? null);
  const nodes = new Map(); // key -> {value, rank, row}
  const add = (v) => nodes.has(key(v)) || nodes.set(key(v), { value: v ?? null, rank: -1 });
  add(null);
  for (const t of transitions) {
    add(t.from);
    add(t.to);
  }

  // Rank: moves from "new" (breadth first), so back edges point left.
  const out = new Map();
  for (const t of transitions) {
    if (key(t.from) === key(t.to)) continue;
    if (!out.has(key(t.from))) out.set(key(t.from), []);
    out.get(key(t.from)).push(key(t.to));
  }
  nodes.get("null").rank = 0;
  const queue = ["null"];
  while (queue.length) {
    const k = queue.shift();
    for (const n of out.get(k) || []) {
      if (nodes.get(n).rank < 0) {
        nodes.get(n).rank = nodes.get(k).rank + 1;
        queue.push(n);
      }
    }
  }
  let maxRank = Math.max(...[...nodes.values()].map((n) => n.rank));
  for (const n of nodes.values()) if (n.rank < 0) n.rank = ++maxRank;
  const cols = [];
  for (const n of [...nodes.values()].sort((a, b) => statusLabel(a.value).localeCompare(statusLabel(b.value)))) {
    (cols[n.rank] ||= []).push(n);
  }
  const rows = Math.max(...cols.map((c) => (c ? c.length : 0)));
  const loops = transitions.some((t) => key(t.from) === key(t.to));
  const backs = transitions.some((t) => nodes.get(key(t.to)).rank <= nodes.get(key(t.from)).rank && key(t.from) !== key(t.to));
  const top = loops ? LOOP_ROOM : EDGE;
  for (const c of cols) c?.forEach((n, i) => {
    n.x = 20 + n.rank * COL;
    n.y = top + (i + (rows - c.length) / 2) * ROW;
  });

  const width = 20 + (maxRank + 1) * COL - (COL - W) + 20;
  const height = top + (rows - 1) * ROW + H + (backs ? BACK_ROOM : EDGE);
  const svg = s("svg", { class: "graph", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": "Transitions between statuses with their counts" },
  s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
    s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }))));

  const edges = s("g", {});
  const labels = s("g", {});
  for (const t of transitions) {
    const a = nodes.get(key(t.from));
    const b = nodes.get(key(t.to));
    let d;
    let lx;
    let ly;
    if (a === b) {
      // A move that keeps the value: a loop over the box.
      const cx = a.x + W / 2;
      d = `M${cx - 18},${a.y} C${cx - 40},${a.y - 52} ${cx + 40},${a.y - 52} ${cx + 18},${a.y}`;
      lx = cx;
      ly = a.y - 44;
    } else if (b.rank > a.rank) {
      const x1 = a.x + W;
      const y1 = a.y + H / 2;
      const x2 = b.x;
      const y2 = b.y + H / 2;
      d = `M${x1},${y1} C${x1 + 50},${y1} ${x2 - 50},${y2} ${x2 - 2},${y2}`;
      lx = (x1 + x2) / 2;
      ly = (y1 + y2) / 2;
    } else {
      // Back (or sideways) moves run under the boxes.
      const x1 = a.x + W / 2 - 14;
      const x2 = b.x + W / 2 + 14;
      const y = Math.max(a.y, b.y) + H;
      const dip = y + 30 + 8 * Math.abs(a.rank - b.rank);
      d = `M${x1},${a.y + H} C${x1},${dip} ${x2},${dip} ${x2},${b.y + H + 2}`;
      lx = (x1 + x2) / 2;
      ly = dip - 6;
    }
    const what = `${statusLabel(t.from)} → ${statusLabel(t.to)}: ${t.count} time${t.count === 1 ? "" : "s"}`;
    edges.append(s("path", { d, class: "edge", "marker-end": "url(#arrow)" }, s("title", {}, what)));
    const text = String(t.count);
    const tw = 10 + text.length * 8;
    labels.append(s("g", { class: "count", "data-edge": `${statusLabel(t.from)}->${statusLabel(t.to)}` },
      s("title", {}, what),
      s("rect", { x: lx - tw / 2, y: ly - 10, width: tw, height: 20, rx: 10 }),
      s("text", { x: lx, y: ly + 4.5, "text-anchor": "middle" }, text)));
  }
  svg.append(edges);
  for (const n of nodes.values()) {
    svg.append(s("g", { class: "node " + statusClass(n.value), "data-status": statusLabel(n.value) },
      s("rect", { x: n.x, y: n.y, width: W, height: H, rx: 8 }),
      s("text", { x: n.x + W / 2, y: n.y + H / 2 + 5, "text-anchor": "middle" }, statusLabel(n.value))));
  }
  svg.append(labels);
  return svg;
}

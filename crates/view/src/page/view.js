// The offhost live view: keeps what the server pushed (a map from paths to values), rebuilds
// the pipelines from it, lays each graph out in layers and draws it as SVG.
"use strict";

const flat = new Map();
let selected = null;
let source = null;
const prev = new Map(); // task index -> {t, out, bytes, busy}: the last numbers, for rates
const rates = new Map();

function unflatten() {
  const root = {};
  for (const [path, value] of flat) {
    const keys = path.split("/");
    let o = root;
    for (let i = 0; i < keys.length - 1; i++) {
      const k = keys[i];
      if (o[k] === undefined || o[k] === null || typeof o[k] !== "object") {
        o[k] = /^\d+$/.test(keys[i + 1]) ? [] : {};
      }
      o = o[k];
    }
    o[keys[keys.length - 1]] = value;
  }
  return root;
}

function connect() {
  if (source) source.close();
  flat.clear();
  prev.clear();
  rates.clear();
  const q = selected === null ? "" : "?pipeline=" + selected;
  source = new EventSource("/api/events" + q);
  const link = document.getElementById("link");
  source.onopen = () => { link.textContent = "live"; link.className = "link live"; };
  source.onerror = () => { link.textContent = "disconnected: retrying"; link.className = "link"; };
  source.onmessage = (ev) => {
    const change = JSON.parse(ev.data);
    for (const [k, v] of Object.entries(change.set)) flat.set(k, v);
    for (const k of change.del) flat.delete(k);
    render(unflatten());
  };
}

function select(id) {
  selected = id;
  location.hash = id === null ? "" : "#" + id;
  connect();
}

function human(n, unit) {
  if (!isFinite(n)) return "–";
  const steps = ["", "k", "M", "G", "T"];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < steps.length - 1) { n /= 1000; i++; }
  return (n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + steps[i] + unit;
}

function el(tag, attrs, text) {
  const svg = ["svg", "g", "rect", "text", "path", "title", "tspan", "circle"].includes(tag);
  const e = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function renderList(list) {
  const nav = document.getElementById("list");
  nav.replaceChildren();
  for (const p of list || []) {
    const a = el("a", { href: "#" + p.id, "data-pipeline": p.id }, "");
    a.append(el("span", {}, "#" + p.id + " " + (p.name || "")));
    a.append(el("span", { class: "state " + p.state }, p.state));
    if (p.id === selected) a.className = "sel";
    a.onclick = (e) => { e.preventDefault(); select(p.id); };
    nav.append(a);
  }
  if (selected === null && list && list.length > 0) select(list[list.length - 1].id);
}

function updateRates(p) {
  const t = p.stats.elapsed_s;
  p.stats.tasks.forEach((s, i) => {
    const last = prev.get(i);
    if (last && t > last.t) {
      const dt = t - last.t;
      // A task that puts nothing out (a sink, or one that waits for the end) by what it takes.
      const out = s.buffers_out > 0 || s.buffers_in === 0;
      rates.set(i, {
        dir: out ? "out" : "in",
        bufs: ((out ? s.buffers_out : s.buffers_in) - (out ? last.out : last.in)) / dt,
        bytes: ((out ? s.bytes_out : s.bytes_in) - (out ? last.bytes : last.bytesIn)) / dt,
        busy: Math.min(1, (s.busy_ns - last.busy) / (dt * 1e9)),
      });
    }
    if (!last || t > last.t) {
      prev.set(i, { t, out: s.buffers_out, bytes: s.bytes_out, in: s.buffers_in, bytesIn: s.bytes_in, busy: s.busy_ns });
    }
  });
}

// Layers by longest path from the sources; order within a layer by the mean position of
// the tasks that feed it (two sweeps).
function layout(shape) {
  const n = shape.tasks.length;
  const preds = Array.from({ length: n }, () => []);
  for (const q of shape.queues) for (const w of q.writers) preds[q.reader].push(w);
  const layer = new Array(n).fill(-1);
  const depth = (i, seen) => {
    if (layer[i] >= 0) return layer[i];
    if (seen.has(i)) return 0;
    seen.add(i);
    let d = 0;
    for (const p of preds[i]) d = Math.max(d, depth(p, seen) + 1);
    layer[i] = d;
    return d;
  };
  for (let i = 0; i < n; i++) depth(i, new Set());
  const layers = [];
  layer.forEach((l, i) => (layers[l] = layers[l] || []).push(i));
  const pos = new Array(n).fill(0);
  for (let sweep = 0; sweep < 2; sweep++) {
    for (const ls of layers) {
      if (!ls) continue;
      ls.forEach((t, k) => (pos[t] = k));
      ls.sort((a, b) => {
        const m = (t) => preds[t].length ? preds[t].reduce((s, p) => s + pos[p], 0) / preds[t].length : pos[t];
        return m(a) - m(b);
      });
      ls.forEach((t, k) => (pos[t] = k));
    }
  }
  return { layer, pos };
}

function fillClass(depth, cap) {
  if (!cap) return "fill-ok";
  const f = depth / cap;
  return f <= 0.6 ? "fill-ok" : f <= 0.85 ? "fill-warn" : "fill-bad";
}

const W = 200, H = 92, GX = 110, GY = 50, POOLH = 20;

function renderGraph(p) {
  const svg = document.getElementById("graph");
  svg.replaceChildren();
  const shape = p.shape, stats = p.stats;
  const { layer, pos } = layout(shape);
  const poolsOf = shape.tasks.map((t) => [...new Set((t.pools || []).filter((x) => x !== null))]);
  const rowH = H + GY + POOLH * Math.max(0, ...poolsOf.map((x) => x.length));
  const xy = (i) => [30 + layer[i] * (W + GX), 40 + pos[i] * rowH];
  const maxX = Math.max(0, ...layer) + 1, maxY = Math.max(0, ...pos) + 1;
  svg.setAttribute("width", 60 + maxX * (W + GX) - GX);
  svg.setAttribute("height", 60 + maxY * rowH);
  // Engines (@NAME) as clusters behind their tasks.
  const engines = [...new Set(shape.tasks.map((t) => t.engine).filter((e) => e))];
  for (const e of engines) {
    const mine = shape.tasks.map((t, i) => [t, i]).filter(([t]) => t.engine === e).map(([, i]) => xy(i));
    const x0 = Math.min(...mine.map((a) => a[0])) - 12, y0 = Math.min(...mine.map((a) => a[1])) - 26;
    const x1 = Math.max(...mine.map((a) => a[0])) + W + 12, y1 = Math.max(...mine.map((a) => a[1])) + H + 12;
    svg.append(el("rect", { class: "cluster", x: x0, y: y0, width: x1 - x0, height: y1 - y0, rx: 8 }));
    svg.append(el("text", { class: "cluster-label", x: x0 + 8, y: y0 + 16 }, "@" + e));
  }
  // Queues: an edge per writer, coloured by fill.
  shape.queues.forEach((q, qi) => {
    const s = stats.queues[qi] || {};
    const cls = fillClass(s.depth || 0, q.capacity);
    for (const w of q.writers) {
      const [x0, y0] = xy(w), [x1, y1] = xy(q.reader);
      const a = [x0 + W, y0 + H / 2], b = [x1, y1 + H / 2];
      const mx = (a[0] + b[0]) / 2;
      const g = el("g", { "data-queue": q.name });
      g.append(el("path", { class: "edge " + cls, d: `M${a[0]},${a[1]} C${mx},${a[1]} ${mx},${b[1]} ${b[0] - 6},${b[1]}`, fill: "none" }));
      g.append(el("path", { class: cls, d: `M${b[0] - 8},${b[1] - 5} L${b[0]},${b[1]} L${b[0] - 8},${b[1] + 5} z` }));
      const cap = q.capacity ? "/" + q.capacity : "";
      g.append(el("text", { class: "qlabel", x: mx, y: (a[1] + b[1]) / 2 - 6, "text-anchor": "middle" },
        `${q.name}  ${s.depth || 0}${cap}`));
      svg.append(g);
    }
  });
  // Tasks.
  shape.tasks.forEach((t, i) => {
    const s = stats.tasks[i] || {};
    const r = rates.get(i);
    const [x, y] = xy(i);
    const state = s.error ? "failed" : s.done ? "done" : "running";
    const g = el("g", { class: "task " + state, "data-task": i, transform: `translate(${x},${y})` });
    g.append(el("rect", { class: "box", width: W, height: H }));
    if (r && state === "running") g.append(el("rect", { class: "busy", x: 2, y: H - 8, width: (W - 4) * r.busy, height: 6 }));
    g.append(el("text", { class: "name", x: 10, y: 18 }, t.name));
    g.append(el("text", { class: "small", x: W - 10, y: 18, "text-anchor": "end" }, "line " + t.line));
    const rate = r ? `${r.dir} ${human(r.bufs, "buf/s")} · ${human(r.bytes, "B/s")}` : "–";
    g.append(el("text", { class: "small rate", x: 10, y: 38 }, rate));
    g.append(el("text", { class: "small counters", x: 10, y: 54, "data-counter": "buffers_out" },
      `${human(s.buffers_out, "buf")} · ${human(s.bytes_out, "B")} out`));
    const busy = r ? ` · busy ${(r.busy * 100).toFixed(0)}%` : "";
    g.append(el("text", { class: "small", x: 10, y: 70 }, state + busy));
    // Where it failed, in the box itself; else its own short report.
    const line = s.error ? "error: " + s.error : s.report;
    if (line) g.append(el("text", { class: s.error ? "small error" : "small", x: 10, y: 84 }, line.slice(0, 32)));
    g.append(el("title", {}, s.error ? "failed: " + s.error : s.report || t.name));
    // Free lists this task allocates from, under it.
    poolsOf[i].forEach((pi, k) => {
      const pool = shape.pools[pi], ps = stats.pools[pi] || {};
      const pg = el("g", { class: "pool", "data-pool": pool.name, transform: `translate(12,${H + 4 + k * POOLH})` });
      pg.append(el("rect", { width: W - 24, height: POOLH - 4, rx: 8 }));
      const share = pool.count ? Math.round((100 * (ps.free || 0)) / pool.count) : 0;
      pg.append(el("text", { x: 8, y: 12 }, `${pool.name}: ${share}% free · ${ps.empty || 0} waits`));
      g.append(pg);
    });
    svg.append(g);
  });
}

function renderShown(p) {
  const box = document.getElementById("shown");
  const keep = new Map([...box.children].map((f) => [f.dataset.key, f]));
  const seen = new Set();
  for (const s of p.shown || []) {
    const key = s.task + "/" + s.name;
    seen.add(key);
    let f = keep.get(key);
    if (!f) {
      f = el("figure", { "data-key": key });
      f.append(s.kind === "picture" ? el("img", { alt: s.name }) : el("div", { class: "meters" }));
      f.append(el("figcaption"));
      box.append(f);
    }
    const task = p.shape.tasks[s.task];
    f.querySelector("figcaption").textContent = `${s.name}: ${task ? task.name + " (line " + task.line + ")" : "task " + s.task}`;
    if (s.kind === "picture") {
      const img = f.querySelector("img");
      const src = `/api/pipelines/${p.id}/shown/${s.task}/${encodeURIComponent(s.name)}.png?seq=${s.seq}`;
      if (img.dataset.seq !== String(s.seq)) { img.src = src; img.dataset.seq = String(s.seq); }
    } else {
      const m = f.querySelector(".meters");
      m.replaceChildren();
      for (const x of s.meters || []) {
        const row = el("div", { class: "meter" });
        const share = Math.max(0, Math.min(1, (x.value - x.min) / ((x.max - x.min) || 1)));
        const bar = el("div", { class: "bar" });
        bar.append(el("div", { style: `width:${(share * 100).toFixed(1)}%` }));
        row.append(el("span", {}, x.label), bar, el("span", {}, `${x.value.toFixed(1)} ${x.unit}`));
        m.append(row);
      }
    }
  }
  for (const [k, f] of keep) if (!seen.has(k)) f.remove();
}

function render(root) {
  renderList(root.pipelines);
  const p = root.pipeline;
  const head = document.getElementById("head");
  if (!p || !p.shape) { head.textContent = "no pipeline"; return; }
  updateRates(p);
  head.replaceChildren(
    el("h2", {}, `#${p.id} ${p.name || ""}`),
    el("div", { class: "sub" }, `${p.state} · ${p.stats.elapsed_s.toFixed(1)} s · ${p.shape.tasks.length} tasks`));
  head.dataset.state = p.state;
  const err = document.getElementById("error");
  err.hidden = !p.error;
  err.textContent = p.error ? "failed: " + p.error : "";
  renderGraph(p);
  renderShown(p);
  const links = document.getElementById("links");
  links.replaceChildren(
    el("a", { href: `/api/pipelines/${p.id}` }, "JSON"),
    el("a", { href: `/api/pipelines/${p.id}/dot` }, "Graphviz dot"));
}

window.addEventListener("hashchange", () => {
  const id = parseInt(location.hash.slice(1), 10);
  if (!isNaN(id) && id !== selected) select(id);
});
{
  const id = parseInt(location.hash.slice(1), 10);
  selected = isNaN(id) ? null : id;
  connect();
}

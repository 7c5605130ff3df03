// duplex-eval report: sortable tables, one-click window filters, the episode timeline. Plain JS, no network.
"use strict";

// ---- sorting: click a header; numbers sort by data-sort, text by its words; empty cells go last -------------
function cellKey(td) {
  if (!td) return null;
  const s = td.getAttribute("data-sort");
  if (s !== null && s !== "") { const v = parseFloat(s); return isNaN(v) ? null : v; }
  const t = td.textContent.trim();
  return t === "" || t === "–" ? null : t.toLowerCase();
}

function sortTable(table, col, dir) {
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const keyed = rows.map((r, i) => [cellKey(r.cells[col]), i, r]);
  keyed.sort((a, b) => {
    if (a[0] === null && b[0] === null) return a[1] - b[1];
    if (a[0] === null) return 1;
    if (b[0] === null) return -1;
    let c;
    if (typeof a[0] === "number" && typeof b[0] === "number") c = a[0] - b[0];
    else c = String(a[0]).localeCompare(String(b[0]), undefined, {numeric: true});
    return (c === 0 ? a[1] - b[1] : c * dir);
  });
  const frag = document.createDocumentFragment();
  keyed.forEach(k => frag.appendChild(k[2]));
  body.appendChild(frag);
  Array.from(table.tHead.rows[0].cells).forEach((th, i) =>
    th.setAttribute("aria-sort", i === col ? (dir > 0 ? "ascending" : "descending") : "none"));
}

document.querySelectorAll("table.sortable").forEach(table => {
  if (!table.tHead) return;
  Array.from(table.tHead.rows[0].cells).forEach((th, col) => {
    th.addEventListener("click", () => {
      const now = th.getAttribute("aria-sort");
      // numbers first sort high to low (best first for most scores), names A to Z
      const firstRow = table.tBodies[0].rows[0];
      const numeric = firstRow && typeof cellKey(firstRow.cells[col]) === "number";
      const dir = now === "descending" ? 1 : now === "ascending" ? -1 : (numeric ? -1 : 1);
      sortTable(table, col, dir);
    });
  });
});

// ---- filtering: selects and a text box above a table; the windows table keeps its filter in the URL hash ----
function applyFilters(box) {
  const table = document.getElementById(box.getAttribute("data-target"));
  if (!table) return;
  const want = {};
  box.querySelectorAll("[data-filter]").forEach(c => { if (c.value) want[c.getAttribute("data-filter")] = c.value; });
  const q = (want.q || "").toLowerCase();
  let shown = 0;
  const rows = table.tBodies[0].rows;
  for (const row of rows) {
    let ok = true;
    for (const k in want) {
      if (k === "q") continue;
      const have = row.getAttribute("data-" + k);
      // a row's attribute may hold several values ("fail pass": one verdict per metric): any of them matches
      if (have !== null && !have.split(" ").includes(want[k])) { ok = false; break; }
    }
    if (ok && q) ok = row.textContent.toLowerCase().includes(q);
    row.hidden = !ok;
    if (ok) shown++;
  }
  const count = document.querySelector(`[data-count-of="${table.id}"]`);
  if (count) count.textContent = `${shown} of ${rows.length} shown`;
  if (box.hasAttribute("data-hash")) {
    const h = new URLSearchParams(want).toString();
    history.replaceState(null, "", h ? "#" + h : location.pathname + location.search);
  }
}

function filtersFromHash() {
  const box = document.querySelector(".filters[data-hash]");
  if (!box) return;
  const got = new URLSearchParams(location.hash.slice(1));
  box.querySelectorAll("[data-filter]").forEach(c => {
    const v = got.get(c.getAttribute("data-filter")) || "";
    if (c.tagName === "SELECT" && v && !Array.from(c.options).some(o => o.value === v)) {
      c.add(new Option(v, v));  // a label no run of this report has: show it, match nothing
    }
    c.value = v;
  });
  applyFilters(box);
}

const startHash = location.hash.length > 1;  // read before any filter rewrites it
document.querySelectorAll(".filters").forEach(box => {
  box.querySelectorAll("[data-filter]").forEach(c =>
    c.addEventListener(c.tagName === "INPUT" ? "input" : "change", () => applyFilters(box)));
  if (!(startHash && box.hasAttribute("data-hash"))) applyFilters(box);
});
window.addEventListener("hashchange", filtersFromHash);
if (startHash) filtersFromHash();

// ---- the timeline: both channels' envelopes, the user's clips by label, the model's VAD speech, each scored
// window shaded by its verdict; a playhead follows the audio and a click seeks it -----------------------------
const LABEL_COLOURS = {PRE: "#bbbbbb", T: "#1f77b4", N1: "#9467bd", N2: "#8c564b", N3: "#7f7f7f", N4Q: "#ff7f0e",
                       N4R: "#d62728"};
const VERDICT_COLOURS = {pass: "rgba(44,160,44,0.18)", fail: "rgba(214,39,40,0.20)",
                         failed: "rgba(214,39,40,0.35)", "not scored": "rgba(120,120,120,0.15)",
                         mixed: "rgba(255,170,0,0.22)"};  // some of the window's metrics pass, some fail

// One character per envelope value (media.py): 6 bits, sqrt-companded; back to a linear peak in [0, 1].
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
function decode(text) {
  const out = new Float32Array((text || "").length);
  for (let i = 0; i < out.length; i++) { const q = ALPHABET.indexOf(text[i]) / 63; out[i] = q * q; }
  return out;
}

function labelColour(label) {
  if (LABEL_COLOURS[label]) return LABEL_COLOURS[label];
  let h = 0;
  for (const ch of String(label)) h = (h * 31 + ch.charCodeAt(0)) % 150;
  return `hsl(${h + 190},50%,55%)`;  // blues, purples, oranges: never the verdicts' green or red
}

function drawTimeline(canvas, data, playhead) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 1200, h = canvas.clientHeight || 240;
  if (canvas.width !== Math.round(w * dpr)) { canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr); }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const dur = data.dur || 1, left = 70, right = 10, axis = 18;
  const x = t => left + (w - left - right) * t / dur;
  const lane = (h - axis) / 2;
  ctx.font = "11px system-ui, sans-serif";
  // scoring windows, shaded over both lanes, with label and verdict on top
  for (const [a, b, verdict, label] of data.win || []) {
    ctx.fillStyle = VERDICT_COLOURS[verdict] || VERDICT_COLOURS["not scored"];
    ctx.fillRect(x(a), 0, Math.max(1, x(b) - x(a)), h - axis);
    ctx.fillStyle = verdict === "pass" ? "#1a7f1a" : verdict === "mixed" ? "#a65f00" : "#b01c1c";
    const mark = verdict === "pass" ? "✓" : verdict === "not scored" ? "·" : verdict === "mixed" ? "✓✗" : "✗";
    ctx.fillText(`${label} ${mark}`, x(a) + 2, lane + 12);
  }
  // the user's clips (gold timeline) in the user lane
  for (const [a, b, label, text] of data.user || []) {
    ctx.fillStyle = labelColour(label);
    ctx.globalAlpha = 0.35;
    ctx.fillRect(x(a), 2, Math.max(1, x(b) - x(a)), lane - 4);
    ctx.globalAlpha = 1;
    ctx.fillStyle = "#333";
    ctx.fillText(label, x(a) + 2, 12);
    if (text) {  // the clip's words, cut to its width (the full text: hover, or the table below the figure)
      ctx.save();
      ctx.beginPath(); ctx.rect(x(a), 14, Math.max(1, x(b) - x(a) - 2), lane - 16); ctx.clip();
      ctx.fillStyle = "#555";
      ctx.fillText(text, x(a) + 2, lane - 8);
      ctx.restore();
    }
  }
  // the model's VAD speech in the model lane
  ctx.fillStyle = "#1f77b4";
  for (const [a, b] of data.model || []) ctx.fillRect(x(a), lane + lane - 8, Math.max(1, x(b) - x(a)), 5);
  // envelopes
  const hop = data.hop || 0.02;
  (data.env || []).forEach((b64, ch) => {
    const env = decode(b64), mid = lane * ch + lane / 2, half = lane / 2 - 6;
    ctx.fillStyle = "#444";
    const step = Math.max(1, Math.floor(env.length / (w - left - right)));
    for (let i = 0; i < env.length; i += step) {
      let m = 0;
      for (let j = i; j < Math.min(env.length, i + step); j++) m = Math.max(m, env[j]);
      const y = half * m;
      ctx.fillRect(x(i * hop), mid - y, Math.max(1, x(step * hop) - x(0)), Math.max(0.5, 2 * y));
    }
  });
  // lanes, names, time axis
  ctx.strokeStyle = "#ccc";
  ctx.beginPath(); ctx.moveTo(left, lane); ctx.lineTo(w - right, lane); ctx.stroke();
  ctx.fillStyle = "#222";
  ctx.fillText("user (ch0)", 4, lane / 2 + 4);
  ctx.fillText("model (ch1)", 4, lane * 1.5 + 4);
  const tick = dur > 120 ? 20 : dur > 40 ? 5 : dur > 10 ? 2 : 1;
  ctx.fillStyle = "#666";
  for (let t = 0; t <= dur; t += tick) {
    ctx.fillRect(x(t), h - axis, 1, 4);
    ctx.fillText(`${t}s`, x(t) - 6, h - 4);
  }
  if (playhead !== null && playhead !== undefined) {
    ctx.fillStyle = "#000";
    ctx.fillRect(x(playhead), 0, 1.5, h - axis);
  }
  canvas.dataset.drawn = "1";
  canvas._toTime = px => Math.min(dur, Math.max(0, (px - left) * dur / (w - left - right)));
  canvas._clipAt = px => {  // the user clip under a point of the figure, for its hover text
    const t = canvas._toTime(px);
    return (data.user || []).find(([a, b]) => a <= t && t <= b);
  };
}

document.querySelectorAll("canvas.timeline").forEach(canvas => {
  const src = document.getElementById(canvas.getAttribute("data-json"));
  if (!src) return;
  const data = JSON.parse(src.textContent);
  const audio = document.getElementById(canvas.getAttribute("data-audio"));
  const redraw = () => drawTimeline(canvas, data, audio ? audio.currentTime : null);
  redraw();
  window.addEventListener("resize", redraw);
  if (!audio) return;
  let raf = 0;
  const tickFn = () => { redraw(); if (!audio.paused) raf = requestAnimationFrame(tickFn); };
  audio.addEventListener("play", () => { cancelAnimationFrame(raf); raf = requestAnimationFrame(tickFn); });
  audio.addEventListener("seeked", redraw);
  audio.addEventListener("pause", redraw);
  canvas.addEventListener("mousemove", ev => {
    const clip = canvas._clipAt(ev.clientX - canvas.getBoundingClientRect().left);
    canvas.title = clip ? `${clip[2]} ${clip[0].toFixed(2)}–${clip[1].toFixed(2)} s: ${clip[3] || ""}` : "";
  });
  canvas.addEventListener("click", ev => {
    const r = canvas.getBoundingClientRect();
    audio.currentTime = canvas._toTime(ev.clientX - r.left);
    redraw();
  });
  // a window row seeks the audio to the window's start
  document.querySelectorAll("tr[data-start]").forEach(row => row.addEventListener("click", ev => {
    if (ev.target.tagName === "A") return;
    audio.currentTime = parseFloat(row.getAttribute("data-start"));
    redraw();
  }));
});

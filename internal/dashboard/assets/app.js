// The dashboard: polls snapshot.json and draws it. Every value is set as
// text, never as HTML, since keys and names come from callers.
"use strict";

const refreshMillis = 2000;
let previous = null; // the last snapshot, for rates

function cell(row, text, numeric) {
  const td = document.createElement("td");
  td.textContent = text;
  if (numeric) td.className = "n";
  row.appendChild(td);
  return td;
}

function fill(id, rows, draw) {
  const body = document.querySelector("#" + id + " tbody");
  const fresh = document.createElement("tbody");
  for (const r of rows) {
    const tr = document.createElement("tr");
    draw(tr, r);
    fresh.appendChild(tr);
  }
  body.replaceWith(fresh);
}

function ms(seconds) {
  return (seconds * 1000).toFixed(seconds < 0.001 ? 3 : 2);
}

// answeredSet names the silos (and incarnations) whose parts a snapshot
// sums: totals of two snapshots make a rate only over the same set.
function answeredSet(snap) {
  return (snap.silos || []).filter(p => p.answered).map(p => p.name + "@" + p.generation).join(",");
}

function partsByName(snap) {
  const parts = new Map();
  for (const p of snap.silos || []) parts.set(p.name, p);
  return parts;
}

function seconds(snap) {
  return previous ? (new Date(snap.time) - new Date(previous.time)) / 1000 : 0;
}

function drawMembers(snap) {
  const parts = partsByName(snap);
  const before = previous ? partsByName(previous) : new Map();
  const dt = seconds(snap);
  fill("members", snap.members, (tr, m) => {
    tr.dataset.name = m.name;
    if (m.name === snap.self) tr.className = "self";
    const p = parts.get(m.name) || { answered: false, error: "not asked" };
    cell(tr, m.name);
    cell(tr, m.state).className = "state-" + m.state;
    cell(tr, m.status);
    cell(tr, m.generation);
    cell(tr, String(m.load), true);
    cell(tr, p.answered ? String(p.activations) : "–", true);
    const was = before.get(m.name);
    const rate = p.answered && was && was.answered && was.generation === p.generation && dt > 0 ? ((p.calls - was.calls) / dt).toFixed(1) : "–";
    cell(tr, rate, true);
    cell(tr, new Date(m.since).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z"));
    const answer = cell(tr, p.answered ? "ok" : "no answer: " + (p.error || ""));
    if (!p.answered) answer.className = "state-unreachable";
  });
}

// drawActivations draws a column per silo, in the members' order, and
// one for the cluster.
function drawActivations(snap) {
  const silos = (snap.silos || []).map(p => p.name);
  const head = document.querySelector("#activations thead tr");
  const fresh = document.createElement("tr");
  const th = text => { const h = document.createElement("th"); h.textContent = text; fresh.appendChild(h); return h; };
  th("grain type");
  for (const name of silos) {
    const h = th(name);
    h.className = "n";
    h.dataset.silo = name;
  }
  th("all").className = "n";
  head.replaceWith(fresh);
  const parts = partsByName(snap);
  fill("activations", snap.activations, (tr, a) => {
    tr.dataset.type = a.type;
    cell(tr, a.type);
    for (const name of silos) cell(tr, parts.get(name).answered ? String(a.silos[name] || 0) : "?", true);
    cell(tr, String(a.count), true);
  });
}

function drawLimiters(snap) {
  const rows = (snap.silos || []).filter(p => p.limiters).map(p => ({ name: p.name, t: p.limiters }));
  if (snap.limiters) rows.push({ name: "all", t: snap.limiters });
  fill("limiters", rows, (tr, r) => {
    tr.dataset.silo = r.name;
    cell(tr, r.name);
    const t = r.t;
    for (const v of [t.granted, t.rejected, t.queued, t.expired, t.cancelled, t.waiting]) cell(tr, String(v), true);
  });
}

function drawKeys(snap) {
  const note = document.getElementById("keys-note");
  const table = document.getElementById("keys");
  if (!snap.keys) {
    note.textContent = "Limiter keys name their callers: they are shown on the admin port's dashboard only.";
    table.hidden = true;
    return;
  }
  table.hidden = false;
  note.textContent = snap.keys.active + " limiters active on the silos that answered, " + snap.keys.asked + " asked.";
  fill("keys", snap.keys.hottest, (tr, k) => {
    tr.dataset.key = k.key;
    tr.dataset.algorithm = k.algorithm;
    cell(tr, k.algorithm);
    cell(tr, k.key);
    cell(tr, k.silo);
    const u = cell(tr, "", true);
    const bar = document.createElement("span");
    bar.className = "util" + (k.utilization >= 0.9 ? " hot" : "");
    const fillBar = document.createElement("i");
    fillBar.style.width = Math.round(k.utilization * 100) + "%";
    bar.appendChild(fillBar);
    u.appendChild(bar);
    u.appendChild(document.createTextNode(Math.round(k.utilization * 100) + "%"));
    for (const v of [k.available, k.limit, k.refused, k.succeeded, k.queued_permits, k.waiting_calls]) cell(tr, String(v), true);
  });
}

function drawCalls(snap) {
  const before = new Map();
  let dt = 0;
  if (previous && previous.self === snap.self && answeredSet(previous) === answeredSet(snap)) {
    dt = seconds(snap);
    for (const c of previous.calls || []) before.set(c.type + "\u0000" + c.method, c.total);
  }
  fill("calls", snap.calls || [], (tr, c) => {
    tr.dataset.type = c.type;
    tr.dataset.method = c.method;
    cell(tr, c.type);
    cell(tr, c.method);
    cell(tr, String(c.total), true);
    const was = before.get(c.type + "\u0000" + c.method);
    cell(tr, dt > 0 && was !== undefined ? ((c.total - was) / dt).toFixed(1) : "–", true);
    cell(tr, String(c.total - (c.outcomes.ok || 0)), true);
    cell(tr, c.timed ? ms(c.p50) : "–", true);
    cell(tr, c.timed ? ms(c.p99) : "–", true);
    cell(tr, c.timed ? ms(c.seconds_sum / c.timed) : "–", true);
  });
}

async function refresh() {
  try {
    const resp = await fetch("snapshot.json", { cache: "no-store" });
    if (!resp.ok) throw new Error(resp.status + " " + resp.statusText);
    const snap = await resp.json();
    document.getElementById("self").textContent = snap.self;
    document.getElementById("version").textContent = String(snap.version);
    drawMembers(snap);
    drawActivations(snap);
    drawLimiters(snap);
    drawKeys(snap);
    drawCalls(snap);
    previous = snap;
    document.getElementById("state").textContent = "live";
    document.getElementById("updated").textContent = "updated " + new Date(snap.time).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
    document.body.dataset.snapshot = snap.time; // for tests: a snapshot is drawn
    document.body.dataset.draws = String(Number(document.body.dataset.draws || 0) + 1);
  } catch (err) {
    document.getElementById("state").textContent = "not updating: " + err.message;
  }
}

refresh();
setInterval(refresh, refreshMillis);

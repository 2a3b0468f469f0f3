// The beanpole dashboard: polls the JSON API of the endpoint that served it (see
// docs/http.md) once a second and draws the server, the tubes and the charts.
// Everything from the server goes into the page through textContent or SVG
// attributes, never as markup.
"use strict";

const POLL_MS = 1000;
const HISTORY = 900;
const STATES = ["ready", "reserved", "delayed", "buried"];
const RATES = ["puts", "reserves", "deletes"];
const TUBE_COLUMNS = [
  "name", "current-jobs-ready", "current-jobs-reserved", "current-jobs-delayed",
  "current-jobs-buried", "current-jobs-urgent", "current-waiting", "pause-time-left",
  "puts-per-second",
];
const SVG = "http://www.w3.org/2000/svg";

const state = {
  server: sessionStorage.getItem("beanpole-server") || "",
  token: sessionStorage.getItem("beanpole-token") || "",
  sort: "name",
  order: "asc",
  offset: 0,
  limit: 50,
  filter: "",
  matched: 0,
  points: [],
  lastAt: 0,
  view: { kind: "home" },
  busy: false,
  actions: false,
};

const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function fmtNumber(v) {
  if (typeof v === "number") {
    return Number.isInteger(v) ? v.toLocaleString("en-US") : v.toFixed(1);
  }
  if (typeof v === "boolean") return v ? "yes" : "no";
  return v === undefined || v === null ? "" : String(v);
}

function fmtDuration(s) {
  s = Math.floor(Number(s) || 0);
  const pad = (n) => String(n).padStart(2, "0");
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + pad(s % 60) + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h " + pad(Math.floor((s % 3600) / 60)) + "m";
  return Math.floor(s / 86400) + "d " + pad(Math.floor((s % 86400) / 3600)) + "h";
}

function query(params) {
  const q = new URLSearchParams(params);
  if (state.server) q.set("server", state.server);
  return q.toString();
}

// The token goes in a header (never a cookie): job bodies need the read token or the
// admin token, actions the admin token.
function tokenHeaders() {
  return state.token ? { "Authorization": "Bearer " + state.token } : {};
}

async function getJSON(path, params) {
  const response = await fetch(path + "?" + query(params || {}), {
    cache: "no-store", credentials: "omit", headers: tokenHeaders(),
  });
  const body = await response.json();
  if (!response.ok) {
    const err = new Error(body.error || response.statusText);
    err.status = response.status;
    throw err;
  }
  return body;
}

// -- facts (definition lists) ---------------------------------------------------------

function fillFacts(dl, pairs) {
  dl.replaceChildren();
  for (const [key, value] of pairs) {
    const wrap = el("div");
    wrap.dataset.key = key;
    wrap.append(el("dt", key), el("dd", value));
    dl.append(wrap);
  }
}

function logStatus(s) {
  if ("log-failing" in s) {
    return (s["log-failing"] ? "FAILING (puts refused)" : "ok") + ", " +
      fmtNumber(s["log-errors"]) + " errors";
  }
  if ("binlog-current-index" in s && s["binlog-current-index"] > 0) {
    return "binlog " + s["binlog-oldest-index"] + "…" + s["binlog-current-index"];
  }
  return "none";
}

function renderServer(data) {
  const s = data.stats;
  state.actions = data.actions;
  fillFacts($("server-stats"), [
    ["server", data.server],
    // An embedded beanpole adds its own version; the wire's is the protocol's.
    ["version", s["beanpole-version"]
      ? s["beanpole-version"] + " (protocol " + s.version + ")"
      : s.version],
    ["uptime", fmtDuration(s.uptime)],
    ["connections", fmtNumber(s["current-connections"])],
    ["producers", fmtNumber(s["current-producers"])],
    ["workers", fmtNumber(s["current-workers"])],
    ["waiting", fmtNumber(s["current-waiting"])],
    ["urgent", fmtNumber(s["current-jobs-urgent"])],
    ["ready", fmtNumber(s["current-jobs-ready"])],
    ["reserved", fmtNumber(s["current-jobs-reserved"])],
    ["delayed", fmtNumber(s["current-jobs-delayed"])],
    ["buried", fmtNumber(s["current-jobs-buried"])],
    ["tubes", fmtNumber(data.tubes)],
    ["draining", s.draining ? "yes (puts refused)" : "no"],
    ["log", logStatus(s)],
  ]);
  for (const r of RATES) $("now-" + r).textContent = data.rates[r].toFixed(1);
  const pick = $("server-pick");
  const select = $("server-select");
  pick.hidden = data.servers.length < 2;
  if (select.options.length !== data.servers.length) {
    select.replaceChildren(...data.servers.map((name) => el("option", name)));
  }
  select.value = data.server;
  $("token-state").textContent = state.token
    ? "token set"
    : (data.actions ? "bodies and actions need the token" : "bodies need the token");
}

// -- charts -------------------------------------------------------------------------

function svgNode(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

// The time axis spans the history there is (at least a minute, at most 15).
function chartSpan() {
  const first = state.points.length ? state.points[0][0] : Date.now() / 1000;
  return Math.min(HISTORY, Math.max(60, Date.now() / 1000 - first));
}

function drawChart(svg, series) {
  const w = 300, h = 90, top = 16;
  const now = Date.now() / 1000;
  const span = chartSpan();
  let max = 1;
  for (const s of series) for (const [, v] of s.points) max = Math.max(max, v);
  const nodes = [svgNode("line", { x1: 0, y1: h - 0.5, x2: w, y2: h - 0.5, class: "axis" })];
  for (const s of series) {
    const coords = s.points.map(([at, v]) => {
      const x = w - ((now - at) / span) * w;
      const y = h - (v / max) * (h - top);
      return x.toFixed(1) + "," + y.toFixed(1);
    });
    if (coords.length) nodes.push(svgNode("polyline", { points: coords.join(" "), class: "line " + s.cls }));
  }
  const label = svgNode("text", { x: 3, y: 10, class: "max" });
  label.textContent = "max " + fmtNumber(Math.round(max * 10) / 10);
  const since = svgNode("text", { x: w - 3, y: 10, class: "max end" });
  since.textContent = "last " + fmtDuration(span);
  nodes.push(label, since);
  svg.replaceChildren(...nodes);
}

function renderCharts() {
  const pts = state.points;
  const col = (i) => pts.map((p) => [p[0], p[i]]);
  RATES.forEach((r, i) => drawChart($("chart-" + r), [{ points: col(i + 1), cls: r }]));
  // Fields: at, puts, reserves, deletes, urgent, ready, reserved, delayed, buried.
  drawChart($("chart-jobs"), STATES.map((s, i) => ({ points: col(i + 5), cls: s })));
}

function addPoints(data) {
  for (const p of data.points) {
    if (p[0] > state.lastAt) {
      state.points.push(p);
      state.lastAt = p[0];
    }
  }
  const cutoff = Date.now() / 1000 - HISTORY;
  while (state.points.length && state.points[0][0] < cutoff) state.points.shift();
}

// -- tubes table ----------------------------------------------------------------------

function tubeLink(name) {
  const a = el("a", name);
  a.href = "#/tube/" + encodeURIComponent(name);
  return a;
}

function renderTubes(data) {
  state.matched = data.matched;
  const rows = data.tubes.map((t) => {
    const tr = el("tr");
    tr.dataset.tube = t.name;
    for (const key of TUBE_COLUMNS) {
      const td = el("td");
      td.dataset.key = key;
      if (key === "name") td.append(tubeLink(t.name));
      else if (key === "pause-time-left") td.textContent = t[key] ? fmtDuration(t[key]) : "";
      else if (key === "puts-per-second") td.textContent = t[key].toFixed(1);
      else td.textContent = fmtNumber(t[key]);
      tr.append(td);
    }
    return tr;
  });
  $("tubes").tBodies[0].replaceChildren(...rows);
  const shown = data.tubes.length;
  $("tube-count").textContent = data.matched === data.total
    ? data.total + " tubes" : data.matched + " of " + data.total + " tubes";
  $("page-info").textContent = shown
    ? (data.offset + 1) + "–" + (data.offset + shown) : "none";
  $("page-prev").disabled = data.offset === 0;
  $("page-next").disabled = data.offset + shown >= data.matched;
  for (const th of document.querySelectorAll("#tubes th")) {
    th.classList.toggle("asc", th.dataset.sort === state.sort && state.order === "asc");
    th.classList.toggle("desc", th.dataset.sort === state.sort && state.order === "desc");
  }
}

// -- jobs ---------------------------------------------------------------------------

function bodyBlock(body, hidden) {
  const wrap = el("div", null, "body");
  if (!body) {
    // Left out by the server, which says why (no token, or none configured).
    wrap.append(el("p", hidden || "body not shown", "note hidden-body"));
    return wrap;
  }
  let note = body.encoding + ", " + fmtNumber(body.size) + " bytes";
  if (body.truncated) note += " (first " + fmtNumber(body.shown) + " shown)";
  wrap.append(el("div", note, "note"), el("pre", body.data, body.encoding));
  return wrap;
}

function jobCard(title, job, hidden) {
  const card = el("article", null, "job");
  const h = el("h3", title + " ");
  if (!job) {
    card.append(h, el("p", "none", "note"));
    return card;
  }
  const a = el("a", "job " + job.id);
  a.href = "#/job/" + job.id;
  h.append(a);
  card.dataset.job = job.id;
  const s = job.stats || {};
  const facts = el("dl", null, "facts small");
  fillFacts(facts, [
    ["tube", s.tube], ["state", s.state], ["priority", s.pri], ["age", fmtDuration(s.age)],
    ["delay", fmtDuration(s.delay)], ["ttr", fmtDuration(s.ttr)],
    ["time-left", fmtDuration(s["time-left"])], ["reserves", s.reserves],
    ["timeouts", s.timeouts], ["releases", s.releases], ["buries", s.buries],
    ["kicks", s.kicks],
  ]);
  const kick = el("button", "Kick", "kick-job");
  kick.type = "button";
  kick.addEventListener("click", () => act("/api/jobs/" + job.id + "/kick", {}));
  const del = el("button", "Delete", "delete-job");
  del.type = "button";
  del.addEventListener("click", () => act("/api/jobs/" + job.id + "/delete", {}));
  const buttons = el("div", null, "buttons");
  buttons.append(kick, del);
  card.append(h, facts, bodyBlock(job.body, hidden), buttons);
  return card;
}

function renderTube(data) {
  const t = data.tube;
  $("tube-title").textContent = t.name;
  const pairs = Object.entries(t).filter(([k]) => k !== "name")
    .map(([k, v]) => [k, k === "pause" || k === "pause-time-left" ? fmtDuration(v) : fmtNumber(v)]);
  pairs.push(["puts-per-second", data["puts-per-second"].toFixed(1)]);
  fillFacts($("tube-stats"), pairs);
  $("next-jobs").replaceChildren(
    jobCard("next ready", data.next.ready, data["bodies-hidden"]),
    jobCard("next delayed", data.next.delayed, data["bodies-hidden"]),
    jobCard("next buried", data.next.buried, data["bodies-hidden"]),
  );
}

// -- actions --------------------------------------------------------------------------

function say(text, ok) {
  const p = $("action-status");
  p.textContent = text;
  p.className = ok ? "ok" : "err";
}

async function act(path, body) {
  const headers = { "Content-Type": "application/json", ...tokenHeaders() };
  const q = state.server ? "?" + new URLSearchParams({ server: state.server }) : "";
  try {
    const response = await fetch(path + q, {
      method: "POST", headers, body: JSON.stringify(body), cache: "no-store",
      credentials: "omit",
    });
    const result = await response.json();
    if (response.ok) say("done: " + JSON.stringify(result), true);
    else say("refused (" + response.status + "): " + result.error, false);
  } catch (err) {
    say("failed: " + err.message, false);
  }
  if (state.view.kind === "job") state.view.loaded = false;
  refresh();
}

function tubePath(verb) {
  return "/api/tubes/" + encodeURIComponent(state.view.name) + "/" + verb;
}

// -- the poll -------------------------------------------------------------------------

async function refresh() {
  if (state.busy) return;
  state.busy = true;
  try {
    await refreshCluster();  // cluster.js: before the queue, which may be unreadable
    const [server, series] = await Promise.all([
      getJSON("/api/server"), getJSON("/api/series", { since: state.lastAt }),
    ]);
    if (!state.server) state.server = server.server;
    renderServer(server);
    addPoints(series);
    renderCharts();
    const v = state.view;
    if (v.kind === "home") {
      renderTubes(await getJSON("/api/tubes", {
        filter: state.filter, sort: state.sort, order: state.order,
        offset: state.offset, limit: state.limit,
      }));
    } else if (v.kind === "tube") {
      renderTube(await getJSON("/api/tubes/" + encodeURIComponent(v.name)));
    } else if (v.kind === "job" && !v.loaded) {
      await showJob(v.id);
    }
    $("link-state").textContent = "live";
    $("link-state").className = "state live";
  } catch (err) {
    $("link-state").textContent = "error: " + err.message;
    $("link-state").className = "state down";
    if (err.status === 404 && state.server && /^no server named/.test(err.message)) {
      state.server = "";  // a server chosen earlier that this endpoint no longer shows
      sessionStorage.removeItem("beanpole-server");
    }
    if (state.view.kind === "tube" && err.status === 404) {
      $("tube-stats").replaceChildren(el("p", "no such tube (it may be gone)", "note"));
      $("next-jobs").replaceChildren();
    }
  } finally {
    state.busy = false;
  }
}

async function showJob(id) {
  state.view.loaded = true;
  try {
    const job = await getJSON("/api/jobs/" + id);
    $("job-card").replaceChildren(jobCard("", job, job["bodies-hidden"]));
  } catch (err) {
    $("job-card").replaceChildren(el("p", "job " + id + ": " + err.message, "note"));
  }
}

function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [kind, ...rest] = hash.split("/");
  const arg = rest.join("/");
  if (kind === "tube" && arg) {
    state.view = { kind: "tube", name: decodeURIComponent(arg) };
    $("tube-title").textContent = state.view.name;
    $("tube-stats").replaceChildren();
    $("next-jobs").replaceChildren();
    $("clear-confirm").hidden = true;
  } else if (kind === "job" && /^[0-9]+$/.test(arg)) {
    state.view = { kind: "job", id: arg, loaded: false };
    $("job-card").replaceChildren();
  } else {
    state.view = { kind: "home" };
  }
  $("tubes-view").hidden = state.view.kind !== "home";
  $("tube-view").hidden = state.view.kind !== "tube";
  $("job-view").hidden = state.view.kind !== "job";
  refresh();
}

function wire() {
  $("token").value = state.token;
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.token = $("token").value.trim();
    sessionStorage.setItem("beanpole-token", state.token);
    if (state.view.kind === "job") state.view.loaded = false;
    refresh();
  });
  $("token-forget").addEventListener("click", () => {
    state.token = "";
    $("token").value = "";
    sessionStorage.removeItem("beanpole-token");
    if (state.view.kind === "job") state.view.loaded = false;
    refresh();
  });
  $("server-select").addEventListener("change", (e) => {
    state.server = e.target.value;
    sessionStorage.setItem("beanpole-server", state.server);
    state.points = [];
    state.lastAt = 0;
    state.offset = 0;
    location.hash = "#/";
    refresh();
  });
  $("filter").addEventListener("input", (e) => {
    state.filter = e.target.value;
    state.offset = 0;
    refresh();
  });
  $("page-size").addEventListener("change", (e) => {
    state.limit = Number(e.target.value);
    state.offset = 0;
    refresh();
  });
  $("page-prev").addEventListener("click", () => {
    state.offset = Math.max(0, state.offset - state.limit);
    refresh();
  });
  $("page-next").addEventListener("click", () => {
    if (state.offset + state.limit < state.matched) state.offset += state.limit;
    refresh();
  });
  for (const th of document.querySelectorAll("#tubes th")) {
    th.addEventListener("click", () => {
      const key = th.dataset.sort;
      if (state.sort === key) state.order = state.order === "asc" ? "desc" : "asc";
      else { state.sort = key; state.order = key === "name" ? "asc" : "desc"; }
      state.offset = 0;
      refresh();
    });
  }
  $("job-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const id = $("job-id").value.trim();
    if (/^[0-9]+$/.test(id)) location.hash = "#/job/" + id;
    else say("a job id is a number", false);
  });
  $("kick-form").addEventListener("submit", (e) => {
    e.preventDefault();
    act(tubePath("kick"), { bound: Number($("kick-bound").value) });
  });
  $("pause-form").addEventListener("submit", (e) => {
    e.preventDefault();
    act(tubePath("pause"), { seconds: Number($("pause-seconds").value) });
  });
  $("clear-form").addEventListener("submit", (e) => {
    e.preventDefault();
    $("clear-question").textContent = "Delete every " + $("clear-state").value +
      " job of tube " + state.view.name + "? Type its name to confirm:";
    $("clear-name").value = "";
    $("clear-confirm").hidden = false;
    $("clear-name").focus();
  });
  $("clear-cancel").addEventListener("click", () => { $("clear-confirm").hidden = true; });
  $("clear-confirm").addEventListener("submit", (e) => {
    e.preventDefault();
    $("clear-confirm").hidden = true;
    act(tubePath("clear"), { state: $("clear-state").value, confirm: $("clear-name").value });
  });
  window.addEventListener("hashchange", route);
  route();
  setInterval(refresh, POLL_MS);
}

document.addEventListener("DOMContentLoaded", wire);

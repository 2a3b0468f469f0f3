// The cluster panel of a node's dashboard (beanpole serve --cluster ... --http): this
// node's role, term, leader and commit index, every other member's answer and lag,
// and, while the node is not ready, why. Read from /api/cluster at each poll; hidden
// on a single server, where that path is 404. Uses app.js's $, el, fillFacts, getJSON.
"use strict";

const cluster = { absent: false };

function fmtMaybe(v, none) {
  return v === null || v === undefined ? none : fmtNumber(v);
}

function quorumText(c) {
  if (c.role !== "leader") return "(leader only)";
  return c.quorum_ack_ms === null ? "never" : fmtNumber(c.quorum_ack_ms) + " ms ago";
}

function renderCluster(c) {
  $("cluster-view").hidden = false;
  const reason = $("cluster-reason");
  reason.hidden = c.ready;
  reason.textContent = c.ready ? "" : "not ready: " + c.reason;
  fillFacts($("cluster-facts"), [
    ["node", c.id],
    ["role", c.role],
    ["term", fmtNumber(c.term)],
    ["leader", fmtMaybe(c.leader, "none known")],
    ["commit", fmtNumber(c.commit)],
    ["last log", fmtNumber(c.last_log)],
    ["quorum ack", quorumText(c)],
    ["ready", c.ready ? "yes" : "no"],
  ]);
  const rows = c.members.map((m) => {
    const tr = el("tr");
    tr.dataset.node = String(m.id);
    const cells = [
      ["node", m.id],
      ["up", m.up === null ? "not probed yet" : (m.up ? "yes" : "NO: " + (m.error || "no answer"))],
      ["role", fmtMaybe(m.role, "")],
      ["term", fmtMaybe(m.term, "")],
      ["commit", fmtMaybe(m.commit, "")],
      ["lag", fmtMaybe(m.lag, "unknown")],
    ];
    for (const [key, value] of cells) {
      const td = el("td", value);
      td.dataset.key = key;
      tr.append(td);
    }
    if (m.up === false) tr.className = "member-down";
    return tr;
  });
  $("cluster-members").querySelector("tbody").replaceChildren(...rows);
}

async function refreshCluster() {
  if (cluster.absent) return;
  try {
    renderCluster(await getJSON("/api/cluster"));
  } catch (err) {
    if (err.status === 404) {
      cluster.absent = true;
      $("cluster-view").hidden = true;
      return;
    }
    $("cluster-view").hidden = false;
    $("cluster-reason").hidden = false;
    $("cluster-reason").textContent = "cannot read the node's view: " + err.message;
  }
}

// Lifeboat status page: every workspace's recovery state, what failed and
// what fixes it, repair holds, the offer with its candidates and an approve
// button, the processes the last recovery lost with a restart button, and
// "check now"; kept current by the server's event stream. The token comes
// from the URL fragment (#token=..., never sent to the server in a URL) or
// the form, and is kept in sessionStorage only. Every value from the API
// is inserted as text (textContent), never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
let token = "";
// Idempotency keys, so a double click or a retry after a lost answer is
// one action: approvals by workspace, checkpoint and the operation before
// it (a new approval after a failed one is a new action); restarts by
// workspace and process.
const approveKeys = new Map();
const restartKeys = new Map();
const busy = new Set(); // actions waiting for their answer: their buttons stay disabled across re-renders

function readToken() {
  const m = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("lifeboat-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("lifeboat-token") || "";
}

function showError(msg) {
  const e = $("error");
  e.textContent = msg;
  e.hidden = !msg;
}

async function api(path, opts = {}) {
  opts.headers = Object.assign({ Authorization: "Bearer " + token }, opts.headers || {});
  const res = await fetch(path, opts);
  const body = await res.json().catch(() => ({}));
  if (res.status === 401) {
    sessionStorage.removeItem("lifeboat-token");
    $("login").hidden = false;
  }
  if (!res.ok) throw new Error((body.code || res.status) + ": " + (body.message || res.statusText));
  return body;
}

// newKey is a fresh idempotency key. crypto.randomUUID exists only in a
// secure context (https, or http to localhost); a page served over plain
// http to another host uses getRandomValues.
function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (x) => x.toString(16).padStart(2, "0")).join("");
}

function wsPath(ws) {
  return "/v1/workspaces/" + encodeURIComponent(ws);
}

function el(tag, attrs = {}, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") n.className = v; else n.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) n.append(k);
  return n;
}

// fields is a list of names and values; a value is text or a node, and
// empty ones are left out.
function fields(pairs) {
  const dl = el("dl");
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === "") continue;
    dl.append(el("dt", {}, k), el("dd", {}, v instanceof Node ? v : String(v)));
  }
  return dl;
}

function code(text) {
  return el("code", {}, text);
}

function age(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  if (s < 172800) return Math.round(s / 3600) + " h";
  return Math.round(s / 86400) + " days";
}

function when(t) {
  return new Date(t).toLocaleString();
}

// action runs fn once for a button press: the button is disabled (across
// re-renders, by its busy id) until the answer, then the state is reloaded.
async function action(b, id, what, fn) {
  if (busy.has(id)) return;
  busy.add(id);
  b.disabled = true;
  try {
    await fn();
    showError("");
  } catch (e) {
    showError(what + " failed: " + e.message);
  } finally {
    busy.delete(id);
    b.disabled = false;
    load();
  }
}

function button(cls, label, id, attrs = {}) {
  const b = el("button", Object.assign({ class: cls, type: "button" }, attrs), label);
  b.disabled = busy.has(id);
  return b;
}

function renderCandidates(o) {
  const list = el("ol", { class: "candidates" });
  for (const c of o.candidates || []) {
    const tags = [];
    if (c.last_good) tags.push("last good");
    if (c.checkpoint === o.checkpoint) tags.push("offered");
    const li = el("li", { "data-checkpoint": c.checkpoint, "data-readable": String(!!c.readable), class: c.readable ? "ok" : "bad" },
      el("span", { class: "id" }, c.checkpoint.slice(0, 12)), " ",
      el("span", {}, when(c.time) + " (" + age(o.age_seconds + (Date.parse(o.checkpoint_time) - Date.parse(c.time)) / 1000) + " old)"), " ",
      el("span", { class: "badge " + (c.readable ? "good" : "bad") }, c.readable ? "readable" : "not readable"));
    if (tags.length) li.append(" ", el("span", { class: "tags" }, tags.join(", ")));
    if (!c.readable && c.problem) li.append(el("div", { class: "problem" }, c.problem));
    list.append(li);
  }
  return list;
}

function renderOffer(ws, st) {
  const o = st.offer;
  const box = el("section", { class: "offer" }, el("h3", {}, "Recovery offer"));
  if (o.warning) box.append(el("p", { class: "warning", role: "note" }, o.warning));
  box.append(fields([
    ["Checkpoint", o.checkpoint.slice(0, 16)],
    ["Taken", when(o.checkpoint_time)],
    ["Age", age(o.age_seconds)],
    ["Browser profile", o.profile ? "included" : "not included"],
  ]));
  if ((o.candidates || []).length) box.append(el("h4", {}, "Checkpoints (newest first)"), renderCandidates(o));
  if ((o.not_recoverable || []).length) {
    box.append(el("p", {}, "Not recoverable:"), el("ul", {}, ...o.not_recoverable.map((t) => el("li", {}, t))));
  }
  if ((o.lost_processes || []).length) {
    box.append(el("p", {}, "Processes that will be reported lost:"),
      el("ul", {}, ...o.lost_processes.map((p) => el("li", {}, code(p.command.join(" "))))));
  }
  const k = ws + "\n" + o.checkpoint + "\n" + (st.operation || "");
  const id = "approve\n" + k;
  const b = button("approve", "Approve recovery from " + o.checkpoint.slice(0, 12), id, { "data-workspace": ws, "data-checkpoint": o.checkpoint });
  b.addEventListener("click", () => {
    if (!approveKeys.has(k)) approveKeys.set(k, newKey());
    action(b, id, "Approval of " + ws, () => api(wsPath(ws) + "/recovery/approve", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Idempotency-Key": approveKeys.get(k) },
      body: JSON.stringify({ checkpoint: o.checkpoint }),
    }));
  });
  box.append(b);
  return box;
}

// renderOperation shows the current operation while it runs, and the last
// one when it failed and nothing has superseded it.
function renderOperation(st, op) {
  if (!op) return null;
  const failed = op.step === "failed";
  if (failed && (st.state === "healthy" || st.state === "recovering")) return null;
  if (!failed && st.state !== "recovering") return null;
  const box = el("section", { class: failed ? "operation failed" : "operation", "data-operation": op.id, "data-step": op.step },
    el("h3", {}, failed ? "Recovery failed" : "Recovery in progress"));
  box.append(fields([
    ["Operation", op.id],
    ["Step", op.step],
    ["Checkpoint", (op.checkpoint || "").slice(0, 16)],
    ["Replacement", op.new_instance],
    ["Error", op.error ? el("span", { class: "error" }, op.error) : ""],
    ["What fixes it", failed ? op.action : ""],
  ]));
  return box;
}

function stopText(s) {
  if (!s) return "not attempted yet";
  return (s.stopped ? "stopped" : "not stopped") + " (" + when(s.time) + "): " + s.detail;
}

function renderHolds(st) {
  const holds = st.holds || [];
  if (!holds.length) return null;
  const box = el("section", { class: "holds" }, el("h3", {}, "Repair holds"));
  for (const h of holds) {
    const item = el("div", { class: "hold", "data-hold": h.id, "data-stopped": String(!!(h.stop && h.stop.stopped)) });
    item.append(fields([
      ["Hold", h.id],
      ["Kept replacement", h.target_instance],
      ["Provider", h.provider],
      ["Lost instance", h.source_instance],
      ["Checkpoint", (h.checkpoint || "").slice(0, 16)],
      ["Operation", h.operation],
      ["Since", when(h.created)],
      ["Stop", el("span", { class: "stop " + (h.stop && h.stop.stopped ? "good" : "bad") }, stopText(h.stop))],
      ["Error", el("span", { class: "error" }, h.error)],
    ]));
    item.append(el("p", { class: "operator" }, "Operator action: inspect and resolve it with ",
      code("lifeboat recovery resolve " + h.id + " --outcome destroyed|repaired|kept --evidence TEXT"),
      " (an operator token); a new approval may follow."));
    box.append(item);
  }
  return box;
}

function renderProcesses(ws, procs) {
  if (!procs || !procs.length) return null;
  const box = el("section", { class: "processes" }, el("h3", {}, "Processes the last recovery lost"));
  const list = el("ul", { class: "procs" });
  for (const p of procs) {
    const li = el("li", { class: "proc", "data-process": p.id, "data-state": p.state },
      el("div", { class: "cmd" }, code(p.command.join(" ")), " ", el("span", { class: "badge proc-" + p.state }, p.state.replace("_", " "))));
    li.append(fields([
      ["Directory", p.dir],
      ["Exit code", p.exit_code === undefined || p.exit_code === null ? "" : p.exit_code],
    ]));
    if (p.last_output) {
      li.append(el("p", { class: "label" }, p.truncated ? "Last output (truncated):" : "Last output:"), el("pre", {}, p.last_output));
    }
    if (p.state === "lost" || p.state === "restart_failed") {
      const k = ws + "\n" + p.id + "\n" + p.started;
      const id = "restart\n" + k;
      const b = button("restart", "Restart " + p.command[0], id, { "data-workspace": ws, "data-process": p.id });
      b.addEventListener("click", () => {
        if (!restartKeys.has(k)) restartKeys.set(k, newKey());
        action(b, id, "Restart of " + p.command.join(" ") + " in " + ws, async () => {
          const r = await api(wsPath(ws) + "/processes/" + encodeURIComponent(p.id) + "/restart", {
            method: "POST",
            headers: { "Idempotency-Key": restartKeys.get(k) },
          });
          // An attempt that ended in failure is done: pressing again is a
          // new attempt. Any other answer keeps the key, so a retry can
          // never run the command twice.
          if (r.state === "restart_failed") restartKeys.delete(k);
        });
      });
      li.append(b);
    }
    list.append(li);
  }
  box.append(list);
  return box;
}

function renderWorkspace(w, op, procs) {
  const st = w.recovery || {};
  const card = el("article", { class: "ws", id: "ws-" + w.id, "data-state": st.state || "" },
    el("h2", {}, w.id, el("span", { class: "badge state-" + st.state }, st.state || "unknown")));
  card.append(fields([
    ["Provider", w.provider],
    ["Instance", w.instance],
    ["Generation", w.generation],
    ["Last good", w.last_good ? w.last_good.snapshot.slice(0, 16) + " (" + when(w.last_good.time) + ")" : "none yet"],
    ["Failures", w.failures || ""],
    ["What to do", st.action || ""],
    ["Next check", st.next_check ? when(st.next_check) : ""],
  ]));
  const id = "check\n" + w.id;
  const check = button("check", "Check now", id, { "data-workspace": w.id });
  check.addEventListener("click", () => action(check, id, "Checking " + w.id, () => api(wsPath(w.id) + "/check", { method: "POST" })));
  card.append(el("div", { class: "actions" }, check));
  const offer = (st.state === "lost" || st.state === "failed") && st.offer ? renderOffer(w.id, st) : null;
  for (const s of [renderOperation(st, op), renderHolds(st), offer, renderProcesses(w.id, procs)]) if (s) card.append(s);
  return card;
}

function render(list, ops, procs) {
  const main = $("workspaces");
  main.replaceChildren();
  if (!list.length) main.append(el("p", {}, "No workspaces."));
  list.forEach((w, i) => main.append(renderWorkspace(w, ops[i], procs[i])));
  document.body.dataset.loaded = "true";
}

// fetchAll reads the workspaces, then each one's current or last operation
// and lost processes. A detail that cannot be read is left out and said.
async function fetchAll() {
  const list = await api("/v1/workspaces");
  const problems = [];
  const detail = (p, what) => p.catch((e) => { problems.push(what + ": " + e.message); return null; });
  const [ops, procs] = await Promise.all([
    Promise.all(list.map((w) => w.recovery && w.recovery.operation
      ? detail(api("/v1/operations/" + encodeURIComponent(w.recovery.operation)), "operation of " + w.id) : null)),
    Promise.all(list.map((w) => detail(api(wsPath(w.id) + "/processes"), "lost processes of " + w.id))),
  ]);
  render(list, ops, procs);
  if (problems.length) showError(problems.join("; "));
}

// load reloads everything; a change that arrives while a load runs starts
// one more when it ends, so the page always ends on the newest state.
// body[data-loading] says whether one runs.
let loading = null;
let again = false;
function load() {
  if (loading) {
    again = true;
    return loading;
  }
  document.body.dataset.loading = "true";
  loading = fetchAll().catch((e) => showError(e.message)).finally(() => {
    loading = null;
    if (again) {
      again = false;
      load();
    } else {
      document.body.dataset.loading = "false";
    }
  });
  return loading;
}

function setLive(on) {
  const b = $("live");
  b.textContent = on ? "live" : "offline";
  b.className = "badge " + (on ? "on" : "off");
}

// stream follows /v1/events with fetch (EventSource cannot send a bearer
// token) and reloads the state after every change.
async function stream(lastID) {
  try {
    const headers = { Authorization: "Bearer " + token };
    if (lastID) headers["Last-Event-ID"] = lastID;
    const res = await fetch("/v1/events", { headers });
    if (!res.ok) throw new Error("event stream: " + res.status);
    setLive(true);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let id = "", type = "message";
        for (const line of block.split("\n")) {
          if (line.startsWith("id: ")) id = line.slice(4);
          else if (line.startsWith("event: ")) type = line.slice(7);
        }
        // An id is "EPOCH-SEQ"; the page shows the sequence number.
        if (id) { lastID = id; const seq = id.slice(id.lastIndexOf("-") + 1); $("seq").dataset.seq = seq; $("seq").textContent = "#" + seq; }
        if (type !== "hello") load();
      }
    }
  } catch (e) {
    showError(e.message);
  }
  setLive(false);
  setTimeout(() => stream(lastID), 2000);
}

function start() {
  $("login").hidden = true;
  load().then(() => stream(""));
}

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  token = $("token").value;
  sessionStorage.setItem("lifeboat-token", token);
  start();
});

token = readToken();
if (token) start(); else $("login").hidden = false;

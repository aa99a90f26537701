// Lifeboat status page: every workspace's recovery state, the offer and an
// approve button, kept current by the server's event stream. The token
// comes from the URL fragment (#token=..., never sent to the server in a
// URL) or the form, and is kept in sessionStorage only.
"use strict";

const $ = (id) => document.getElementById(id);
let token = "";
const approveKeys = new Map(); // workspace + checkpoint -> idempotency key

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

function el(tag, attrs = {}, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") n.className = v; else n.setAttribute(k, v);
  }
  for (const k of kids) n.append(k);
  return n;
}

function fields(pairs) {
  const dl = el("dl");
  for (const [k, v] of pairs) if (v !== undefined && v !== "") dl.append(el("dt", {}, k), el("dd", {}, String(v)));
  return dl;
}

function age(seconds) {
  const s = Math.round(seconds);
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  if (s < 172800) return Math.round(s / 3600) + " h";
  return Math.round(s / 86400) + " days";
}

function renderOffer(ws, o) {
  const box = el("section", { class: "offer" }, el("h3", {}, "Recovery offer"));
  box.append(fields([
    ["Checkpoint", o.checkpoint.slice(0, 16)],
    ["Taken", new Date(o.checkpoint_time).toLocaleString()],
    ["Age", age(o.age_seconds)],
    ["Browser profile", o.profile ? "included" : "not included"],
  ]));
  if ((o.not_recoverable || []).length) {
    box.append(el("p", {}, "Not recoverable:"), el("ul", {}, ...o.not_recoverable.map((t) => el("li", {}, t))));
  }
  if ((o.lost_processes || []).length) {
    box.append(el("p", {}, "Processes that will be reported lost:"),
      el("ul", {}, ...o.lost_processes.map((p) => el("li", {}, p.command.join(" ")))));
  }
  const k = ws + "\n" + o.checkpoint;
  const b = el("button", { class: "approve", type: "button", "data-workspace": ws, "data-checkpoint": o.checkpoint },
    "Approve recovery from " + o.checkpoint.slice(0, 12));
  b.addEventListener("click", async () => {
    if (!approveKeys.has(k)) approveKeys.set(k, crypto.randomUUID());
    b.disabled = true;
    try {
      await api("/v1/workspaces/" + encodeURIComponent(ws) + "/recovery/approve", {
        method: "POST",
        headers: { "Content-Type": "application/json", "Idempotency-Key": approveKeys.get(k) },
        body: JSON.stringify({ checkpoint: o.checkpoint }),
      });
      showError("");
    } catch (e) {
      showError("Approval of " + ws + " failed: " + e.message);
      b.disabled = false;
    }
  });
  box.append(b);
  return box;
}

function render(list) {
  const main = $("workspaces");
  main.replaceChildren();
  if (!list.length) main.append(el("p", {}, "No workspaces."));
  for (const w of list) {
    const st = w.recovery || {};
    const card = el("article", { class: "ws", id: "ws-" + w.id, "data-state": st.state || "" },
      el("h2", {}, w.id, el("span", { class: "badge state-" + st.state }, st.state || "unknown")));
    card.append(fields([
      ["Instance", w.instance],
      ["Generation", w.generation],
      ["Last good", w.last_good ? w.last_good.snapshot.slice(0, 16) + " (" + new Date(w.last_good.time).toLocaleString() + ")" : "none yet"],
      ["Failures", w.failures || ""],
      ["Operation", st.operation || ""],
      ["What to do", st.action || ""],
      ["Next check", st.next_check ? new Date(st.next_check).toLocaleString() : ""],
    ]));
    if ((st.state === "lost" || st.state === "failed") && st.offer) card.append(renderOffer(w.id, st.offer));
    main.append(card);
  }
  document.body.dataset.loaded = "true";
}

let loading = null;
async function load() {
  if (loading) return loading;
  loading = api("/v1/workspaces").then(render, (e) => showError(e.message)).finally(() => { loading = null; });
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
        if (id) { lastID = id; $("seq").dataset.seq = id; $("seq").textContent = "#" + id; }
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

// Small helpers shared by the console's views: building DOM, formatting
// times and statuses, and saying errors in plain words.

/** h builds an element: h("a", {href, class, onclick}, "text", child, ...). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** s builds an SVG element the same way. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

/** appLink is the console's address of an app page: appLink("a/b", "db", "jobs"). */
export function appLink(ref, ...rest) {
  return "#/apps/" + ref + rest.map((p) => "/" + encodeURIComponent(p)).join("");
}

/** code renders a command to copy, e.g. in an empty state. */
export function code(text) {
  return h("pre", { class: "cmd" }, h("code", {}, text));
}

/** empty is an empty state: what is missing and what to do next. */
export function empty(title, ...body) {
  return h("div", { class: "empty" }, h("p", { class: "empty-title" }, title), ...body);
}

/** problem shows an error in plain words. */
export function problem(err, what) {
  return h("div", { class: "problem", role: "alert" }, what ? h("strong", {}, what + (err ? ": " : ".")) : null, say(err));
}

/** say turns an error into a sentence for a person. */
export function say(err) {
  if (!err) return "";
  switch (err.code) {
    case "unauthorized":
      return "the server no longer accepts your token. Sign out and sign in again with a valid token.";
    case "forbidden":
      return "you are not allowed to do this. " + (err.forbidden ? `The app said: ${err.forbidden}.` : err.message);
    case "unavailable":
      return "the server cannot be reached right now (" + err.message + "). Is it still running?";
    case "not_found":
      return err.message.replace(/^./, (c) => c.toUpperCase());
  }
  return err.message || String(err);
}

/** ago says how long ago a time was: "just now", "12 s ago", "3 min ago". */
export function ago(t, now = Date.now()) {
  const ms = now - new Date(t).getTime();
  if (!Number.isFinite(ms)) return "—";
  if (ms < 0) return "in " + span(-ms);
  if (ms < 1500) return "just now";
  return span(ms) + " ago";
}

/** span writes a duration briefly: "45 s", "3 min 05 s", "2 h 10 min", "3 d". */
export function span(ms) {
  const sec = Math.round(ms / 1000);
  if (sec < 60) return `${sec} s`;
  const min = Math.floor(sec / 60);
  if (min < 60) return `${min} min ${String(sec % 60).padStart(2, "0")} s`;
  const hrs = Math.floor(min / 60);
  if (hrs < 48) return `${hrs} h ${String(min % 60).padStart(2, "0")} min`;
  return `${Math.floor(hrs / 24)} d`;
}

/** clock shows a time of day with the date when it is not today. */
export function clock(t) {
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return "—";
  const today = new Date().toDateString() === d.toDateString();
  const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return today ? time : d.toLocaleDateString() + " " + time;
}

/** timeCell is a relative time that the ticker keeps current. */
export function timeCell(t, prefix = "") {
  if (!t) return h("span", { class: "muted" }, "—");
  return h("time", { datetime: new Date(t).toISOString(), title: new Date(t).toLocaleString(), dataset: { ago: prefix } }, prefix + ago(t));
}

/** leaseCell counts down to leaseUntil (epoch ms) while the status is running. */
export function leaseCell(doc) {
  const until = Number(doc?.leaseUntil);
  if (!Number.isFinite(until) || until <= 0 || doc.status !== "running") return h("span", { class: "muted" }, "—");
  const el = h("span", { class: "lease", dataset: { until: String(until) } });
  paintLease(el);
  return el;
}

function paintLease(el) {
  const left = Number(el.dataset.until) - Date.now();
  el.textContent = left > 0 ? span(left) + " left" : "expired " + span(-left) + " ago";
  el.classList.toggle("expired", left <= 0);
  el.title = "lease until " + new Date(Number(el.dataset.until)).toLocaleString();
}

/** tick refreshes every countdown and relative time under root. */
export function tick(root) {
  for (const el of root.querySelectorAll("[data-until]")) paintLease(el);
  for (const el of root.querySelectorAll("time[data-ago]")) el.textContent = el.dataset.ago + ago(el.getAttribute("datetime"));
  for (const el of root.querySelectorAll("[data-in]")) {
    const ms = new Date(el.dataset.in).getTime() - Date.now();
    el.textContent = ms > 0 ? "in " + span(ms) : "due now";
  }
}

const KNOWN = ["pending", "running", "done", "failed"];

/** statusLabel is how a status value reads: strings as they are. */
export function statusLabel(v) {
  if (v === undefined) return "(no status)";
  if (v === null) return "new";
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** badge is a status pill, coloured for the job pattern's statuses. */
export function badge(v) {
  const label = statusLabel(v);
  return h("span", { class: "badge " + statusClass(v) }, label);
}

export function statusClass(v) {
  if (v === null) return "st-new";
  return KNOWN.includes(v) ? "st-" + v : "st-other";
}

/** order sorts statuses in the job pattern's order, others after by name. */
export function byStatus(a, b) {
  const ia = KNOWN.indexOf(a);
  const ib = KNOWN.indexOf(b);
  if (ia >= 0 || ib >= 0) return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
  return statusLabel(a).localeCompare(statusLabel(b));
}

/** who says who wrote a revision: a user, a device, or a backend handler. */
export function who(writer = {}) {
  if (writer.handler) return `${writer.handler} handler` + (writer.user ? ` (for ${writer.user})` : "");
  if (writer.device) return `${writer.user} (device ${writer.device})`;
  return writer.user || "anonymous";
}

const PATHS = {
  cli: "the CLI",
  http: "the HTTP API",
  console: "the console",
  import: "an import",
  onChange: "backend.js onChange",
  scheduled: "backend.js scheduled",
  fetch: "backend.js fetch",
};

/** how says through which path a write came. */
export function how(path) {
  return PATHS[path] || path || "unknown";
}

/** json writes a value compactly for a table cell. */
export function json(v) {
  if (v === undefined) return "";
  const t = JSON.stringify(v);
  return t.length > 160 ? t.slice(0, 157) + "…" : t;
}

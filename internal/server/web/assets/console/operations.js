// Events & logs: what the app's backend.js is doing. The scheduled
// handler's last tick, dead events (with Replay), events waiting for a
// retry, and the handler log, all refreshed every couple of seconds.

import { h, code, empty, problem, clock, timeCell, json, appLink } from "./ui.js";

const EVENTS_EVERY_MS = 2000;
const LOGS_EVERY_MS = 1500;
const MAX_LOG_LINES = 500;

export function operationsView(root, { app, ref }) {
  const schedule = h("div", { id: "schedule" }, h("p", { class: "muted" }, "Loading…"));
  const dead = h("div", { id: "dead" });
  const waiting = h("div", { id: "waiting" });
  const notice = h("div", { id: "replay-notice", "aria-live": "polite" });
  const logBody = h("tbody", { id: "logs" });
  const logBox = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  root.append(
    h("section", { class: "card" }, h("h2", {}, "Scheduled handler"), schedule),
    h("section", { class: "card" }, h("h2", {}, "Dead events"),
      h("p", { class: "muted small" }, "onChange events that failed on every attempt. Fix the handler, deploy it, then replay them."),
      notice, dead),
    h("section", { class: "card" }, h("h2", {}, "Waiting and delayed events"),
      h("p", { class: "muted small" }, "onChange events not yet delivered: running now, or waiting for a retry after a failure."),
      waiting),
    h("section", { class: "card" }, h("h2", {}, "Handler logs ", h("span", { class: "live live-inline" }, "live")),
      h("p", { class: "muted small" }, "What backend.js wrote with ctx.log and console, failed runs and ticks. Newest first."),
      logBox));

  let closed = false;
  const timers = new Map(); // loop -> its pending timeout
  const every = (ms, fn) => {
    const loop = async () => {
      if (closed) return;
      await fn();
      if (!closed) timers.set(loop, setTimeout(loop, ms));
    };
    loop();
  };

  // ---- schedule and events
  const paintSchedule = (sch) => {
    if (!sch.interval) {
      schedule.replaceChildren(empty("This app has no scheduled handler.",
        h("p", {}, "Export ", h("code", {}, "scheduled(event, ctx)"), " and ", h("code", {}, 'config.scheduled.interval (e.g. "30s")'),
          " in backend.js and deploy it to run one, for a lease sweep say.")));
      return;
    }
    schedule.replaceChildren(h("dl", { class: "facts" },
      h("dt", {}, "Runs"), h("dd", {}, "every " + sch.interval + (sch.running ? " — running now" : "")),
      h("dt", {}, "Last tick"), h("dd", { id: "last-tick" }, sch.lastRun ? [clock(sch.lastRun), " (", timeCell(sch.lastRun), ")", sch.duration ? `, took ${sch.duration}` : ""] : "not yet"),
      h("dt", {}, "Last error"), h("dd", { id: "tick-error", class: sch.lastError ? "bad" : "good" }, sch.lastError || "none: the last tick succeeded"),
      sch.loopStopped ? [h("dt", {}, "Loop guard"), h("dd", { class: "bad" }, `${sch.loopStopped} event(s) not delivered: handler writes nested too deep`)] : null,
      sch.fanOutStopped ? [h("dt", {}, "Fan-out budget"), h("dd", { class: "bad" }, `${sch.fanOutStopped} onChange write(s) refused: too many writes followed from one write (config.onChange.fanOut)`)] : null));
  };

  const eventTable = (events, isDead) => h("div", { class: "scroll" }, h("table", { class: "events" },
    h("thead", {}, h("tr", {}, ["Event", "Document", "Attempts", isDead ? "Parked" : "Next attempt", "Last error", ""].map((c) => h("th", {}, c)))),
    h("tbody", {}, events.map((ev) => h("tr", { "data-seq": String(ev.seq) },
      h("td", { class: "num" }, "#" + ev.seq),
      h("td", {}, h("a", { href: appLink(ref, "db", ev.db, "doc", ev.docId) }, `${ev.db} / ${ev.docId}`), ev.deleted ? " (delete)" : ""),
      h("td", { class: "num attempts" }, String(ev.attempts)),
      h("td", {}, isDead ? timeCell(ev.nextAt)
        : ev.running ? h("span", { class: "running" }, "running now")
        : h("span", { dataset: { in: ev.nextAt } }, "")),
      h("td", { class: "error", title: ev.lastError || "" }, ev.lastError || h("span", { class: "muted" }, "—")),
      h("td", {}, isDead ? h("button", { class: "replay", onclick: (e) => replay(ev, e.currentTarget) }, "Replay") : null))))));

  const replay = async (ev, button) => {
    button.disabled = true;
    button.textContent = "Replaying…";
    try {
      await app.replay(ev.seq);
      notice.replaceChildren(h("p", { class: "ok" }, `Event #${ev.seq} (${ev.db} / ${ev.docId}) was queued for delivery again, with fresh attempts.`));
    } catch (err) {
      button.disabled = false;
      button.textContent = "Replay";
      notice.replaceChildren(problem(err, `Could not replay event #${ev.seq}`));
    }
    refreshEvents();
  };

  const refreshEvents = async () => {
    try {
      const [sch, d, w] = await Promise.all([app.schedule(), app.events({ dead: true, limit: 200 }), app.events({ limit: 200 })]);
      if (closed) return;
      paintSchedule(sch);
      dead.replaceChildren(d.length ? eventTable(d, true)
        : empty("No dead events.", h("p", {}, "An onChange event lands here after its last attempt fails (config.onChange.maxAttempts, 10 by default). Nothing needs a replay now.")));
      waiting.replaceChildren(w.length ? eventTable(w, false)
        : h("p", { class: "muted" }, "Nothing waiting: every onChange event so far has been delivered."));
    } catch (err) {
      if (closed) return;
      const p = err.code === "forbidden"
        ? h("p", { class: "muted" }, "Only the app's owner and the admin see its events, logs and schedule.")
        : problem(err, "Could not read the events");
      schedule.replaceChildren(p);
      dead.replaceChildren();
      waiting.replaceChildren();
    }
  };

  // ---- logs, read on from the last line seen
  let after = 0;
  let lines = [];
  const refreshLogs = async () => {
    try {
      const fresh = await app.logs({ after, limit: 500 });
      if (closed) return;
      if (fresh.length) {
        after = fresh[fresh.length - 1].id;
        lines = [...fresh.reverse(), ...lines].slice(0, MAX_LOG_LINES);
        logBody.replaceChildren(...lines.map(logRow));
      }
      if (!lines.length) {
        logBox.replaceChildren(empty("No log lines yet.", h("p", {}, "Lines appear here as handlers run. In backend.js:"),
          code('ctx.log("info", "claimed job", { id: job._id });')));
      } else if (!logBox.contains(logBody)) {
        logBox.replaceChildren(h("div", { class: "scroll logs" }, h("table", { class: "logs" },
          h("thead", {}, h("tr", {}, ["Time", "Level", "Source", "Message", "Fields"].map((c) => h("th", {}, c)))), logBody)));
      }
    } catch (err) {
      if (!closed) logBox.replaceChildren(err.code === "forbidden"
        ? h("p", { class: "muted" }, "Only the app's owner and the admin read its logs.")
        : problem(err, "Could not read the logs"));
    }
  };
  const logRow = (l) => h("tr", { class: "lvl-" + l.level, "data-id": String(l.id) },
    h("td", { class: "nowrap", title: new Date(l.time).toLocaleString() }, clock(l.time)),
    h("td", {}, h("span", { class: "level" }, l.level)),
    h("td", {}, l.source || ""),
    h("td", { class: "message" }, l.message),
    h("td", { class: "fields" }, l.fields && Object.keys(l.fields).length ? json(l.fields) : ""));

  every(EVENTS_EVERY_MS, refreshEvents);
  every(LOGS_EVERY_MS, refreshLogs);
  return () => {
    closed = true;
    for (const t of timers.values()) clearTimeout(t);
  };
}

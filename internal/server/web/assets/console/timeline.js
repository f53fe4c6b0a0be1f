// A document's timeline, from the ledger: every revision with who wrote
// it, when, through which path, and which fields changed. It reloads
// when the document changes.

import { h, empty, problem, badge, clock, timeCell, who, how, json } from "./ui.js";

export function timelineView(root, { app, db, id }) {
  const head = h("div", { class: "dochead" });
  const list = h("ol", { class: "timeline", id: "timeline" });
  const current = h("pre", { class: "json" });
  const failure = h("div", {});
  root.append(failure,
    h("section", { class: "card" }, head,
      h("details", { class: "current" }, h("summary", {}, "Current document (JSON)"), current)),
    h("section", { class: "card" }, h("h2", {}, "Timeline"),
      h("p", { class: "muted small" }, "Every revision, oldest first: who wrote it, through which path, and what changed."),
      list));

  let busy = false;
  let again = false;
  const load = async () => {
    if (busy) return void (again = true);
    busy = true;
    try {
      const hist = await app.db(db).history(id);
      failure.replaceChildren();
      render(hist);
    } catch (err) {
      if (err.code === "not_found") {
        head.replaceChildren(h("h2", {}, id));
        list.replaceChildren(empty("This document was never written.", h("p", {}, `There is no document "${id}" in ${db}. Check the id, or pick one from the database's table.`)));
      } else failure.replaceChildren(problem(err, "Could not read the timeline"));
    } finally {
      busy = false;
      if (again) {
        again = false;
        load();
      }
    }
  };

  const render = (hist) => {
    const last = hist[hist.length - 1];
    head.replaceChildren(h("h2", { class: "docid" }, id),
      last.deleted ? h("span", { class: "badge st-failed" }, "deleted") : badge(last.doc.status),
      h("span", { class: "muted" }, ` ${hist.length} revision${hist.length === 1 ? "" : "s"} · last changed `, timeCell(last.time)));
    current.textContent = JSON.stringify(last.doc, null, 2);
    let prev = null;
    list.replaceChildren(...hist.map((e) => {
      const item = revision(e, prev);
      prev = e.deleted ? null : e.doc;
      return item;
    }));
  };

  load();
  const stop = app.changes({ db }, (e) => e.id === id && load(), {
    onError: (err) => failure.replaceChildren(problem(err, "Live updates stopped")),
  });
  return stop;
}

function revision(e, prev) {
  const doc = e.deleted ? null : e.doc;
  let what;
  if (e.deleted) what = "deleted";
  else if (!prev) what = ["created as ", badge(doc.status)];
  else if (JSON.stringify(prev.status) !== JSON.stringify(doc.status)) what = [badge(prev.status), " → ", badge(doc.status)];
  else what = [badge(doc.status), " updated"];
  return h("li", { class: "rev", "data-rev": e.rev, "data-seq": String(e.seq) },
    h("div", { class: "rev-head" },
      h("span", { class: "gen", title: "revision " + e.rev }, "#" + parseInt(e.rev, 10)),
      h("span", { class: "what" }, what)),
    h("div", { class: "meta" },
      "by ", h("strong", { class: "who" }, who(e.writer)),
      " through ", h("strong", { class: "how" }, how(e.path)),
      " · ", h("span", { title: new Date(e.time).toLocaleString() }, clock(e.time)), " (", timeCell(e.time), ")",
      h("span", { class: "muted" }, ` · seq ${e.seq}`)),
    diff(prev, doc));
}

// diff lists the top-level fields that differ between two revisions.
function diff(before, after) {
  const a = strip(before);
  const b = strip(after);
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  const rows = [];
  for (const k of keys) {
    const was = k in a ? JSON.stringify(a[k]) : undefined;
    const now = k in b ? JSON.stringify(b[k]) : undefined;
    if (was === now) continue;
    const kind = was === undefined ? "added" : now === undefined ? "removed" : "changed";
    rows.push(h("tr", { class: kind },
      h("th", {}, k),
      h("td", { class: "before" }, was === undefined ? "" : show(k, a[k])),
      h("td", { class: "after" }, now === undefined ? "" : show(k, b[k]))));
  }
  if (!rows.length) return h("p", { class: "muted small" }, before && after ? "No field changed." : "");
  return h("table", { class: "diff" },
    h("thead", {}, h("tr", {}, h("th", {}, "field"), h("th", {}, "before"), h("th", {}, "after"))),
    h("tbody", {}, rows));
}

// show writes a field's value; epoch milliseconds in a time-like field
// (leaseUntil, startedAt, …) also read as a time.
function show(field, v) {
  if (typeof v === "number" && v > 1e12 && v < 1e14 && /(until|at|time|deadline)$/i.test(field)) {
    return [json(v), h("span", { class: "muted" }, ` (${clock(v)})`)];
  }
  return json(v);
}

function strip(doc) {
  if (!doc) return {};
  const { _id, _rev, _deleted, ...rest } = doc;
  return rest;
}

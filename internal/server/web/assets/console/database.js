// A database at a glance: its documents grouped by status with live
// counts, the transitions they took, and a live table of the documents
// that moved last. Everything updates from the app's live feed.

import { h, code, empty, problem, badge, byStatus, statusLabel, statusClass, leaseCell, timeCell, who, how, appLink } from "./ui.js";
import { transitionGraph } from "./graph.js";

const MAX_ROWS = 200;
const GRAPH_EVERY_MS = 2000;

const COLUMNS = [
  { title: "Document", cell: (e, href) => h("td", { class: "id" }, h("a", { href }, e.id)) },
  { title: "Status", cell: (e) => h("td", { class: "status" }, badge(e.doc.status)) },
  { title: "Attempts", field: "attempts", cls: "num", cell: (e) => h("td", { class: "num" }, e.doc.attempts ?? "—") },
  { title: "Lease", field: "leaseUntil", cell: (e) => h("td", { class: "lease-cell" }, leaseCell(e.doc)) },
  { title: "Last error", field: "lastError", cell: (e) => h("td", { class: "error", title: e.doc.lastError || "" },
    e.doc.lastError ? String(e.doc.lastError) : h("span", { class: "muted" }, "—")) },
  { title: "Updated", cell: (e) => h("td", { title: `by ${who(e.writer)} through ${how(e.path)}` }, timeCell(e.time)) },
];

export function databaseView(root, { app, ref, db }) {
  const cards = h("div", { class: "counts", id: "counts" }, h("p", { class: "muted" }, "Loading documents…"));
  const graphBox = h("div", { class: "graph-box", id: "graph" });
  const caption = h("p", { class: "muted", id: "table-caption" });
  const tbody = h("tbody", { id: "docs" });
  const thead = h("thead");
  const table = h("table", { class: "docs" }, thead, tbody);
  const docsBox = h("div", {}, caption, h("div", { class: "scroll" }, table));
  const failure = h("div", {});
  root.append(failure,
    h("div", { class: "split" },
      h("section", { class: "card grow" }, h("h2", {}, "Documents by status"),
        h("p", { class: "muted small" }, "Live counts. Click a status to list only its documents."), cards),
      h("section", { class: "card" }, h("h2", {}, "Transitions taken"),
        h("p", { class: "muted small" }, "Each move of status in the ledger, with how often it happened."),
        graphBox)),
    h("section", { class: "card" }, h("h2", {}, "Documents"), docsBox));

  let entries = null;
  let filter; // a status to show alone, or undefined for all
  const hasFilter = () => filter !== undefined;

  const paint = () => {
    if (!entries) return;
    if (!entries.length) {
      cards.replaceChildren(empty(`No documents in ${db} yet.`,
        h("p", {}, "They show up here the moment they are written. For the job queue example, queue a job with the CLI:"),
        code(`handoff db put --app ${ref} --db ${db} '{"kind":"job","status":"pending","attempts":0,"input":"count these words"}'`)));
      docsBox.hidden = true;
      return;
    }
    docsBox.hidden = false;
    const groups = new Map();
    for (const e of entries) {
      const st = e.doc.status;
      const k = JSON.stringify(st ?? "(no status)");
      if (!groups.has(k)) groups.set(k, { status: st, n: 0 });
      groups.get(k).n++;
    }
    const sorted = [...groups.values()].sort((a, b) => byStatus(a.status, b.status));
    if (hasFilter() && !groups.has(JSON.stringify(filter ?? "(no status)"))) filter = undefined;
    const card = (label, n, cls, st, on) => h("button", {
      class: `count ${cls}${on ? " on" : ""}`, "data-status": label, "aria-pressed": on ? "true" : "false",
      title: on ? "Show every status" : `Show only ${label}`,
      onclick: () => { filter = on || st === undefined ? undefined : st; paint(); },
    }, h("span", { class: "n" }, String(n)), h("span", { class: "label" }, label));
    cards.replaceChildren(
      card("all", entries.length, "st-all", undefined, !hasFilter()),
      ...sorted.map((g) => card(statusLabel(g.status), g.n, statusClass(g.status), g.status,
        hasFilter() && JSON.stringify(filter) === JSON.stringify(g.status))));

    const shown = entries.filter((e) => !hasFilter() || JSON.stringify(e.doc.status) === JSON.stringify(filter))
      .sort((a, b) => b.seq - a.seq);
    caption.textContent = (hasFilter() ? `Documents with status ${statusLabel(filter)}` : "All documents") +
      ", most recently changed first" + (shown.length > MAX_ROWS ? ` (the latest ${MAX_ROWS} of ${shown.length})` : "") +
      ". Click one to see its timeline.";
    // The job pattern's columns show only when some document has the field.
    const has = (f) => entries.some((e) => e.doc[f] !== undefined);
    const cols = COLUMNS.filter((c) => !c.field || has(c.field));
    thead.replaceChildren(h("tr", {}, cols.map((c) => h("th", { class: c.cls }, c.title))));
    tbody.replaceChildren(...shown.slice(0, MAX_ROWS).map((e) => row(e, cols)));
  };

  const row = (e, cols) => {
    const href = appLink(ref, "db", db, "doc", e.id);
    return h("tr", { "data-id": e.id, class: "link", onclick: (ev) => { if (ev.target.tagName !== "A") location.hash = href; } },
      cols.map((c) => c.cell(e, href)));
  };

  // The graph reads the whole ledger, so it is refreshed at most every
  // couple of seconds while documents move.
  let graphTimer = null;
  let graphDue = false;
  let closed = false;
  const drawGraph = async () => {
    if (closed) return;
    graphTimer = setTimeout(() => { graphTimer = null; if (graphDue) drawGraph(); }, GRAPH_EVERY_MS);
    graphDue = false;
    try {
      const ts = await app.transitions(db, "status");
      if (closed) return;
      graphBox.replaceChildren(ts.length ? transitionGraph(ts)
        : h("p", { class: "muted" }, "No transitions yet: they appear as documents are written."));
    } catch (err) {
      graphBox.replaceChildren(err.code === "forbidden"
        ? h("p", { class: "muted" }, "Only the app's owner and the admin see the transitions.")
        : problem(err, "Could not read the transitions"));
    }
  };
  const graphSoon = () => {
    graphDue = true;
    if (!graphTimer) drawGraph();
  };

  const stop = app.liveDocs(db, (list) => {
    entries = list;
    failure.replaceChildren();
    paint();
    graphSoon();
  }, { onError: (err) => failure.replaceChildren(problem(err, `Could not load ${db}`)) });

  return () => {
    stop();
    closed = true;
    clearTimeout(graphTimer);
  };
}

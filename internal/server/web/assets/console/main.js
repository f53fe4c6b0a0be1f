// The operator console: sign-in, the list of apps, and the router that
// shows one view at a time. Everything it shows comes through the client
// module, the same one any app page can use.

import { connect } from "/client/handoff.js";
import { h, code, empty, problem, say, tick, timeCell, appLink } from "./ui.js";
import { databaseView } from "./database.js";
import { timelineView } from "./timeline.js";
import { operationsView } from "./operations.js";

const TOKEN_KEY = "handoff.token";
const view = document.getElementById("view");
const crumbs = document.getElementById("crumbs");
const account = document.getElementById("account");

let client = null;
let me = null;
let cleanup = null;

// One ticker keeps every countdown and "… ago" on the page current.
setInterval(() => tick(view), 1000);

window.addEventListener("hashchange", route);
start();

async function start() {
  const token = localStorage.getItem(TOKEN_KEY);
  if (!token) return signIn();
  client = connect({ token, path: "console" });
  try {
    me = await client.whoami();
  } catch (err) {
    if (err.code === "unauthorized") {
      localStorage.removeItem(TOKEN_KEY);
      return signIn("The token saved in this browser is no longer accepted. Sign in with a new one.");
    }
    show(null, h("section", { class: "card" }, h("h1", {}, "Cannot load the console"), problem(err),
      h("button", { onclick: () => start() }, "Try again")));
    return;
  }
  account.replaceChildren(
    h("span", { class: "muted" }, "Signed in as "),
    h("strong", { id: "me" }, me.user + (me.admin ? " (admin)" : "")),
    h("button", { class: "ghost", id: "sign-out", onclick: signOut }, "Sign out"),
  );
  route();
}

function signOut() {
  localStorage.removeItem(TOKEN_KEY);
  client = me = null;
  account.replaceChildren();
  location.hash = "#/";
  signIn("You are signed out. The token was removed from this browser.");
}

function signIn(notice) {
  crumbs.replaceChildren();
  const input = h("input", { id: "token", type: "password", autocomplete: "off", spellcheck: "false", placeholder: "hnd_…", required: true });
  const err = h("div", { id: "signin-error" });
  const button = h("button", { type: "submit", id: "sign-in" }, "Sign in");
  const form = h("form", { class: "card signin", onsubmit: submit },
    h("h1", {}, "Sign in to handoff"),
    notice ? h("p", { class: "notice" }, notice) : null,
    h("p", {}, "Paste your access token. The console keeps it in this browser only, until you sign out."),
    h("label", { for: "token" }, "Access token"),
    input,
    button,
    err,
    h("details", {},
      h("summary", {}, "Where do I find a token?"),
      h("p", {}, "The first start of the server creates the admin and writes its token to ",
        h("code", {}, "<data>/admin.token"), " (or takes it from ", h("code", {}, "HANDOFF_ADMIN_TOKEN"), "). The admin gives each person a token with:"),
      code("handoff user add alice"),
      h("p", {}, "With ", h("code", {}, "handoff serve --app demo/jobs=examples/jobs"), ", the owner's token is in ",
        h("code", {}, "handoff-data/demo.token"), ".")));
  show(null, form);
  input.focus();

  async function submit(ev) {
    ev.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    button.disabled = true;
    err.replaceChildren();
    try {
      await connect({ token }).whoami();
      localStorage.setItem(TOKEN_KEY, token);
      await start();
    } catch (e) {
      button.disabled = false;
      err.replaceChildren(e.code === "unauthorized"
        ? problem(null, "That token was not accepted. Check that you copied all of it, and that it was not revoked")
        : problem(e, "Could not sign in"));
    }
  }
}

// show replaces the page's view, ending the previous one's live feeds.
function show(trail, ...content) {
  if (cleanup) cleanup();
  cleanup = null;
  crumbs.replaceChildren(...(trail || []).flatMap((c, i) => (i ? [h("span", { class: "sep" }, "/"), c] : [c])));
  view.replaceChildren(...content);
  window.scrollTo(0, 0);
}

function route() {
  if (!client) return;
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "" || parts.length === 0) return appsView();
  if (parts[0] === "apps" && parts.length >= 3) {
    const ref = parts[1] + "/" + parts[2];
    const rest = parts.slice(3);
    if (rest.length === 0) return appView(ref, overview);
    if (rest[0] === "db" && rest.length === 2) return appView(ref, databaseView, { db: rest[1] });
    if (rest[0] === "db" && rest[2] === "doc" && rest.length >= 4) {
      return appView(ref, timelineView, { db: rest[1], id: rest.slice(3).join("/") });
    }
    if (rest[0] === "ops" && rest.length === 1) return appView(ref, operationsView, { ops: true });
  }
  show(null, empty("There is no page here.", h("p", {}, h("a", { href: "#/" }, "Go to your apps"))));
}

async function appsView() {
  const body = h("div", {}, h("p", { class: "muted" }, "Loading your apps…"));
  show([h("span", {}, "Apps")], h("h1", {}, "Your apps"), body);
  let apps;
  try {
    apps = await client.apps();
  } catch (err) {
    return body.replaceChildren(problem(err, "Could not list your apps"));
  }
  if (!apps.length) {
    return body.replaceChildren(empty("You have no apps yet.",
      h("p", {}, "Create one with the CLI and deploy its access.js and backend.js, for example the job queue example:"),
      code(`handoff app create ${me.user}/jobs\nhandoff deploy --app ${me.user}/jobs examples/jobs`),
      h("p", {}, "Or start a server that serves the example: ", h("code", {}, "handoff serve --app demo/jobs=examples/jobs"), ". Then reload this page.")));
  }
  body.replaceChildren(h("p", { class: "muted" }, "Open an app to see its databases, its documents by status and what its backend is doing."),
    h("ul", { class: "tiles" }, apps.map((a) =>
    h("li", {}, h("a", { class: "tile", href: appLink(a.app), "data-app": a.app },
      h("strong", {}, a.app),
      h("span", { class: "muted" }, (a.public ? "public · " : "") + "you are " + (a.roles || []).join(", ")))))));
}

// appView frames an app's page: its name, a tab per database, the
// events & logs tab, and the live feed's state.
function appView(ref, render, params = {}) {
  const app = client.app(ref);
  const tabs = h("nav", { class: "tabs", "aria-label": "Databases" });
  const live = h("span", { class: "live", id: "live" });
  const content = h("div", { class: "content" });
  const trail = [h("a", { href: "#/" }, "Apps"), h("a", { href: appLink(ref) }, ref)];
  if (params.db) trail.push(h("a", { href: appLink(ref, "db", params.db) }, params.db));
  if (params.id) trail.push(h("span", {}, params.id));
  if (params.ops) trail.push(h("span", {}, "Events & logs"));
  show(trail, h("div", { class: "apphead" }, h("h1", {}, ref), live), tabs, content);

  const tab = (label, href, on, attrs = {}) => h("a", { href, class: on ? "tab on" : "tab", ...attrs }, label);
  const paintTabs = (dbs) => tabs.replaceChildren(
    tab("Overview", appLink(ref), render === overview),
    ...dbs.map((d) => tab(d, appLink(ref, "db", d), params.db === d, { "data-db": d, title: "Database " + d })),
    tab("Events & logs", appLink(ref, "ops"), params.ops, { id: "ops-tab" }));
  paintTabs(params.db ? [params.db] : []);
  app.dbs().then((dbs) => paintTabs(params.db && !dbs.includes(params.db) ? [...dbs, params.db] : dbs), () => {});

  const stopStatus = app.onStatus((st) => {
    live.className = "live " + st.state;
    live.textContent = {
      live: "● Live",
      connecting: "Connecting…",
      retrying: "Connection lost, retrying…",
      failed: "Live updates stopped: " + say(st.error),
      idle: "",
    }[st.state];
    live.title = st.error ? st.error.message : "";
  });
  const stopView = render(content, { client, app, ref, me, ...params });
  cleanup = () => {
    stopStatus();
    if (stopView) stopView();
  };
}

// overview is an app's landing page: its databases and its backend at a
// glance, each with the next step.
function overview(root, { app, ref }) {
  const dbs = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const backend = h("div", {});
  root.append(h("section", { class: "card" }, h("h2", {}, "Databases"), dbs),
    h("section", { class: "card" }, h("h2", {}, "Backend"), backend));
  app.dbs().then((list) => {
    if (!list.length) {
      dbs.replaceChildren(empty("This app has no databases yet.",
        h("p", {}, "A database appears with its first document. For the job queue example, queue a job:"),
        code(`handoff db put --app ${ref} --db jobs '{"kind":"job","status":"pending","attempts":0,"input":"count these words"}'`)));
      return;
    }
    dbs.replaceChildren(h("p", { class: "muted" }, "Open a database to see its documents by status, live."),
      h("ul", { class: "tiles" }, list.map((d) => h("li", {}, h("a", { class: "tile", href: appLink(ref, "db", d), "data-db": d },
        h("strong", {}, d), h("span", { class: "muted" }, "documents, statuses and transitions"))))));
  }, (err) => dbs.replaceChildren(problem(err, "Could not list the databases")));

  Promise.all([app.schedule(), app.events({ dead: true, limit: 1000 }), app.events({ limit: 1000 })]).then(([sch, dead, waiting]) => {
    backend.replaceChildren(h("dl", { class: "facts" },
      h("dt", {}, "Scheduled handler"),
      h("dd", {}, sch.interval ? ["every " + sch.interval + ", last tick ", sch.lastRun ? timeCell(sch.lastRun) : "not yet",
        sch.lastError ? h("span", { class: "bad" }, " — failed: " + sch.lastError) : null] : "none"),
      h("dt", {}, "Dead events"),
      h("dd", { class: dead.length ? "bad" : "" }, dead.length ? `${dead.length} — replay them under Events & logs` : "none"),
      h("dt", {}, "Waiting events"),
      h("dd", {}, waiting.length ? String(waiting.length) : "none")),
    h("p", {}, h("a", { href: appLink(ref, "ops") }, "Open events & logs →")));
  }, (err) => backend.replaceChildren(err.code === "forbidden"
    ? h("p", { class: "muted" }, "Only the app's owner and the admin see its events, logs and schedule.")
    : problem(err, "Could not read the backend's state")));
}

// The job board of examples/jobs: a visitor signs in, queues a job, and
// watches it go pending → running → done as the app's own handlers move
// it. The page lives on the app's site; visitor.js keeps the visitor's
// token in this site's storage and talks to the API on the server's
// main address.
import {
  addPasskey, connect, signIn, signInWithPasskey, signOut, signUp, siteApp, visitorToken,
} from "/_handoff/client/visitor.js";

const $ = (sel) => document.querySelector(sel);
const app = siteApp();
let stopBoard = null;

// say shows a result or an error in plain words; a refused transition
// shows access.js's own reason.
function say(text, ok = false) {
  $("#message").textContent = text;
  $("#message").className = ok ? "ok" : "";
}
const sayError = (err) => say(err.forbidden ? `Refused: ${err.forbidden}` : err.message || String(err));

async function show() {
  const signedIn = visitorToken() !== "";
  $("#sign-in").hidden = signedIn;
  $("#who").hidden = !signedIn;
  $("#board").hidden = !signedIn;
  if (stopBoard) stopBoard();
  stopBoard = null;
  if (!signedIn) {
    $("#who-name").textContent = "";
    return;
  }
  try {
    const me = await connect().whoami();
    $("#who-name").textContent = `Signed in as ${me.user.split("@")[0]}`;
  } catch (err) {
    if (err.code === "unauthorized") {
      await signOut().catch(() => {});
      return show();
    }
    sayError(err);
  }
  const jobs = connect().app(app).db("jobs");
  stopBoard = jobs.liveQuery({ field: "kind", key: "job" }, render, { onError: sayError });
}

function render(docs) {
  for (const col of document.querySelectorAll(".columns > section")) {
    const list = col.querySelector("ol");
    list.replaceChildren(...docs.filter((d) => d.status === col.dataset.status).map(card));
  }
}

function card(job) {
  const li = document.createElement("li");
  li.dataset.id = job._id;
  const line = (cls, text) => {
    const el = document.createElement("div");
    el.className = cls;
    el.textContent = text;
    return el;
  };
  li.append(line("id", job._id), line("input", job.input));
  if (job.attempts) li.append(line("attempts", `attempt ${job.attempts}`));
  if (job.output) li.append(line("output", `${job.output.words} words`));
  if (job.lastError) li.append(line("error", job.lastError));
  if (job.status !== "done") {
    // Only the app's handlers finish a job; the table says so.
    const finish = document.createElement("button");
    finish.textContent = "Mark done";
    finish.onclick = () => connect().app(app).db("jobs")
      .put({ ...job, status: "done" }, { id: job._id, ifRev: job._rev })
      .then(() => say("Marked done.", true), sayError);
    li.append(finish);
  }
  return li;
}

$("#queue").onsubmit = async (ev) => {
  ev.preventDefault();
  const form = ev.target;
  const job = { kind: "job", status: "pending", attempts: 0, input: form.input.value };
  if (form.slow.checked) job.delayMs = 3000;
  if (form.fail.checked) job.failAttempts = 1;
  const id = "job-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 6);
  try {
    // ifAbsent: a job is created once, and the server need not look for it first.
    await connect().app(app).db("jobs").put(job, { id, ifAbsent: true });
    form.reset();
    say(`Queued ${id}.`, true);
  } catch (err) {
    sayError(err);
  }
};

const credentials = () => ({ name: $("#sign-in-form").name.value, password: $("#sign-in-form").password.value });
const signedIn = (what) => () => what().then(() => { say(""); return show(); }, sayError);

$("#sign-in-form").onsubmit = (ev) => {
  ev.preventDefault();
  signedIn(() => signIn(credentials()))();
};
$("#sign-up-button").onclick = () => {
  if ($("#sign-in-form").reportValidity()) signedIn(() => signUp(credentials()))();
};
$("#passkey-button").onclick = signedIn(() => signInWithPasskey());
$("#sign-out").onclick = signedIn(() => signOut());
$("#add-passkey").onclick = () => addPasskey().then(() => say("Passkey added: next time, sign in with it.", true), sayError);

show();

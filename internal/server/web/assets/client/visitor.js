// visitor.js — sign-in for the visitors of an app's page (docs/apps.md,
// "Visitors"). It exports all of handoff.js, with a connect() that uses
// the signed-in visitor's token unless given another:
//
//   import { signUp, signIn, signOut, connect } from "/_handoff/client/visitor.js";
//   await signIn({ name: "sam", password: "correct horse" });
//   const jobs = connect().app("alice/jobs").db("jobs");
//
// The token is kept in the site's own localStorage: each app's site has an
// origin of its own, so no other app's page can read it. The app is the
// one whose site the page is on ("jobs--alice" is alice/jobs); pass app
// when its owner or name contains "--".

import { connect as connectWith, HandoffError } from "./handoff.js";

export * from "./handoff.js";

const storageKey = (app) => "handoff.visitor:" + app;

/** siteApp is the app of the site this page is on: owner/name. */
export function siteApp() {
  const label = location.hostname.split(".")[0];
  const i = label.indexOf("--");
  if (i <= 0) {
    throw new HandoffError("invalid", `this page (${location.hostname}) is not on an app's site; pass app: "owner/name"`);
  }
  return label.slice(i + 2) + "/" + label.slice(0, i);
}

/** visitorToken is the stored token of the app's signed-in visitor, or "". */
export function visitorToken(app = siteApp()) {
  return localStorage.getItem(storageKey(app)) || "";
}

/** connect is handoff.js's connect with the visitor's token by default. */
export function connect(options = {}) {
  return connectWith({ token: visitorToken(), ...options });
}

// call sends one visitor request of app, with the stored token when
// signed is set.
function call(app, path, { body, signed = false } = {}) {
  const [owner, name] = app.split("/");
  const url = `/v1/apps/${encodeURIComponent(owner)}/${encodeURIComponent(name)}/visitors/${path}`;
  return connectWith({ token: signed ? visitorToken(app) : "" }).request("POST", url, { body });
}

// keep stores the token of a sign-up or sign-in and returns the visitor.
function keep(app, answer) {
  localStorage.setItem(storageKey(app), answer.token);
  return answer.user;
}

/**
 * signUp makes a new visitor and signs them in; invite is needed when the
 * app's sign-up policy is "invite". Resolves to {id, name, app}; id is the
 * user id access.js sees (name@app--owner).
 */
export async function signUp({ name, password, invite, app = siteApp() }) {
  return keep(app, await call(app, "signup", { body: { name, password, invite } }));
}

/** signIn signs a visitor in with name and password: {id, name, app}. */
export async function signIn({ name, password, app = siteApp() }) {
  return keep(app, await call(app, "signin", { body: { name, password } }));
}

/** signOut revokes the visitor's token on the server and forgets it. */
export async function signOut({ app = siteApp() } = {}) {
  if (!visitorToken(app)) return;
  try {
    await call(app, "signout", { signed: true });
  } catch (err) {
    // A token the server no longer knows is signed out already.
    if (err.code !== "unauthorized") throw err;
  } finally {
    localStorage.removeItem(storageKey(app));
  }
}

function needPasskeys() {
  if (!window.PublicKeyCredential?.parseCreationOptionsFromJSON) {
    throw new HandoffError("invalid", "this browser cannot use passkeys here; sign in with your password");
  }
}

/** addPasskey registers a passkey for the signed-in visitor. */
export async function addPasskey({ app = siteApp() } = {}) {
  needPasskeys();
  const begin = await call(app, "passkeys/register/begin", { signed: true });
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(begin.options.publicKey);
  const credential = await navigator.credentials.create({ publicKey });
  await call(app, "passkeys/register/finish", {
    signed: true,
    body: { ceremony: begin.ceremony, credential: credential.toJSON() },
  });
}

/** signInWithPasskey signs in with a passkey the browser holds for the site. */
export async function signInWithPasskey({ app = siteApp() } = {}) {
  needPasskeys();
  const begin = await call(app, "passkeys/signin/begin");
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(begin.options.publicKey);
  const credential = await navigator.credentials.get({ publicKey });
  return keep(app, await call(app, "passkeys/signin/finish", {
    body: { ceremony: begin.ceremony, credential: credential.toJSON() },
  }));
}

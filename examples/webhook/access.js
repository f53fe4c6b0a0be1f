// The builds database of the webhook example. A build request enters as
// `pending-build` only through the app's own fetch handler, which checks
// the sender's signature first: no client can create one directly, with
// any credential. After that the documents belong to the CI lane (see
// examples/ci-lane): this file only guards the way in.

function refuse(reason) {
  throw { forbidden: reason };
}

export function builds(doc, oldDoc, user, ctx) {
  if (doc._deleted) {
    ctx.requireOwner();
    return {};
  }
  const visible = { channels: ["builds"] };
  if (oldDoc) {
    // Only the owner changes a build request after it is in (the CI
    // lane's own app has the full table).
    ctx.requireOwner();
    return visible;
  }
  ctx.requireBackend("fetch"); // the verified webhook, and nothing else
  if (doc.status !== "pending-build") refuse("a build request starts as pending-build");
  if (typeof doc.repo !== "string" || typeof doc.commit !== "string") refuse("a build request names its repo and commit");
  return visible;
}

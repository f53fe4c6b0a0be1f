// The transition table: it runs on every write and says who may move a
// document from one status to the next. Throw {forbidden: "why"} to refuse.
//
//   requested ──onChange──▶ answered
//
// Export a function per database ("requests" here), or a default one.

export function requests(doc, was, user, ctx) {
  if (!user) throw { forbidden: "sign in to ask" };
  const visible = { channels: ["requests"], grant: { public: ["requests"] } };
  if (doc._deleted) {
    if (!user.isOwner) throw { forbidden: "only the owner deletes requests" };
    return visible;
  }
  if (!was) {
    if (doc.status !== "requested") throw { forbidden: "a new request starts as requested" };
    if (typeof doc.question !== "string" || doc.question === "") throw { forbidden: "a request needs a question" };
    return visible;
  }
  if (doc.question !== was.question) throw { forbidden: "a question cannot change" };
  if (was.status === "requested" && doc.status === "answered") {
    ctx.requireBackend("onChange"); // only the server's own handler answers
    return visible;
  }
  throw { forbidden: `no transition from ${was.status} to ${doc.status}` };
}

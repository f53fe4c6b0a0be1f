// Handlers that run after a write commits. onChange is at-least-once:
// write with ifRev, so a second delivery of the same event changes nothing.

export const config = {
  // Only a new request is work; the handler's own answer gets no event.
  onChange: { dbs: ["requests"], when: { status: "requested" } },
};

export async function onChange(event, ctx) {
  if (event.deleted) return;
  const req = event.doc;
  const answer = `You asked: ${req.question}`;
  try {
    await ctx.db.put({ ...req, status: "answered", answer, answeredAt: new Date().toISOString() }, { ifRev: req._rev });
  } catch (err) {
    if (err.code !== "conflict") throw err; // conflict: another run answered first
  }
}

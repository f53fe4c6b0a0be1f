// Run with `handoff test`. Each test gets a fresh engine on a virtual clock
// with this folder's access.js and backend.js; see docs/testing.md.

test("a request is answered by onChange", async (t) => {
  const sam = t.as("sam").db("requests");
  await sam.put({ _id: "r1", status: "requested", question: "what time is it?" });
  await t.settle(); // let onChange run

  const r1 = await sam.get("r1");
  t.expect(r1).toMatch({ status: "answered", answer: "You asked: what time is it?" });
  const steps = (await t.history("requests", "r1")).map((rev) => rev.doc.status);
  t.expect(steps).toEqual(["requested", "answered"]);
});

test("only the handler may answer", async (t) => {
  const sam = t.as("sam").db("requests");
  await t.expectForbidden(t.db("requests").put({ _id: "r2", status: "requested", question: "?" }), "sign in");
  // Answered at once by onChange; sam may not move it again.
  await sam.put({ _id: "r2", status: "requested", question: "why?" });
  await t.settle();
  const r2 = await sam.get("r2");
  await t.expectForbidden(sam.put({ ...r2, status: "requested" }), "no transition from answered to requested");
});

// The job pattern's whole life on the virtual clock. `handoff test
// examples/jobs` plays these minutes of leases (30 s), sweeps (every 5 s)
// and retries in well under a second, against the real engine and this
// folder's own access.js and backend.js.

const job = (id, extra = {}) => ({
  _id: id,
  kind: "job",
  status: "pending",
  attempts: 0,
  input: "count these words",
  ...extra,
});

const statuses = async (t, id) => (await t.history("jobs", id)).map((r) => r.doc.status);

test("a queued job is claimed and done", async (t) => {
  await t.as("sam").db("jobs").put(job("a"));
  await t.settle(); // onChange runs at once: no time has to pass

  const done = await t.as("sam").db("jobs").get("a");
  t.expect(done).toMatch({ status: "done", attempts: 1, output: { words: 3, chars: 17 } });
  t.expect(await statuses(t, "a")).toEqual(["pending", "running", "done"]);
});

test("a run that throws leaves its error, and the sweep brings the job back", async (t) => {
  await t.as("sam").db("jobs").put(job("b", { failAttempts: 1 }));
  await t.settle();
  t.expect(await t.owner.db("jobs").get("b")).toMatch({ status: "running", lastError: /failed on purpose/ });

  await t.advance("36s"); // the 30 s lease runs out; the next 5 s sweep takes the job back
  const b = await t.owner.db("jobs").get("b");
  t.expect(b).toMatch({ status: "done", attempts: 2 });
  t.expect(b.lastError).toBe(undefined);
  t.expect(await statuses(t, "b")).toEqual(["pending", "running", "running", "pending", "running", "done"]);
});

test("a job that never finishes fails after three attempts", async (t) => {
  // Each run sleeps an hour. The sweep takes the job back once its 30 s
  // lease runs out, and the next attempt's claim waits until the stale run
  // is stopped by its 2-minute run limit: events of one document are
  // delivered one at a time.
  await t.as("sam").db("jobs").put(job("c", { delayMs: 3_600_000 }));
  await t.advance("7m");
  const c = await t.owner.db("jobs").get("c");
  t.expect(c).toMatch({ status: "failed", attempts: 3, lastError: "no attempts left after 3" });
  t.expect(await statuses(t, "c")).toEqual(["pending", "running", "pending", "running", "pending", "running", "failed"]);

  t.expect((await t.events()).length).toBe(0); // nothing is left to deliver
});

test("two claims race for one job and exactly one wins", async (t) => {
  const { rev } = await t.as("sam").db("jobs").put(job("d"));
  // Claim it as a handler would, at once, racing the onChange run that
  // the put just started. Both claims are compare-and-set on `rev`.
  const claim = { ...job("d"), status: "running", attempts: 1, claimId: "the-test", leaseUntil: Date.now() + 30_000 };
  const outcome = await t.backend.db("jobs").put(claim, { ifRev: rev }).then(
    () => "won",
    (err) => err.code,
  );
  t.expect(["won", "conflict"]).toContain(outcome);
  await t.settle();

  const claims = (await t.history("jobs", "d")).filter((r) => r.doc.status === "running" && r.doc.attempts === 1);
  t.expect(claims).toHaveLength(1);
  // Whoever won, the job ends done: by the run that won, or by the
  // next attempt once the test's claim, which no one works on, expires.
  await t.advance("40s");
  t.expect((await t.owner.db("jobs").get("d")).status).toBe("done");
});

test("the transition table refuses what only the handlers may do", async (t) => {
  const sam = t.as("sam").db("jobs");
  await t.expectForbidden(t.db("jobs").put(job("e")), "sign in to queue jobs");
  await t.expectForbidden(sam.put(job("e", { status: "done" })), "a new job starts as pending");

  const { rev } = await sam.put(job("e", { delayMs: 60_000 }));
  await t.settle();
  const running = await sam.get("e");
  t.expect(running.status).toBe("running");
  // A user cannot finish a job, nor can a handler skip the claim.
  await t.expectForbidden(sam.put({ ...running, status: "done" }), "only the backend's onChange handler");
  await t.expectForbidden(t.backend.db("jobs").put({ ...running, status: "pending" }), "only the backend's scheduled handler");
  // An update on the rev the run already replaced is a conflict.
  await t.expectConflict(t.backend.db("jobs").put({ ...running, note: "late" }, { ifRev: rev }));
  // The sweep may not take back a job whose lease is still running.
  await t.expectForbidden(
    t.handler("scheduled").db("jobs").put({ ...running, status: "pending" }),
    "the lease has not expired yet",
  );
});

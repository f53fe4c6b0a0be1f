// The job pattern's whole life, on the virtual clock: `handoff test
// examples/jobs` plays minutes of leases and sweeps in well under a second.

const job = (id, extra = {}) => ({ _id: id, kind: "job", status: "pending", attempts: 0, input: "count these words", ...extra });

test("a queued job is claimed and done", async (t) => {
  const jobs = t.as("sam").db("jobs");
  await jobs.put(job("a"));
  await t.settle();
  const done = await jobs.get("a");
  t.expect(done).toMatch({ status: "done", attempts: 1, output: { words: 3 } });
  const steps = (await t.history("jobs", "a")).map((r) => r.doc.status);
  t.expect(steps).toEqual(["pending", "running", "done"]);
});

test("a failed attempt is swept back to pending and the next one finishes", async (t) => {
  await t.as("sam").db("jobs").put(job("b", { failAttempts: 1 }));
  await t.settle();
  let b = await t.owner.db("jobs").get("b");
  t.expect(b).toMatch({ status: "running", lastError: /failed on purpose/ });
  await t.advance("40s"); // the lease runs out and the sweep takes the job back
  b = await t.owner.db("jobs").get("b");
  t.expect(b).toMatch({ status: "done", attempts: 2 });
});

// The job pattern's handlers. onChange claims a pending job the moment it
// is committed, does the work and finishes it; a scheduled sweep brings
// back jobs whose worker went away. access.js holds the transition table
// these writes must pass.

export const config = {
  scheduled: { interval: "5s" }, // how often the sweep looks for expired leases
  onChange: {
    concurrency: 64,
    timeout: "2m",
    maxAttempts: 5,
    // Only a pending job is work: a commit of any other status (our own
    // claims, notes and finishes) gets no event at all, so it costs no run.
    dbs: ["jobs"],
    when: { kind: "job", status: "pending" },
  },
};

const DB = "jobs";
const LEASE_MS = 30_000; // how long a claim owns a job
const MAX_ATTEMPTS = 3; // access.js enforces the same number

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const freshClaimId = () => Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 10);

// The work. Here it counts the words of `input`; a job can ask for a slow
// run (`delayMs`) or for its first attempts to fail (`failAttempts`), so
// the recovery paths are easy to watch. Real work would be keyed by
// `runKey` (the job id and attempt), so running it twice does no harm.
async function work(job, runKey) {
  if (job.delayMs) await sleep(job.delayMs);
  if (job.attempts <= (job.failAttempts || 0)) {
    throw new Error(`attempt ${job.attempts} failed on purpose (failAttempts: ${job.failAttempts})`);
  }
  const words = job.input.split(/\s+/).filter(Boolean).length;
  return { words, chars: job.input.length, runKey };
}

// move writes one transition, compare-and-set on `rev`. It returns the new
// rev, or null when someone else moved the job first or the table refused.
async function move(ctx, job, rev, step) {
  try {
    return (await ctx.db.put(job, { db: DB, ifRev: rev })).rev;
  } catch (err) {
    if (err.code !== "conflict" && err.code !== "forbidden") throw err;
    ctx.log("info", `${step} skipped: ${err.forbidden || err.message}`, { id: job._id });
    return null;
  }
}

export async function onChange(event, ctx) {
  // config.onChange.when lets only pending jobs through; deleting one
  // (the owner may) is delivered too, and is no work.
  if (event.deleted) return;
  const job = event.doc;

  const claimed = {
    ...job,
    status: "running",
    attempts: job.attempts + 1,
    claimId: freshClaimId(),
    leaseUntil: Date.now() + LEASE_MS,
  };
  // The claim is exclusive: it commits only on the rev this event saw.
  let rev = await move(ctx, claimed, job._rev, "claim");
  if (!rev) return; // another run has the job: ack and step aside

  let output;
  try {
    output = await work(claimed, `${job._id}:${claimed.attempts}`);
  } catch (err) {
    // Leave the error on the job for whoever watches it, then throw: the
    // event comes back after a backoff, and the sweep returns the job to
    // pending once its lease runs out.
    await move(ctx, { ...claimed, lastError: String(err.message || err) }, rev, "record error");
    throw err;
  }
  // No ifRev: the claimId is the fence. access.js refuses the finish if
  // the lease was taken back and the job claimed again meanwhile.
  const { lastError, ...finished } = claimed;
  await move(ctx, { ...finished, status: "done", output, finishedAt: new Date().toISOString() }, undefined, "finish");
}

export async function scheduled(event, ctx) {
  const now = Date.now();
  let after;
  do {
    const page = await ctx.db.query({ db: DB, field: "status", key: "running", limit: 200, after });
    for (const job of page) {
      if (job.kind !== "job" || job.leaseUntil >= now) continue;
      const next = job.attempts >= MAX_ATTEMPTS ? "failed" : "pending";
      const note = next === "failed" ? `no attempts left after ${job.attempts}` : job.lastError;
      // The query's rev: a job that finished since the query is left alone.
      await move(ctx, { ...job, status: next, lastError: note || "lease expired" }, job._rev, "sweep");
    }
    after = page.next;
  } while (after);
}

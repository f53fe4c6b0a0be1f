// The transition table of the job pattern.
//
//   pending ──claim──▶ running ──finish──▶ done
//      ▲                  │ │ └─┐ note an error (same claim)
//      └──lease expired───┘ │ ◀─┘
//                           └──lease expired, out of attempts──▶ failed
//
// Anyone signed in may queue a job. Only the server's own handlers move
// it after that: onChange claims and finishes, the scheduled sweep takes
// back expired leases and gives up on jobs that used their attempts.

const MAX_ATTEMPTS = 3;

function refuse(reason) {
  throw { forbidden: reason };
}

// Each edge checks what must hold for that move, against the head the
// write replaces (`was`). Fields a step must not touch are compared too.
const edges = {
  "pending->running"(job, was, ctx) {
    ctx.requireBackend("onChange");
    if (job.attempts !== was.attempts + 1) refuse("a claim takes exactly one more attempt");
    if (typeof job.claimId !== "string" || job.claimId === "" || job.claimId === was.claimId)
      refuse("a claim needs a new claimId");
    if (!(job.leaseUntil > Date.now())) refuse("a claim needs a lease in the future");
  },
  "running->running"(job, was, ctx) {
    // A run may note its progress or error; the claim itself stays put.
    ctx.requireBackend("onChange");
    if (job.claimId !== was.claimId) refuse("this run no longer holds the job (stale claimId)");
    if (job.attempts !== was.attempts || job.leaseUntil !== was.leaseUntil)
      refuse("a running job keeps its attempts and lease");
  },
  "running->done"(job, was, ctx) {
    ctx.requireBackend("onChange");
    if (job.claimId !== was.claimId) refuse("this run no longer holds the job (stale claimId)");
    if (job.attempts !== was.attempts) refuse("attempts change only when a job is claimed");
  },
  "running->pending"(job, was, ctx) {
    ctx.requireBackend("scheduled");
    if (was.leaseUntil >= Date.now()) refuse("the lease has not expired yet");
    if (was.attempts >= MAX_ATTEMPTS) refuse("no attempts left: the job must fail");
  },
  "running->failed"(job, was, ctx) {
    ctx.requireBackend("scheduled");
    if (was.leaseUntil >= Date.now()) refuse("the lease has not expired yet");
  },
};

export function jobs(job, was, user, ctx) {
  if (!user) refuse("sign in to queue jobs");
  if (job._deleted) {
    if (!user.isOwner) refuse("only the owner deletes jobs");
    return {};
  }
  if (job.kind !== "job") refuse("documents in jobs need kind: \"job\"");
  const visible = { channels: ["jobs"], grant: { public: ["jobs"] } };

  if (!was) {
    if (job.status !== "pending") refuse("a new job starts as pending");
    if (job.attempts !== 0) refuse("a new job starts with attempts: 0");
    if (typeof job.input !== "string") refuse("a job needs an input string");
    return visible;
  }
  if (job.input !== was.input) refuse("a job's input cannot change");

  const edge = edges[`${was.status}->${job.status}`];
  if (!edge) refuse(`no transition from ${was.status} to ${job.status}`);
  edge(job, was, ctx);
  return visible;
}

// The transition table of a CI lane.
//
//   pending-build ──take──▶ building ──▶ built
//         ▲                    │  └────▶ build-failed
//         └──requeue (owner)───┴──────────────┘
//
// The owner (or a member with the role "submitter") queues a build. Only
// a device of the user "builder" — a CI runner holding HANDOFF_DEVICE,
// never a person's token — takes it and reports the result. The runner
// moves a build with compare-and-set on its revision, so when two runners
// reach for one build, one commits and the other's write is a conflict.

const BUILDER = "builder";

function refuse(reason) {
  throw { forbidden: reason };
}

// sameExcept checks that a move changes nothing but the fields it owns.
function sameExcept(doc, was, owned) {
  const keys = new Set([...Object.keys(doc), ...Object.keys(was)]);
  for (const k of keys) {
    if (k.startsWith("_") || owned.includes(k)) continue;
    if (JSON.stringify(doc[k]) !== JSON.stringify(was[k])) refuse(`this move may not change ${k}`);
  }
}

// runner is the builder's device: ctx.requireUser names the user, and
// user.device says the request was signed by one of its devices.
function runner(user, ctx) {
  ctx.requireUser(BUILDER);
  if (!user.device) refuse("builds move only by a device of the builder user (HANDOFF_DEVICE), not with a token");
}

const edges = {
  "pending-build->building"(doc, was, user, ctx) {
    runner(user, ctx);
    if ("exitCode" in doc) refuse("a build that starts has no exit code yet");
  },
  "building->built"(doc, was, user, ctx) {
    runner(user, ctx);
    if (doc.exitCode !== 0) refuse("built needs exitCode 0");
  },
  "building->build-failed"(doc, was, user, ctx) {
    runner(user, ctx);
    if (!Number.isInteger(doc.exitCode) || doc.exitCode === 0) refuse("build-failed needs the command's non-zero exitCode");
  },
  // A stuck or failed build goes back to the queue by the owner's hand.
  "building->pending-build"(doc, was, user, ctx) {
    ctx.requireOwner();
    if ("exitCode" in doc) refuse("a requeued build has no exit code");
  },
  "build-failed->pending-build"(doc, was, user, ctx) {
    ctx.requireOwner();
    if ("exitCode" in doc) refuse("a requeued build has no exit code");
  },
};

export function builds(doc, was, user, ctx) {
  if (!user) refuse("sign in to use the build lane");
  if (doc._deleted) {
    ctx.requireOwner();
    return {};
  }
  // The builder reads the queue; the owner reads everything anyway.
  const visible = { channels: ["builds"], grant: { users: { [BUILDER]: ["builds"] }, roles: { submitter: ["builds"] } } };
  for (const [k, v] of Object.entries(doc)) {
    if (v !== null && typeof v === "object") refuse(`build documents are flat: ${k} is an object`);
  }
  if (!was) {
    if (!user.isOwner && !user.roles.includes("submitter")) refuse("only the owner or a submitter queues builds");
    if (doc.status !== "pending-build") refuse("a new build starts as pending-build");
    if ("exitCode" in doc) refuse("a new build has no exit code");
    if (typeof doc.commit !== "string" || doc.commit === "") refuse("a build names its commit");
    return visible;
  }
  const edge = edges[`${was.status}->${doc.status}`];
  if (!edge) refuse(`no move from ${was.status} to ${doc.status}`);
  sameExcept(doc, was, ["status", "exitCode"]);
  edge(doc, was, user, ctx);
  return visible;
}

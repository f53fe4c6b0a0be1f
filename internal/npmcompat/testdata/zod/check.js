import { z } from "zod";

// A job document's schema, the way an app would validate a write: nested
// objects, enums, refinements, defaults, URLs, dates and a BigInt field
// (zod 4 needs BigInt to load at all).
const Job = z.object({
  _id: z.string().min(1),
  status: z.enum(["pending", "running", "done", "failed"]),
  attempts: z.number().int().min(0).max(10).default(0),
  callback: z.url().optional(),
  owner: z.email().optional(),
  tags: z.array(z.string().regex(/^[a-z-]+$/)).max(5).default([]),
  budget: z.bigint().positive().optional(),
  due: z.iso.datetime().optional(),
  payload: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional(),
}).refine((j) => j.status !== "failed" || j.attempts > 0, { message: "a failed job has attempts", path: ["attempts"] });

const docs = [
  { _id: "j1", status: "pending", callback: "https://example.test/hook?x=1", tags: ["a-b"], budget: 10n, due: "2026-01-02T03:04:05Z" },
  { _id: "", status: "lost", attempts: 11.5, callback: "not a url", owner: "nobody", tags: ["A"], budget: -1n },
  { _id: "j3", status: "failed", attempts: 0, payload: { a: 1, b: "x", c: [] } },
  { _id: "j4", status: "done", callback: "http://[::1]:8080/p", owner: "a@b.co", due: "2026-13-40" },
];

export function run() {
  return docs.map((d) => {
    const r = Job.safeParse(d);
    return r.success
      ? { ok: true, data: JSON.parse(JSON.stringify(r.data, (k, v) => typeof v === "bigint" ? v.toString() + "n" : v)) }
      : { ok: false, issues: r.error.issues.map((i) => ({ path: i.path.join("."), code: i.code, message: i.message })) };
  });
}

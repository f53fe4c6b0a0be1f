// A webhook receiver: POST /api/hooks/push on the app's site with a
// JSON body {id, repo, commit} and the header
//
//   X-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>
//
// keyed with the app's secret WEBHOOK_SECRET (handoff secret set --app
// OWNER/NAME WEBHOOK_SECRET). A request with a good signature becomes a
// `pending-build` document in the builds database, once per delivery id;
// anything else is refused before it touches the database.

const SIGNATURE_HEADER = "x-signature-256";

const json = (status, body) => Response.json(body, { status });

// hexBytes parses lowercase or uppercase hex; null if it is not hex.
function hexBytes(s) {
  if (typeof s !== "string" || s.length === 0 || s.length % 2 !== 0 || !/^[0-9a-fA-F]+$/.test(s)) return null;
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

// signed reports whether header carries the HMAC-SHA256 of body under
// secret. crypto.subtle.verify compares in constant time, so a forger
// learns nothing from how long a wrong guess takes.
async function signed(secret, body, header) {
  const [scheme, hex] = (header || "").split("=", 2);
  const signature = scheme === "sha256" ? hexBytes(hex) : null;
  if (!signature) return false;
  const enc = new TextEncoder();
  const key = await crypto.subtle.importKey("raw", enc.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
  return crypto.subtle.verify("HMAC", key, signature, enc.encode(body));
}

// The handler is exported as fetch; inside this module the name fetch is
// this function, so an outbound call would be globalThis.fetch(...).
export async function fetch(request, ctx) {
  if (request.path !== "/hooks/push") return json(404, { error: "no such hook" });
  if (request.method !== "POST") return new Response(null, { status: 405, headers: { allow: "POST" } });

  const secret = ctx.secrets.WEBHOOK_SECRET;
  if (!secret) {
    ctx.log("error", "WEBHOOK_SECRET is not set: every delivery is refused until it is");
    return json(503, { error: "the receiver is not configured" });
  }
  const body = await request.text(); // the exact bytes that were signed
  if (!(await signed(secret, body, request.headers.get(SIGNATURE_HEADER)))) {
    ctx.log("warn", "refused a delivery with a missing or wrong signature");
    return json(401, { error: "bad signature" });
  }

  let event;
  try {
    event = JSON.parse(body);
  } catch {
    return json(400, { error: "the body is not JSON" });
  }
  if (typeof event.id !== "string" || typeof event.repo !== "string" || typeof event.commit !== "string") {
    return json(400, { error: "the body needs id, repo and commit strings" });
  }
  // The delivery id is the document id: a redelivered webhook is a no-op.
  const r = await ctx.db.put(
    { status: "pending-build", repo: event.repo, commit: event.commit, receivedAt: new Date().toISOString() },
    { db: "builds", id: event.id, ifAbsent: true },
  );
  ctx.log("info", r.existing ? "duplicate delivery" : "build request accepted", { id: r.id });
  return json(r.existing ? 200 : 202, { id: r.id, rev: r.rev, duplicate: !!r.existing });
}

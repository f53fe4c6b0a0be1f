import validator from "validator";

export function run() {
  const v = validator;
  return {
    isEmail: ["ana@example.com", "a.b+c@sub.example.co.uk", "bad@", "x@y", "\"q\"@example.com"].map((s) => v.isEmail(s)),
    isURL: ["https://example.com/a?b=c", "ftp://x.org", "example.com", "http://", "http://localhost:8080", "javascript:alert(1)"].map((s) => v.isURL(s)),
    isURLOpts: v.isURL("example.com", { require_protocol: true }),
    isUUID: ["6ba7b810-9dad-11d1-80b4-00c04fd430c8", "6ba7b810-9dad-11d1-80b4-00c04fd430c", "00000000-0000-0000-0000-000000000000"].map((s) => v.isUUID(s)),
    isUUID4: v.isUUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8", 4),
    misc: [v.isIP("10.0.0.1"), v.isIP("::1"), v.isJSON('{"a":1}'), v.isISO8601("2024-02-30"), v.isISO8601("2024-02-29T10:00:00Z", { strict: true }), v.isCreditCard("4111111111111111")],
    sanitize: [v.escape("<a href=\"x\">'&'</a>"), v.normalizeEmail("Ana.B+tag@GMail.com"), v.trim("  x  "), v.toInt("42px")],
  };
}

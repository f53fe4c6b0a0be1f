import { v4, v5, validate, version, parse, stringify, NIL } from "uuid";

const NS = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"; // the DNS namespace

export function run() {
  // v4 is random (it needs crypto.getRandomValues): only its shape is compared.
  const r = v4();
  return {
    v5: v5("handoff.example", NS),
    v5url: v5("https://example.com/", v5.URL),
    validate: [validate(v5("x", NS)), validate("not-a-uuid"), validate(NIL)],
    version: version("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
    roundTrip: stringify(parse(NS)) === NS,
    v4shape: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(r),
    v4version: version(r),
  };
}

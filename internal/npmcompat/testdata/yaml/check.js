import YAML from "yaml";

const src = `# a config
name: demo
version: 2
enabled: true
ratio: 0.5
empty: null
when: 2024-01-02
tags: [a, b, "c d"]
servers:
  - host: one.example
    ports: [80, 443]
  - host: two.example
    env: &env
      LEVEL: debug
      multi: |
        line one
        line two
copy: *env
`;

export function run() {
  const doc = YAML.parse(src);
  const out = YAML.stringify(doc);
  const again = YAML.parse(out);
  return {
    doc,
    stringify: out,
    roundTrip: JSON.stringify(again) === JSON.stringify(doc),
    fromObject: YAML.stringify({ a: [1, { b: "x: y" }], c: "multi\nline\n", d: { e: null } }),
    error: (() => {
      try {
        YAML.parse("a: [1, 2");
        return null;
      } catch (e) {
        return e.name + ": " + e.code;
      }
    })(),
  };
}

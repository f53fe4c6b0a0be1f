import Ajv from "ajv";

// A schema with the keywords apps use most: types, required, formats-free
// patterns, enums, nested objects and arrays, additionalProperties.
const schema = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1 },
    age: { type: "integer", minimum: 0 },
    role: { enum: ["admin", "user"] },
    tags: { type: "array", items: { type: "string", pattern: "^[a-z]+$" }, uniqueItems: true },
    address: {
      type: "object",
      properties: { city: { type: "string" }, zip: { type: "string", pattern: "^[0-9]{5}$" } },
      required: ["city"],
    },
  },
  required: ["name", "age"],
  additionalProperties: false,
};

export function run() {
  const ajv = new Ajv({ allErrors: true });
  const validate = ajv.compile(schema);
  const docs = [
    { name: "ana", age: 30, role: "admin", tags: ["a", "b"], address: { city: "Oslo", zip: "01234" } },
    { name: "", age: -1.5, role: "root", tags: ["A", "A"], address: { zip: "1" }, extra: true },
    { age: "x" },
  ];
  return docs.map((d) => {
    const ok = validate(d);
    return {
      ok,
      errors: (validate.errors || []).map((e) => ({
        instancePath: e.instancePath,
        keyword: e.keyword,
        params: e.params,
        message: e.message,
      })),
    };
  });
}

import _ from "lodash";

const people = [
  { name: "cy", dept: "ops", age: 41 },
  { name: "ana", dept: "dev", age: 30 },
  { name: "bo", dept: "dev", age: 25 },
  { name: "di", dept: "ops", age: 30 },
];

export function run() {
  // template compiles to code with new Function: worth checking it runs.
  const tpl = _.template("Hello <%= name %>! <% _.forEach(items, function(i) { %><li><%- i %></li><% }); %>");
  return {
    template: tpl({ name: "ana", items: ["a", "<b>"] }),
    interpolate: _.template("${a} + ${b}")({ a: 1, b: 2 }),
    sortBy: _.sortBy(people, ["age", "name"]).map((p) => p.name),
    groupBy: _.groupBy(people, "dept"),
    countBy: _.countBy([6.1, 4.2, 6.3], Math.floor),
    chain: _.chain(people).filter((p) => p.age >= 30).map("name").sortBy().value(),
    merge: _.merge({ a: { b: 1, c: [1] } }, { a: { d: 2, c: [undefined, 2] } }),
    cloneDeep: _.isEqual(_.cloneDeep({ x: [1, { y: new Date(0) }] }), { x: [1, { y: new Date(0) }] }),
    debounceType: typeof _.debounce(() => {}, 10),
    strings: [_.camelCase("Foo Bar-baz"), _.kebabCase("fooBarBaz"), _.startCase("hello_world"), _.escape("<a href='x'>&</a>")],
    chunk: _.chunk([1, 2, 3, 4, 5], 2),
    uniqBy: _.uniqBy([2.1, 1.2, 2.3], Math.floor),
    get: _.get({ a: [{ b: { c: 3 } }] }, "a[0].b.c"),
    set: _.set({}, "x.y[1].z", 5),
    range: _.range(0, 20, 5),
    zipObject: _.zipObject(["a", "b"], [1, 2]),
  };
}

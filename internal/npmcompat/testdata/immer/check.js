import { produce, enablePatches, enableMapSet, produceWithPatches } from "immer";

enablePatches();
enableMapSet();

const base = {
  user: { name: "ana", address: { city: "Oslo" } },
  todos: [
    { id: 1, done: false, tags: ["a"] },
    { id: 2, done: false, tags: [] },
  ],
  counts: new Map([["x", 1]]),
};

export function run() {
  const next = produce(base, (d) => {
    d.user.address.city = "Bergen";
    d.todos[1].done = true;
    d.todos[1].tags.push("urgent");
    d.todos.push({ id: 3, done: false, tags: [] });
    d.counts.set("y", 2);
  });
  const [, patches, inverse] = produceWithPatches({ a: { b: [1, 2] } }, (d) => {
    d.a.b.push(3);
    d.a.c = "new";
  });
  let frozenWrite;
  try {
    next.user.name = "x";
    frozenWrite = "allowed";
  } catch (e) {
    frozenWrite = e.constructor.name;
  }
  return {
    next: { ...next, counts: [...next.counts] },
    base: { ...base, counts: [...base.counts] },
    sharedTodo0: next.todos[0] === base.todos[0],
    sharedUser: next.user === base.user,
    frozen: Object.isFrozen(next) && Object.isFrozen(next.todos[1]),
    frozenWrite,
    unchanged: produce(base, () => {}) === base,
    patches,
    inverse,
  };
}

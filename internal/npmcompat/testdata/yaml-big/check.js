import YAML from "yaml";

// A round trip of 150 job documents (yaml lexes with generators, which
// goja runs slowly: 500 take seconds): the allocation-heavy kind of call
// whose memory limit must not depend on what else the server holds.
export function run() {
  const jobs = [];
  for (let i = 0; i < 150; i++) {
    jobs.push({ _id: "job-" + i, status: ["pending", "running", "done", "failed"][i % 4], attempts: i % 3, input: "in/" + i + ".csv" });
  }
  const text = YAML.stringify({ jobs });
  const back = YAML.parse(text);
  return {
    lines: text.split("\n").length,
    same: JSON.stringify(back.jobs) === JSON.stringify(jobs),
    last: back.jobs[149],
  };
}

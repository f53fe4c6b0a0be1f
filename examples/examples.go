// Package examples carries the code of the example apps inside the binary,
// so commands such as `handoff bench jobs` can deploy them without the
// source tree.
package examples

import "embed"

// Jobs is examples/jobs: access.js (the transition table of the job
// pattern) and backend.js (its claim, work, finish and sweep handlers),
// at jobs/access.js and jobs/backend.js.
//
//go:embed jobs/*.js
var Jobs embed.FS

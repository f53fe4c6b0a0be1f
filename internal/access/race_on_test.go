//go:build race

package access_test

// raceDetector: memory bombs allocate hundreds of MiB in a burst, which
// the race detector's shadow memory does not always survive
// ("ThreadSanitizer: failed to restore address"). scripts/test.sh runs
// these packages once more without -race, so the bombs still run in CI.
const raceDetector = true

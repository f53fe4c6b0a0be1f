//go:build race

package jsvm

// raceDetector: several memory bombs at once allocate gigabytes in a burst,
// which the race detector's shadow memory does not always survive.
// scripts/test.sh runs this package once more without -race.
const raceDetector = true

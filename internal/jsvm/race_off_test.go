//go:build !race

package jsvm

const raceDetector = false

//go:build !race

package access_test

const raceDetector = false

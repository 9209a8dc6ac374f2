//go:build !race

package tools

// raceEnabled reports a test binary built with the race detector (race_on_test.go).
const raceEnabled = false

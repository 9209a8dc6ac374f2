//go:build race

package tools

// raceEnabled reports a test binary built with the race detector, whose Go code runs several
// times slower: timing bounds widen.
const raceEnabled = true

//go:build !race

package store

// raceEnabled tells slow tests that the race detector multiplies their
// running time.
const raceEnabled = false

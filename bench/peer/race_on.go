//go:build race

package peer

// raceDetector reports whether the race detector is built in.
const raceDetector = true

//go:build !race

package peer_test

const raceDetector = false

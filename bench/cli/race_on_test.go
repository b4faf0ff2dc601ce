//go:build race

package cli_test

const raceDetector = true

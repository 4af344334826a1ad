//go:build race

package infra

// raceDetector says that this build has the race detector (-race).
const raceDetector = true

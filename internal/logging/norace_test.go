//go:build !race

package logging_test

const raceEnabled = false

//go:build !race

package sealing

const raceEnabled = false

//go:build race

package logging_test

// raceEnabled: under the race detector sync.Pool keeps fewer of its values
// (TestALineAndAWithAllocateOnce).
const raceEnabled = true

//go:build race

package api_test

// raceEnabled: under the race detector sync.Pool keeps fewer of its values,
// so a request allocates more (TestAllocationsPerRequest).
const raceEnabled = true

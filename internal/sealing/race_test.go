//go:build race

package sealing

// raceEnabled: the race detector's build allocates where the plain build
// does not, so allocation counts are pinned without it
// (TestBinaryGivesBackTheJSON).
const raceEnabled = true

package app

import (
	"testing"
	"time"
)

// TestTheReclaimerReleasesOnceWhenQuietAfterWork drives the reclaimer's
// ticks with a made-up processor clock and heap: it does not release
// while the process works, releases at the first quiet tick after work
// while the heap holds more than it needs, and not again while the process
// stays idle or the heap holds no more than it needs. It lets go of the
// binary's and the bolt file's pages at each first quiet tick after work,
// whatever the heap holds, and not again until more work.
func TestTheReclaimerReleasesOnceWhenQuietAfterWork(t *testing.T) {
	var (
		cpu      time.Duration
		holds    bool
		releases int
		code     int
	)
	r := newReclaimer("")
	r.cpu = func() time.Duration { return cpu }
	r.holds = func() bool { return holds }
	r.release = func() { releases++; holds = false }
	r.releaseFiles = func() { code++ }
	r.last, r.lastRelease, r.lastFiles = 0, 0, 0
	for _, step := range []struct {
		name     string
		work     time.Duration
		holds    bool
		want     int
		wantCode int
	}{
		{"busy: no release", 200 * time.Millisecond, true, 0, 0},
		{"still busy: no release", 100 * time.Millisecond, true, 0, 0},
		{"quiet after work, the heap holding more: a release, and the binary's", 0, true, 1, 1},
		{"quiet again: no second release", 0, false, 1, 1},
		{"quiet, the heap holding more, but no work since: none", 0, true, 1, 1},
		{"work: none", 50 * time.Millisecond, true, 1, 1},
		{"quiet after work, the heap holding no more than it needs: the binary's alone", 0, false, 1, 2},
		{"quiet, the heap holding more: a release, not the binary's", 0, true, 2, 2},
	} {
		cpu += step.work
		holds = step.holds
		r.tick()
		if releases != step.want || code != step.wantCode {
			t.Fatalf("%s: %d releases of the heap, %d of the binary; want %d and %d", step.name, releases, code, step.want, step.wantCode)
		}
	}
}

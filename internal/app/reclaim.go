//go:build !lambda.norpc

package app

import (
	"runtime/debug"
	"time"
)

// The local broker gives the heap's free memory back to the system once it
// goes quiet after work, and the pages of its binary and of its bolt file
// that the work mapped (startpages_linux.go). A burst of requests grows the
// heap, and the runtime keeps what the burst freed until its next collection and
// returns it slowly after that, so an idle broker held what its busiest
// moment needed (docs/performance.md: about 60 MiB of anonymous memory,
// idle after the load run's bursts, on a live heap of a few). A collection
// and a release when quiet costs a few milliseconds of an otherwise idle
// processor, and nothing while requests arrive.
const (
	// reclaimTick is how often the reclaimer looks; a quiet tick is one in
	// which the process used less than reclaimQuiet of processor time, and
	// a release needs that much work since the last one, so that an idle
	// broker does not collect again and again.
	reclaimTick  = 500 * time.Millisecond
	reclaimQuiet = 10 * time.Millisecond
)

// reclaimer releases memory when the process goes quiet holding more heap
// than its live objects need; see above.
type reclaimer struct {
	cpu     func() time.Duration
	release func()
	// releaseFiles lets go of the binary's and the bolt file's pages
	// (releaseFilePages).
	releaseFiles func()
	// holds reports whether the heap holds more than it needs
	// (heapHoldsMore).
	holds                        func() bool
	last, lastRelease, lastFiles time.Duration
}

// newReclaimer returns the reclaimer of a process whose bolt file is at
// dataFile.
func newReclaimer(dataFile string) *reclaimer {
	r := &reclaimer{cpu: processCPU, release: debug.FreeOSMemory, holds: heapHoldsMore()}
	r.releaseFiles = func() { releaseFilePages("", dataFile) }
	r.last = r.cpu()
	r.lastRelease, r.lastFiles = r.last, r.last
	return r
}

// tick looks once: at a quiet tick after work it lets go of the binary's
// and the bolt file's pages, and of the heap's free memory when the heap
// holds more than it needs; it reports whether it released the heap's.
func (r *reclaimer) tick() bool {
	now := r.cpu()
	quiet := now-r.last < reclaimQuiet
	r.last = now
	if !quiet {
		return false
	}
	files := now-r.lastFiles >= reclaimQuiet
	heap := now-r.lastRelease >= reclaimQuiet && r.holds()
	if files {
		r.releaseFiles()
	}
	if heap {
		r.release()
	}
	if !files && !heap {
		return false
	}
	// The releases' own work is not work to release after.
	r.last = r.cpu()
	if files {
		r.lastFiles = r.last
	}
	if heap {
		r.lastRelease = r.last
	}
	return heap
}

// run ticks until stop is closed; where the process's processor time
// cannot be read, it returns at once.
func (r *reclaimer) run(stop <-chan struct{}) {
	if r.cpu() < 0 {
		return
	}
	t := time.NewTicker(reclaimTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.tick()
		}
	}
}

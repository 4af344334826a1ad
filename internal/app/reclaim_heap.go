//go:build !lambda.norpc

package app

import "runtime/metrics"

// heapHoldsMore returns the reclaimer's holds: whether the heap keeps in
// memory more than a quarter and a MiB beyond its live objects (as of the
// last collection): its objects not yet collected, and its free pages not
// yet returned. (The unused room in spans that hold live objects cannot be
// returned.) The Lambda build, which runs no local broker and so no
// reclaimer, leaves it out (reclaim_heap_lambda.go), and runtime/metrics
// with it, whose init ran at every cold start.
func heapHoldsMore() func() bool {
	heap := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/live:bytes"}}
	return func() bool {
		metrics.Read(heap)
		var held uint64
		for _, s := range heap[:2] {
			if s.Value.Kind() == metrics.KindUint64 {
				held += s.Value.Uint64()
			}
		}
		live := uint64(0)
		if v := heap[2].Value; v.Kind() == metrics.KindUint64 {
			live = v.Uint64()
		}
		return held > live+live/4+1<<20
	}
}

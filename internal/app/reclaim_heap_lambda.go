//go:build lambda.norpc

package app

// heapHoldsMore is never true in the Lambda build: a function runs no
// local broker, so no reclaimer, and leaving out runtime/metrics leaves
// out its init (0.11 ms of each cold start); reclaim_heap.go is the
// local broker's.
func heapHoldsMore() func() bool { return func() bool { return false } }

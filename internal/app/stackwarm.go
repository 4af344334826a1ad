package app

import "net/http"

// warmStack grows the goroutine's stack, in one step while it is still
// shallow, to what a request needs, before next serves it. net/http serves
// each connection on a new goroutine, whose stack starts small, and a
// request runs deep (the middleware, the broker, sealing, the store,
// bbolt): it grew the stack through every doubling on the way down, each
// growth a copy of every frame so far. In process, a synchronous provision
// served on a new goroutine took about 36 µs more than on one that had
// served before, and this step takes 15 to 20 µs of that back (fsync off;
// the rest is the new goroutine's start and wake-up; docs/performance.md,
// session 43). On a goroutine whose stack is already as large (the
// connection's next requests) it costs the zeroing of requestStack bytes,
// and no copy.
func warmStack(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		growStack()
		next.ServeHTTP(w, r)
	})
}

// requestStack is the frame growStack takes: the runtime then gives the
// goroutine a stack of twice that (32 KiB), which a request's calls stay
// within (a frame of 32 KiB did no better).
const requestStack = 16 << 10

//go:noinline
func growStack() {
	var frame [requestStack]byte
	keep(&frame)
}

// keep takes the frame's address, so that the compiler keeps the frame.
//
//go:noinline
func keep(*[requestStack]byte) {}

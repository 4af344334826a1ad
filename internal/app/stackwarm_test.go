package app

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
)

// stackPerGoroutine is how much stack each of n new goroutines holds
// once it has run fn (the collector off: it would shrink them).
func stackPerGoroutine(t *testing.T, n int, fn func()) uint64 {
	t.Helper()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	inuse := func() uint64 { var m runtime.MemStats; runtime.ReadMemStats(&m); return m.StackInuse }
	release := make(chan struct{})
	var ready sync.WaitGroup
	ready.Add(n)
	before := inuse()
	for range n {
		go func() {
			fn()
			ready.Done()
			<-release
		}()
	}
	ready.Wait()
	after := inuse()
	close(release)
	return (after - before) / uint64(n)
}

// The local broker's server grows each request's goroutine's stack at
// once (warmStack): a new connection's goroutine holds a stack a request
// stays within before the request runs, not one that the request grows
// doubling after doubling. Not parallel: it turns the collector off.
func TestTheServerGivesARequestItsStackAtOnce(t *testing.T) {
	const n = 200
	plain := stackPerGoroutine(t, n, func() {})
	h := warmStack(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/v2/catalog", nil)
	warmed := stackPerGoroutine(t, n, func() { h.ServeHTTP(httptest.NewRecorder(), req) })
	if warmed < requestStack {
		t.Errorf("a goroutine holds %d bytes of stack once warmStack's handler has run (%d before it), want at least %d", warmed, plain, requestStack)
	}
}

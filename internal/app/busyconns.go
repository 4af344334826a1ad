package app

import (
	"net"
	"net/http"
	"sync"

	"github.com/serverless-osb/broker/internal/engine/local"
)

// busyConns is an http.Server's ConnState hook that counts as requests in
// flight its connections that are new (a request is on its way: a burst
// dials before it sends) or serving a request, not those idle between
// requests.
func busyConns(requests *local.Requests) func(net.Conn, http.ConnState) {
	var mu sync.Mutex
	busy := map[net.Conn]bool{}
	return func(c net.Conn, s http.ConnState) {
		now := s == http.StateNew || s == http.StateActive
		mu.Lock()
		defer mu.Unlock()
		switch was := busy[c]; {
		case now && !was:
			busy[c] = true
			requests.Begin()
		case !now && was:
			delete(busy, c)
			requests.End()
		}
	}
}

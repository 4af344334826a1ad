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
// requests. The server calls it on its accept loop (StateNew) and on every
// connection's goroutine, a burst's thousand at once: a sync.Map, not a
// map under one lock that the accept loop would queue on.
func busyConns(requests *local.Requests) func(net.Conn, http.ConnState) {
	var busy sync.Map // net.Conn → struct{}: the connections counted
	return func(c net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew, http.StateActive:
			if _, counted := busy.LoadOrStore(c, struct{}{}); !counted {
				requests.Begin()
			}
		default:
			if _, counted := busy.LoadAndDelete(c); counted {
				requests.End()
			}
		}
	}
}

package metrics

import (
	"net/http"
	"strings"
	"sync"
)

// The last_operation routes, as internal/api serves them.
const (
	patternInstancePoll = "GET /v2/service_instances/{instance_id}/last_operation"
	patternBindingPoll  = "GET /v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation"
)

// pollRoutes matches requests as the api's ServeMux does, to tell a poll
// from any other request without parsing paths a second way. Made at the
// first request whose path ends as a poll's: at package init it was part
// of every function's cold start, the worker's too, which serves none.
var pollRoutes = sync.OnceValue(func() *http.ServeMux {
	mux := http.NewServeMux()
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux.Handle(patternInstancePoll, noop)
	mux.Handle(patternBindingPoll, noop)
	return mux
})

// CountPolls counts the last_operation requests next answers to an
// authenticated caller (any status but 401), by target. With a nil r it
// returns next.
func CountPolls(next http.Handler, r *Recorder) http.Handler {
	if r == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasSuffix(req.URL.Path, "/last_operation") {
			next.ServeHTTP(w, req)
			return
		}
		var target string
		switch _, pattern := pollRoutes().Handler(req); pattern {
		case patternInstancePoll:
			target = "instance"
		case patternBindingPoll:
			target = "binding"
		default:
			next.ServeHTTP(w, req)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, req)
		if sw.status != http.StatusUnauthorized {
			r.LastOperationPoll(target)
		}
	})
}

// statusWriter remembers the status of the answer.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the writer's other methods.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

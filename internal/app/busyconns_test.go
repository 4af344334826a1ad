package app_test

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/waittest"
)

// A burst of asynchronous provisions starts an execution per 202; their
// Tasks wait while the server has requests in flight, so the burst's last
// requests do not share the processors and the commits with the first
// ones' Tasks (docs/performance.md).
func TestTasksGiveWayToTheServersRequestsInFlight(t *testing.T) {
	t.Parallel()
	// A bound no test reaches: only the end of the requests in flight lets
	// the Task go.
	b := apptest.StartWith(t, apptest.Options{YieldAtMost: time.Hour})
	e := newE2E(t, b)

	// A request on its way: a connection that sent half its headers.
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprint(conn, "GET /v2/catalog HTTP/1.1\r\nHost: broker\r\n"); err != nil {
		t.Fatal(err)
	}

	r := e.provision("deferred", e.async, true, map[string]any{"duration_seconds": 0})
	op := string(*r.OperationKey)
	waittest.Until(t, func() error {
		if n := b.Local.Requests.Waiting(); n != 1 {
			return fmt.Errorf("%d Tasks wait for the request in flight, want 1 (the provision's first)", n)
		}
		return nil
	})
	states, err := b.Local.Engine.History(t.Context(), op)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Begin"}; !slices.Equal(states, want) {
		t.Errorf("while a request is in flight the provision's execution entered %q, want %q (its first Task waiting)", states, want)
	}

	// The request ends (its client goes): the Task runs, and the
	// provision succeeds.
	conn.Close()
	if state, desc := e.poll("deferred", r.OperationKey); state != osb.StateSucceeded {
		t.Fatalf("the provision ended %s %q, want succeeded once no request was in flight", state, desc)
	}
}

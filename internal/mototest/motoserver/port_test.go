package motoserver

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/serverport"
)

// TestStartTriesAnotherPortWhenItsPortIsTaken: a port found free can be
// taken by another server before moto binds it. Start must not take that
// server for its moto (a moto with IAM enforced answered the configuration
// 401, and a sandbox failed to start): it waits for its own moto to say it
// listens, and when moto says the port is taken, it tries another.
func TestStartTriesAnotherPortWhenItsPortIsTaken(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not this moto", http.StatusUnauthorized)
	}))
	defer other.Close()
	taken := other.Listener.Addr().(*net.TCPAddr).Port
	calls := 0
	pick := serverport.Pick
	serverport.Pick = func() (int, error) {
		if calls++; calls == 1 {
			return taken, nil
		}
		return pick()
	}
	defer func() { serverport.Pick = pick }()

	s, err := Start(Options{})
	if err != nil {
		t.Fatalf("start with its first port taken: %v", err)
	}
	defer s.Stop()
	if calls < 2 || strings.HasSuffix(s.Endpoint, ":"+strconv.Itoa(taken)) {
		t.Fatalf("moto at %s after %d ports, want another port than the taken %d", s.Endpoint, calls, taken)
	}
	resp, err := http.Get(s.Endpoint + "/moto-api/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("moto at %s: %v %v", s.Endpoint, resp, err)
	}
	resp.Body.Close()
}

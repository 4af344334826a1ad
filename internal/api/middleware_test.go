package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

func TestSupportedVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"2.9": true, "2.17": true, "2.18": true, " 2.14 ": true,
		"": false, "2.8": false, "2": false, "3.0": false, "1.17": false, "2.x": false, "2.+17": false, "2.-1": false,
	} {
		if got := supportedVersion(v); got != want {
			t.Errorf("supportedVersion(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestParseOriginatingIdentity(t *testing.T) {
	cases := []struct {
		name, header, user string
		ok                 bool
	}{
		{"a Cloud Foundry identity names its user_id", "cloudfoundry eyJ1c2VyX2lkIjoiNjgzZWE3NDgtMzA5Mi00ZmY0LWI2NTYtMzljYWNjNGQ1MzYwIn0=", "cloudfoundry/683ea748-3092-4ff4-b656-39cacc4d5360", true},
		{"a Kubernetes identity names its username", "kubernetes eyJ1c2VybmFtZSI6ImR1a2UiLCJ1aWQiOiJjMmRkZTI0Mi01Y2U0LTExZTctOTg4Yy0wMDBjMjkxNmNkMjkifQ==", "kubernetes/duke", true},
		{"unpadded base64 is accepted", "cloudfoundry eyJ1c2VyX2lkIjoiYSJ9", "cloudfoundry/a", true},
		{"an identity without a user is logged as unknown", "cloudfoundry e30=", "cloudfoundry/unknown", true},
		{"a platform alone is refused", "cloudfoundry", "", false},
		{"a value that is not base64 is refused", "cloudfoundry %%%", "", false},
		{"a value that is not a JSON object is refused", "cloudfoundry WzFd", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			user, err := parseOriginatingIdentity(c.header)
			if (err == nil) != c.ok || user != c.user {
				t.Fatalf("parseOriginatingIdentity(%q) = %q, %v", c.header, user, err)
			}
		})
	}
}

func TestAuthenticatorAcceptsEveryPairAndNothingElse(t *testing.T) {
	pairs := []Credential{{"alice", "one"}, {"bob", "two"}}
	for _, c := range []struct {
		user, pass string
		ok         bool
	}{{"alice", "one", true}, {"bob", "two", true}, {"alice", "two", false}, {"bob", "one", false}, {"", "", false}, {"alice", "", false}} {
		if got := NewCredentialSet(pairs).ok(c.user, c.pass); got != c.ok {
			t.Errorf("ok(%q, %q) = %v, want %v", c.user, c.pass, got, c.ok)
		}
	}
	if NewCredentialSet(nil).ok("", "") {
		t.Error("a broker without credentials let an empty pair in")
	}
}

func TestMatchesETag(t *testing.T) {
	for _, c := range []struct {
		header string
		want   bool
	}{{`"abc"`, true}, {`W/"abc"`, true}, {`"x", "abc"`, true}, {`*`, true}, {`"x"`, false}, {``, false}} {
		if got := matchesETag(c.header, `"abc"`); got != c.want {
			t.Errorf("matchesETag(%q) = %v, want %v", c.header, got, c.want)
		}
	}
}

// changingSource is a CredentialSource whose pairs the test changes, and
// which counts the calls that asked to retry.
type changingSource struct {
	mu      sync.Mutex
	pairs   []Credential
	next    []Credential // what a retry reads, when set
	retries int
}

func (s *changingSource) Credentials(_ context.Context, retry bool) *CredentialSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	if retry {
		s.retries++
		if s.next != nil {
			s.pairs, s.next = s.next, nil
		}
	}
	return NewCredentialSet(s.pairs)
}

// TestAuthenticationReadsTheSourceEachRequest: the pairs are asked of the
// source on every request, so a pair it drops is refused at once; a
// refused password asks once more with retry, so a pair just added is
// accepted on its first request; concurrent requests are safe (-race).
func TestAuthenticationReadsTheSourceEachRequest(t *testing.T) {
	src := &changingSource{pairs: []Credential{{"broker", "old"}}}
	h := &handlers{logger: slog.New(slog.DiscardHandler)}
	handler := authenticate(h, src, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	status := func(user, pass string) int {
		r := httptest.NewRequest(http.MethodGet, "/v2/catalog", nil)
		r.SetBasicAuth(user, pass)
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		return w.Code
	}
	if got := status("broker", "old"); got != http.StatusOK || src.retries != 0 {
		t.Fatalf("the source's pair: %d after %d retries, want 200 without one", got, src.retries)
	}
	src.mu.Lock()
	src.next = []Credential{{"broker", "new"}}
	src.mu.Unlock()
	if got := status("broker", "new"); got != http.StatusOK || src.retries != 1 {
		t.Errorf("a pair the source has on a retry: %d after %d retries, want 200 after 1", got, src.retries)
	}
	if got := status("broker", "old"); got != http.StatusUnauthorized {
		t.Errorf("a pair the source dropped: %d, want 401", got)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src.mu.Lock()
			if i%2 == 0 {
				src.pairs = []Credential{{"broker", "new"}}
			}
			src.mu.Unlock()
			status("broker", "new")
		}()
	}
	wg.Wait()
}

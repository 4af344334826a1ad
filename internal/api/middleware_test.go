package api

import "testing"

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
		if got := credentialsOK(pairs, c.user, c.pass); got != c.ok {
			t.Errorf("ok(%q, %q) = %v, want %v", c.user, c.pass, got, c.ok)
		}
	}
	if credentialsOK(nil, "", "") {
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

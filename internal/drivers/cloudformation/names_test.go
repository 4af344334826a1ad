package cloudformation

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/serverless-osb/broker/internal/deploy"
)

var stackNamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*$`)

var tokenPattern = regexp.MustCompile(`^[a-zA-Z0-9][-a-zA-Z0-9]*$`)

// ids are ids a platform may send: GUIDs, and the odd ones the spec allows.
var ids = []string{
	"7f1c2a5e-8d3b-4c6f-9e0a-1b2c3d4e5f60",
	"7F1C2A5E-8D3B-4C6F-9E0A-1B2C3D4E5F60",
	"a",
	"A",
	"---",
	"my instance",
	"my_instance",
	"my.instance",
	"ünïcödé-名前",
	"名前",
	"🙂",
	strings.Repeat("x", 255),
	strings.Repeat("9", 255),
	strings.Repeat("é", 127),
	"-leading-and-trailing-",
}

func TestStackNames(t *testing.T) {
	prefixes := []string{"osb", "A", strings.Repeat("p", deploy.MaxStackPrefix), "team-7"}
	t.Run("every name is a valid stack name of at most 128 characters that starts with the prefix and a hyphen", func(t *testing.T) {
		for _, p := range prefixes {
			for _, i := range ids {
				for _, b := range ids {
					for _, name := range []string{InstanceStackName(p, i), BindingStackName(p, i, b)} {
						if !stackNamePattern.MatchString(name) || len(name) > 128 || !strings.HasPrefix(name, p+"-") {
							t.Fatalf("prefix %q, ids %q/%q: %q", p, i, b, name)
						}
					}
				}
			}
		}
	})
	t.Run("an instance's stack name is at most 40 characters, whatever the prefix", func(t *testing.T) {
		for _, p := range prefixes {
			for _, i := range ids {
				if n := InstanceStackName(p, i); len(n) > 40 {
					t.Errorf("%q is %d characters", n, len(n))
				}
			}
		}
	})
	t.Run("names are stable", func(t *testing.T) {
		const want = "osb-7f1c2a5e-8d3b-4c6f-9e0a-1-99a0cb9f58"
		if got := InstanceStackName("osb", ids[0]); got != want || got != InstanceStackName("osb", ids[0]) {
			t.Errorf("%q, want %q every time", got, want)
		}
		if got := InstanceStackName("osb", "a"); got != "osb-a-ca978112ca" {
			t.Errorf("%q: the hash part must not change between releases", got)
		}
	})
	t.Run("distinct ids give distinct names, also ids that slug alike", func(t *testing.T) {
		seen := map[string]string{}
		for _, i := range ids {
			for _, name := range []string{InstanceStackName("osb", i)} {
				if other, ok := seen[name]; ok {
					t.Errorf("%q and %q both give %q", other, i, name)
				}
				seen[name] = i
			}
		}
		if slug(ids[0], 40) != slug(ids[1], 40) || slug("my instance", 40) != slug("my_instance", 40) {
			t.Fatal("the test needs ids that slug alike")
		}
		bindings := map[string]bool{}
		for _, b := range ids {
			bindings[BindingStackName("osb", ids[0], b)] = true
		}
		if len(bindings) != len(ids) {
			t.Errorf("%d binding stack names for %d binding ids", len(bindings), len(ids))
		}
	})
	t.Run("a binding's stack name starts with its instance's", func(t *testing.T) {
		inst := InstanceStackName("osb", ids[0])
		if b := BindingStackName("osb", ids[0], ids[2]); !strings.HasPrefix(b, inst+"-b-") {
			t.Errorf("%q does not start with %q", b, inst+"-b-")
		}
	})
}

func TestTokens(t *testing.T) {
	t.Run("a token is valid, at most 128 characters and a pure function of its parts", func(t *testing.T) {
		for _, i := range ids {
			tok := token("create", i)
			if !tokenPattern.MatchString(tok) || len(tok) > 128 || tok != token("create", i) {
				t.Errorf("%q", tok)
			}
		}
	})
	t.Run("different parts give different tokens", func(t *testing.T) {
		if token("create", "op") == token("update", "op") || token("delete", "op", "stack", "1") == token("delete", "op", "stack", "2") ||
			token("a", "bc") == token("ab", "c") {
			t.Error("tokens collide")
		}
	})
}

func TestTagValues(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"a GUID is kept", "7f1c2a5e-8d3b-4c6f-9e0a-1b2c3d4e5f60", "7f1c2a5e-8d3b-4c6f-9e0a-1b2c3d4e5f60"},
		{"letters of any script, digits, spaces and _.:/=+-@ are kept", "Ünï 名前 a_b.c:d/e=f+g-h@i 7", "Ünï 名前 a_b.c:d/e=f+g-h@i 7"},
		{"anything else becomes an underscore", `a#b!c"d*e🙂`, "a_b_c_d_e_"},
		{"an empty value stays empty", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tagValue(tc.in); got != tc.want {
				t.Errorf("tagValue(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	t.Run("a value is cut to 256 characters", func(t *testing.T) {
		if got := tagValue(strings.Repeat("é", 300)); utf8.RuneCountInString(got) != 256 {
			t.Errorf("%d characters", utf8.RuneCountInString(got))
		}
	})
}

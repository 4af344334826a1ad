package deploy

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestStackPrefixIsCloudFormationsShape: a stack prefix starts with a
// letter and holds letters, digits and hyphens (^[A-Za-z][A-Za-z0-9-]*$,
// which stackNameShaped writes out), within MaxStackPrefix characters;
// each refusal says what to fix.
func TestStackPrefixIsCloudFormationsShape(t *testing.T) {
	shape := regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*$`)
	for _, p := range []string{"osb", "O", "a-1", "team-a-prod", "", "1osb", "-osb", "osb_1", "osb.1", "os b", "ösb", "a-", "Z9"} {
		if got, want := stackNameShaped(p), shape.MatchString(p); got != want {
			t.Errorf("stackNameShaped(%q) = %v, want %v", p, got, want)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	const alphabet = "aZ09-_. é"
	for range 100000 {
		var b strings.Builder
		for range r.IntN(6) {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		if got, want := stackNameShaped(b.String()), shape.MatchString(b.String()); got != want {
			t.Fatalf("stackNameShaped(%q) = %v, want %v", b.String(), got, want)
		}
	}
	for p, want := range map[string]string{
		"osb":                   "",
		"":                      "it is empty",
		"9lives":                `"9lives" must start with a letter and hold only letters, digits and hyphens`,
		"team_a":                `"team_a" must start with a letter`,
		strings.Repeat("a", 21): "is 21 characters; at most 20 are allowed",
		strings.Repeat("a", 20): "",
	} {
		err := CheckStackPrefix(p)
		if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("CheckStackPrefix(%q) = %v, want %q", p, err, want)
		}
	}
}

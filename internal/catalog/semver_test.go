package catalog

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// semverOrg is the regular expression semver.org gives for a semantic
// version 2.0, which isSemver writes out.
var semverOrg = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// TestIsSemverIsSemverOrgsPattern: isSemver answers as semver.org's regular
// expression on its own examples, on the edges of each rule, and on
// 300,000 strings drawn from the characters a version holds.
func TestIsSemverIsSemverOrgsPattern(t *testing.T) {
	cases := []string{
		"1.0.0", "0.0.0", "10.20.30", "1.1.2-prerelease+meta", "1.1.2+meta", "1.1.2+meta-valid", "1.0.0-alpha",
		"1.0.0-beta", "1.0.0-alpha.beta", "1.0.0-alpha.beta.1", "1.0.0-alpha.1", "1.0.0-alpha0.valid", "1.0.0-alpha.0valid",
		"1.0.0-alpha-a.b-c-somethinglong+build.1-aef.1-its-okay", "1.0.0-rc.1+build.1", "2.0.0-rc.1+build.123",
		"1.2.3-beta", "10.2.3-DEV-SNAPSHOT", "1.2.3-SNAPSHOT-123", "2.0.0+build.1848", "2.0.1-alpha.1227",
		"1.0.0-alpha+beta", "1.2.3----RC-SNAPSHOT.12.9.1--.12+788", "1.2.3----R-S.12.9.1--.12+meta",
		"1.2.3----RC-SNAPSHOT.12.9.1--.12", "1.0.0+0.build.1-rc.10000aaa-kk-0.1", "1.0.0-0A.is.legal",
		"1", "1.2", "1.2.3-0123", "1.2.3-0123.0123", "1.1.2+.123", "+invalid", "-invalid", "-invalid+invalid",
		"-invalid.01", "alpha", "alpha.beta", "alpha.beta.1", "alpha.1", "alpha+beta", "alpha_beta", "alpha.",
		"alpha..", "beta", "1.0.0-alpha_beta", "-alpha.", "1.0.0-alpha..", "1.0.0-alpha..1", "1.0.0-alpha...1",
		"01.1.1", "1.01.1", "1.1.01", "1.2", "1.2.3.DEV", "1.2-SNAPSHOT", "1.2.31.2.3----RC-SNAPSHOT.12.09.1--..12+788",
		"1.2-RC-SNAPSHOT", "-1.0.3-gamma+b7718", "+justmeta", "9.8.7+meta+meta", "9.8.7-whatever+meta+meta",
		"", "1.0.0-", "1.0.0+", "1.0.0-+", "1.0.0-0", "1.0.0-00", "1.0.0-0a", "1.0.0+00", "1.0.0+-", "1.0.0--",
		"1.0.0-a.", "1.0.0+a.", "1.0.0-.a", " 1.0.0", "1.0.0 ", "1.0.0\n", "١.0.0",
	}
	for _, v := range cases {
		if got, want := isSemver(v), semverOrg.MatchString(v); got != want {
			t.Errorf("isSemver(%q) = %v, semver.org's pattern says %v", v, got, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789..--++aZ_"
	b := make([]byte, 0, 16)
	for range 300000 {
		b = b[:0]
		// Most start as a version core does, so that the rest is tried.
		if r.IntN(4) > 0 {
			b = append(b, "1.0.0"[:1+2*r.IntN(3)]...)
		}
		for range r.IntN(12) {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
		if got, want := isSemver(string(b)), semverOrg.Match(b); got != want {
			t.Fatalf("isSemver(%q) = %v, semver.org's pattern says %v", b, got, want)
		}
	}
}

package broker_test

import (
	"testing"
	"unicode/utf8"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestCleanLineAndCleanTextRemoveWhatATerminalActsOn: every control a
// terminal acts on is removed, a line's breaks become spaces, and invalid
// UTF-8 becomes U+FFFD.
func TestCleanLineAndCleanTextRemoveWhatATerminalActsOn(t *testing.T) {
	for _, tc := range []struct {
		name, in, line, text string
	}{
		{"plain text stays", "The region has no capacity left.", "The region has no capacity left.", "The region has no capacity left."},
		{"text in other scripts stays", "Größe ungültig: 容量", "Größe ungültig: 容量", "Größe ungültig: 容量"},
		{"a CSI that clears the line loses its ESC", "ok\x1b[2K\x1b[1Afake", "ok[2K[1Afake", "ok[2K[1Afake"},
		{"an OSC 0 window title loses ESC and BEL", "\x1b]0;pwned\x07done", "]0;pwneddone", "]0;pwneddone"},
		{"an OSC 52 clipboard write loses ESC and ST", "\x1b]52;c;cm0gLXJmIC8K\x1b\\x", "]52;c;cm0gLXJmIC8K\\x", "]52;c;cm0gLXJmIC8K\\x"},
		{"C1 CSI and OSC are removed", "a\u009b2Kb\u009d0;t\u009cc", "a2Kb0;tc", "a2Kb0;tc"},
		{"DEL and NUL are removed", "a\x7fb\x00c", "abc", "abc"},
		{"bidi controls are removed", "\u202eexe.txt\u202c \u2066x\u2069\u200e\u200f\u061c", "exe.txt x", "exe.txt x"},
		{"a line's breaks and tabs become spaces; a text keeps them", "one\ntwo\tthree\r\n", "one two three  ", "one\ntwo\tthree\n"},
		{"invalid UTF-8 becomes U+FFFD", "a\xffb\xc3", "a\uFFFDb\uFFFD", "a\uFFFDb\uFFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := broker.CleanLine(tc.in); got != tc.line {
				t.Errorf("CleanLine(%q) = %q, want %q", tc.in, got, tc.line)
			}
			if got := broker.CleanText(tc.in); got != tc.text {
				t.Errorf("CleanText(%q) = %q, want %q", tc.in, got, tc.text)
			}
		})
	}
}

// FuzzCleanLine: whatever goes in, what comes out is valid UTF-8 with no
// control character, and cleaning it again changes nothing.
func FuzzCleanLine(f *testing.F) {
	for _, s := range []string{"\x1b]52;c;eA==\x07", "\u202e", "\xff\xfe", "a\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := broker.CleanLine(s)
		if !utf8.ValidString(out) {
			t.Fatalf("CleanLine(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x202e || r == 0x2066 {
				t.Fatalf("CleanLine(%q) = %q holds %U", s, out, r)
			}
		}
		if again := broker.CleanLine(out); again != out {
			t.Fatalf("CleanLine is not idempotent: %q then %q", out, again)
		}
	})
}

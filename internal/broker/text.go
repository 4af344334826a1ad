package broker

import (
	"strings"
	"unicode/utf8"
)

// Text from outside the broker (a target's error description, a
// CloudFormation status reason, anything a driver hands back) reaches
// users' last_operation and operators' terminals (ops). A terminal acts on
// control characters: ESC [2K clears a line, OSC 0 sets the window title,
// OSC 52 writes the clipboard, and the bidi controls reorder what is shown.
// CleanLine and CleanText remove them, where such text enters the broker
// (so that it is stored clean) and where ops prints anything stored
// (records stored before). Removing the control character alone is
// enough: what is left of a sequence ("[2K") is inert text.

// CleanLine is s fit for one line: C0 controls, DEL, C1 controls
// (U+0080-U+009F) and the bidi controls removed, a line break or a tab
// made a space (a user's description is one line), invalid UTF-8 made
// U+FFFD.
func CleanLine(s string) string { return clean(s, false) }

// CleanText is s as CleanLine makes it, but keeping line breaks (\n) and
// tabs: for an operator's detail, which may be several lines.
func CleanText(s string) string { return clean(s, true) }

// clean is CleanLine's and CleanText's one rule; lines keeps \n and \t.
func clean(s string, lines bool) string {
	if printableASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\n' || r == '\t':
			if lines {
				b.WriteRune(r)
			} else {
				b.WriteByte(' ')
			}
		case r == '\r' && !lines:
			b.WriteByte(' ')
		case controlRune(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// printableASCII reports whether s holds only the bytes 0x20 to 0x7E: the
// common case, left as it is.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// controlRune reports whether r is a C0 control, DEL, a C1 control or a
// bidi control (LRM, RLM, ALM, the embeddings, overrides and isolates).
func controlRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

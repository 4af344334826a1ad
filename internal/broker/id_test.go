package broker

import (
	"strings"
	"testing"
)

func TestCheckID(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		bad      string // part of the reason; "" means accepted
	}{
		{"a GUID is accepted", "6b1f3c2e-8d4a-4f7b-9e1c-2a5d7f9b3c10", ""},
		{"non-ASCII UTF-8 is accepted", "instância-é-😀", ""},
		{"255 bytes are accepted", strings.Repeat("a", 255), ""},
		{"an empty id is refused", "", "empty"},
		{"256 bytes are refused", strings.Repeat("a", 256), "longer than 255 bytes"},
		{"a lone continuation byte is refused", "\x80", "not valid UTF-8"},
		{"a truncated sequence is refused", "\xc3(", "not valid UTF-8"},
		{"bytes that are never UTF-8 are refused", "\xff\xfe-1", "not valid UTF-8"},
		{"a NUL is refused", "a\x00b", "U+0000"},
		{"a newline is refused", "a\nb", "U+000A"},
		{"a C1 control is refused", "a\u0085b", "U+0085"},
		{"the replacement character is refused: invalid UTF-8 a proxy decoded", "a\ufffdb", "U+FFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckID(tc.id)
			switch {
			case tc.bad == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
				t.Fatalf("got %v, want a reason with %q", err, tc.bad)
			}
		})
	}
	t.Run("store keys may be longer than platform ids, up to MaxKeyLength", func(t *testing.T) {
		if err := CheckIDs(strings.Repeat("a", MaxKeyLength)); err != nil {
			t.Fatal(err)
		}
		if err := CheckIDs(strings.Repeat("a", MaxKeyLength+1)); err == nil {
			t.Fatal("a key over MaxKeyLength was accepted")
		}
	})
}

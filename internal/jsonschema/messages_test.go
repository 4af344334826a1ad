package jsonschema

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMessagesFormatNumbersInEnglish: a validation error's message writes
// its numbers as golang.org/x/text's English printer did (kind.Printer
// replaced it, byte for byte: TestPrinterIsXTextsEnglish): integers
// grouped by thousands, a float past %g's plain range with ×10 and a
// superscript exponent.
func TestMessagesFormatNumbersInEnglish(t *testing.T) {
	schema := `{"type": "object", "properties": {
		"name": {"type": "string", "maxLength": 1000},
		"size": {"type": "number", "minimum": 1e6, "maximum": 1e9},
		"tags": {"type": "array", "minItems": 1200}}}`
	var doc any
	if err := json.Unmarshal([]byte(schema), &doc); err != nil {
		t.Fatal(err)
	}
	c := NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		value string
		want  string
	}{
		{`{"name": "` + strings.Repeat("x", 1234) + `"}`, "maxLength: got 1,234, want 1,000"},
		{`{"size": 2500.5}`, "minimum: got 2,500.5, want 1×10⁰⁶"},
		{`{"size": 12345678901}`, "maximum: got 1.2345678901×10¹⁰, want 1×10⁰⁹"},
		{`{"tags": []}`, "minItems: got 0, want 1,200"},
	}
	for _, tt := range cases {
		var v any
		if err := json.Unmarshal([]byte(tt.value), &v); err != nil {
			t.Fatal(err)
		}
		err := sch.Validate(v)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.40s: error %v, want it to say %q", tt.value, err, tt.want)
		}
	}
}

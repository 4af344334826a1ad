package broker

import (
	"encoding/json"
	"testing"
)

func TestLogReason(t *testing.T) {
	const description = "The provision failed: quota exceeded in eu-west-1."
	tests := []struct {
		name   string
		params []string
		want   string
	}{
		{name: "a description with no parameter in it is the reason", params: []string{`{"fail":true,"duration_seconds":5}`}, want: description},
		{name: "a description that is a parameter is withheld", params: []string{`{"fail_description":"The provision failed: quota exceeded in eu-west-1."}`}, want: withheldReason},
		{name: "a description that quotes a nested parameter is withheld", params: []string{`{}`, `{"a":[{"b":"eu-west-1"}]}`}, want: withheldReason},
		{name: "numbers, booleans and empty strings are not looked for", params: []string{`{"n":1,"b":true,"s":""}`}, want: description},
		{name: "parameters that are not JSON are skipped", params: []string{`{`, ``}, want: description},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raw []json.RawMessage
			for _, p := range tt.params {
				raw = append(raw, json.RawMessage(p))
			}
			if got := logReason(description, raw...); got != tt.want {
				t.Fatalf("logReason = %q, want %q", got, tt.want)
			}
		})
	}
}

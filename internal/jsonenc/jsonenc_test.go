package jsonenc_test

import (
	"encoding/json"
	"testing"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

func TestMarshal(t *testing.T) {
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"keeps <, > and & unescaped", map[string]string{"html": "<a href='x'>&</a>"}, `{"html":"<a href='x'>&</a>"}`},
		{"keeps raw JSON as it is, but for whitespace", struct {
			Raw json.RawMessage `json:"raw"`
		}{json.RawMessage(`{ "z": 1, "a": [1, 2.50], "s": "<&>" }`)}, `{"raw":{"z":1,"a":[1,2.50],"s":"<&>"}}`},
		{"ends without a newline", "x", `"x"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := jsonenc.Marshal(c.v)
			if err != nil || string(got) != c.want {
				t.Errorf("got %s, %v; want %s", got, err, c.want)
			}
		})
	}
	t.Run("refuses raw JSON that is not JSON", func(t *testing.T) {
		if got, err := jsonenc.Marshal(json.RawMessage(`{"a":`)); err == nil {
			t.Errorf("got %s, want an error", got)
		}
	})
}

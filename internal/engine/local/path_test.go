package local

import (
	"encoding/json"
	"reflect"
	"testing"
)

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := decodeValue([]byte(s))
	if err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func encode(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestPathLookup(t *testing.T) {
	t.Parallel()
	doc := `{"a":{"b":[10,{"c":"x"}]},"odd key":1,"n":null}`
	cases := []struct {
		path    string
		want    string // JSON, or "" for nothing
		context bool
	}{
		{"$", doc, false},
		{"$.a.b[0]", `10`, false},
		{"$.a.b[1].c", `"x"`, false},
		{"$['a']['b'][1]['c']", `"x"`, false},
		{`$["odd key"]`, `1`, false},
		{"$.n", `null`, false},
		{"$.missing", "", false},
		{"$.a.b[2]", "", false},
		{"$.a.b.c", "", false},
		{"$.a[0]", "", false},
		{"$$", doc, true},
	}
	for _, c := range cases {
		t.Run(c.path+" selects "+c.want, func(t *testing.T) {
			t.Parallel()
			p, err := parsePath(c.path)
			if err != nil {
				t.Fatalf("parsePath = %v", err)
			}
			if p.context != c.context {
				t.Errorf("context = %v, want %v", p.context, c.context)
			}
			got, ok := p.lookup(mustDecode(t, doc))
			if c.want == "" {
				if ok {
					t.Errorf("selected %s, want nothing", encode(t, got))
				}
				return
			}
			if !ok || encode(t, got) != encode(t, mustDecode(t, c.want)) {
				t.Errorf("selected %v (found %v), want %s", got, ok, c.want)
			}
		})
	}
}

func TestParsePathRefuses(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "a", "$.", "$..a", "$.a..b", "$.*", "$.a[*]", "$.a[-1]", "$.a[01]", "$.a[0:2]", "$.a[?(@.b)]",
		"$.a[", "$['a", "$['']", "$[a]", "$.a b", "$.a()", "$.length()", "@.a", "$a",
	} {
		t.Run("the path "+s+" is refused", func(t *testing.T) {
			t.Parallel()
			if p, err := parsePath(s); err == nil {
				t.Errorf("parsePath(%q) = %+v, want an error", s, p)
			}
		})
	}
}

func TestPathSet(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, path, doc, value, want string
	}{
		{"$ replaces the whole document", "$", `{"a":1}`, `2`, `2`},
		{"a field is added", "$.b", `{"a":1}`, `2`, `{"a":1,"b":2}`},
		{"a field is replaced", "$.a", `{"a":1}`, `2`, `{"a":2}`},
		{"missing objects are created", "$.x.y", `{}`, `true`, `{"x":{"y":true}}`},
		{"an array element is replaced", "$.a[1]", `{"a":[1,2]}`, `9`, `{"a":[1,9]}`},
		{"a value that is not an object is an error", "$.a.b", `{"a":1}`, `2`, ""},
		{"an index past the end is an error", "$.a[2]", `{"a":[1,2]}`, `9`, ""},
		{"a document that is not an object is an error", "$.a", `"text"`, `1`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, err := parsePath(c.path)
			if err != nil {
				t.Fatal(err)
			}
			doc := mustDecode(t, c.doc)
			before := encode(t, doc)
			got, err := p.set(doc, mustDecode(t, c.value))
			if c.want == "" {
				if err == nil {
					t.Errorf("set = %s, want an error", encode(t, got))
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, mustDecode(t, c.want)) {
				t.Errorf("set = %v, %v; want %s", got, err, c.want)
			}
			if after := encode(t, doc); after != before {
				t.Errorf("set changed its input: %s became %s", before, after)
			}
		})
	}
}

func TestErrorMatching(t *testing.T) {
	t.Parallel()
	cases := []struct {
		equals []string
		name   string
		want   bool
	}{
		{[]string{"A"}, "A", true},
		{[]string{"A"}, "B", false},
		{[]string{"B", "A"}, "A", true},
		{[]string{"States.ALL"}, "A", true},
		{[]string{"States.ALL"}, "States.Timeout", true},
		{[]string{"States.ALL"}, "States.Runtime", false},
		{[]string{"States.TaskFailed"}, "A", true},
		{[]string{"States.TaskFailed"}, "States.Timeout", false},
		{[]string{"States.Timeout"}, "States.Timeout", true},
	}
	for _, c := range cases {
		if got := matches(c.equals, c.name); got != c.want {
			t.Errorf("matches(%v, %q) = %v, want %v", c.equals, c.name, got, c.want)
		}
	}
}

package jsonenc

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MarshalValue is json.Marshal (with its HTML escaping, unlike Marshal) of
// a value decoded into any (maps, lists, strings, json.Number, booleans,
// nil) or built of those and integers (a driver's credentials), byte for
// byte, without reflection: encoding/json walks a map[string]any through
// reflect, a few allocations per key, and the local
// engine encodes one for every transition and Task payload, the sealing
// store a binding's credentials. Anything else, and any string that needs
// an escape, is handed to json.Marshal as it is, so that the output stays
// json.Marshal's (FuzzMarshalValue compares them).
func MarshalValue(v any) ([]byte, error) {
	return appendValue(make([]byte, 0, 128), v)
}

// AppendValue is MarshalValue appending to b: for an encoder that writes
// an object around such values (a bind's answer around its credentials).
func AppendValue(b []byte, v any) ([]byte, error) { return appendValue(b, v) }

func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		if v {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case string:
		return appendStdString(b, v)
	case json.Number:
		if v != "" && plainNumber(string(v)) {
			return append(b, v...), nil
		}
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		var onStack [16]string
		keys := onStack[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendStdString(b, k); err != nil {
				return nil, err
			}
			b = append(b, ':')
			if b, err = appendValue(b, v[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case int: // a driver's port, say
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(v), 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case uint:
		return strconv.AppendUint(b, uint64(v), 10), nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, data...), nil
}

// appendStdString writes s quoted when json.Marshal would write it unescaped
// (it escapes control characters, ", \, <, >, &, U+2028, U+2029 and invalid
// UTF-8), else what json.Marshal writes.
func appendStdString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return appendMarshalled(b, s)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return appendMarshalled(b, s)
		}
		i += size
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

func appendMarshalled(b []byte, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, data...), nil
}

// plainNumber checks JSON's number grammar, which json.Marshal checks of a
// json.Number before writing it as it is.
func plainNumber(s string) bool {
	return NumberPrefix(s) == len(s)
}

// NumberPrefix is the length of the JSON number s starts with (its
// grammar: a sign, no leading zeros, a fraction and an exponent with
// digits), or -1 when it starts with none.
func NumberPrefix[S ~string | ~[]byte](s S) int {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return -1
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return -1
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return -1
		}
	}
	return i
}

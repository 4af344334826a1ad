package api

import (
	"encoding/json"
	"unicode/utf8"
)

// A body that can read the plain form of itself without reflection: an
// object whose keys are its fields' names exactly, each once or more, with
// strings without escapes for its string fields. That is what platforms
// send, and json.Unmarshal's decoder costs a request a dozen allocations
// and more time than the rest of decoding. readFast returns false, having
// set nothing, for anything else (another key, an escape, a value of
// another type), which json.Unmarshal then reads with its own rules and
// errors; on what it reads, it gives what json.Unmarshal gives
// (FuzzFastDecodeIsUnmarshal).
type fastBody interface {
	readFast(data []byte) bool
}

// fastFields reads the object data (valid JSON: json.Valid) into the
// string and raw fields that field names: field returns the string
// field a key names, or the raw one, or neither (the key is not one of
// the body's). The string fields point into one copy of data (of a body
// of at most maxCopiedBody bytes; a copy each beyond), held in one slice
// of four, and the raw ones into data itself.
func fastFields(data []byte, field func(key []byte) (**string, *json.RawMessage)) bool {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return false
	}
	var text string   // data as a string, made at the first string field
	var held []string // where the string fields point, a few at a time
	for i = skipSpace(data, i+1); data[i] != '}'; {
		end := plainStringEnd(data, i)
		if end < 0 {
			return false
		}
		s, raw := field(data[i+1 : end-1])
		if s == nil && raw == nil {
			return false
		}
		i = skipSpace(data, skipSpace(data, end)+1) // past the colon
		vend := valueEnd(data, i)
		switch {
		case raw != nil:
			*raw = json.RawMessage(data[i:vend])
		case data[i] == 'n': // null
			*s = nil
		case data[i] != '"':
			return false
		default:
			if plainStringEnd(data, i) != vend || !utf8.Valid(data[i+1:vend-1]) {
				return false // escapes, or bytes json.Unmarshal replaces
			}
			var v string
			switch {
			case len(data) > maxCopiedBody:
				v = string(data[i+1 : vend-1])
			case text == "":
				text = string(data)
				fallthrough
			default:
				v = text[i+1 : vend-1]
			}
			if len(held) == cap(held) {
				held = make([]string, 0, 4)
			}
			held = append(held, v)
			*s = &held[len(held)-1]
		}
		if i = skipSpace(data, vend); data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return skipSpace(data, i+1) == len(data)
}

// maxCopiedBody is the largest body whose string fields share one copy of
// it: one allocation rather than one a field, for a copy of the
// parameters too.
const maxCopiedBody = 1 << 10

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// plainStringEnd is the index past the string that starts at data[i],
// or -1 if it is not a string or has an escape.
func plainStringEnd(data []byte, i int) int {
	if data[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '"':
			return j + 1
		case '\\':
			return -1
		}
	}
	return -1
}

// valueEnd is the index past the JSON value that starts at data[i], in
// valid JSON.
func valueEnd(data []byte, i int) int {
	depth := 0
	for j := i; j < len(data); j++ {
		switch c := data[j]; c {
		case '"':
			for j++; data[j] != '"'; j++ {
				if data[j] == '\\' {
					j++
				}
			}
			if depth == 0 {
				return j + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j // the end of the enclosing object
			}
			if depth--; depth == 0 {
				return j + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return j
			}
		}
	}
	return len(data)
}

func (b *bindBody) readFast(data []byte) bool {
	ok := fastFields(data, func(key []byte) (**string, *json.RawMessage) {
		switch string(key) {
		case "service_id":
			return &b.ServiceID, nil
		case "plan_id":
			return &b.PlanID, nil
		case "app_guid":
			return &b.AppGUID, nil
		case "predecessor_binding_id":
			return &b.PredecessorBindingID, nil
		case "bind_resource":
			return nil, &b.BindResource
		case "parameters":
			return nil, &b.Parameters
		case "context":
			return nil, &b.Context
		}
		return nil, nil
	})
	if !ok {
		*b = bindBody{}
	}
	return ok
}

func (b *provisionBody) readFast(data []byte) bool {
	ok := fastFields(data, func(key []byte) (**string, *json.RawMessage) {
		switch string(key) {
		case "service_id":
			return &b.ServiceID, nil
		case "plan_id":
			return &b.PlanID, nil
		case "organization_guid":
			return &b.OrganizationGUID, nil
		case "space_guid":
			return &b.SpaceGUID, nil
		case "parameters":
			return nil, &b.Parameters
		case "context":
			return nil, &b.Context
		}
		return nil, nil // maintenance_info among them
	})
	if !ok {
		*b = provisionBody{}
	}
	return ok
}

// bindResourceBody is what decodeBind reads of bind_resource.
type bindResourceBody struct {
	AppGUID *string `json:"app_guid"`
	Route   *string `json:"route"`
}

func (b *bindResourceBody) readFast(data []byte) bool {
	ok := fastFields(data, func(key []byte) (**string, *json.RawMessage) {
		switch string(key) {
		case "app_guid":
			return &b.AppGUID, nil
		case "route":
			return &b.Route, nil
		}
		return nil, nil
	})
	if !ok {
		*b = bindResourceBody{}
	}
	return ok
}

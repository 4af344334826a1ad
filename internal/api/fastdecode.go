package api

import (
	"encoding/json"

	"github.com/serverless-osb/broker/internal/jsonenc"
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
	sc := jsonenc.NewScanner(data, jsonenc.ScanOptions{Spaces: true, Valid: true})
	var text string   // data as a string, made at the first string field
	var held []string // where the string fields point, a few at a time
	sc.Enter('{')
	for key, ok := sc.Key(); ok; key, ok = sc.Key() {
		s, raw := field(key)
		switch {
		case s == nil && raw == nil:
			return false
		case raw != nil:
			v, ok := sc.Skip()
			if !ok {
				return false
			}
			*raw = json.RawMessage(v)
		case sc.Peek() == 'n':
			if !sc.Literal("null") {
				return false
			}
			*s = nil
		default:
			b, ok := sc.Plain() // no escapes, nor bytes json.Unmarshal replaces
			if !ok {
				return false
			}
			var v string
			switch end := sc.Pos() - 1; {
			case len(data) > maxCopiedBody:
				v = string(b)
			case text == "":
				text = string(data)
				fallthrough
			default:
				v = text[end-len(b) : end]
			}
			if len(held) == cap(held) {
				held = make([]string, 0, 4)
			}
			held = append(held, v)
			*s = &held[len(held)-1]
		}
	}
	return sc.End()
}

// maxCopiedBody is the largest body whose string fields share one copy of
// it: one allocation rather than one a field, for a copy of the
// parameters too.
const maxCopiedBody = 1 << 10

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

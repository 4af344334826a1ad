package steps

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/serverless-osb/broker/internal/broker"
)

// decodePayload decodes a Task's payload as json.Unmarshal does. The
// payloads of the operation and cleanup workflows (compact objects of
// strings without escapes: what the local engine and Step Functions send)
// take a short way that copies the text once and makes every field a part
// of that copy, where json.Unmarshal allocates its state and each string;
// anything else (other fields, numbers, escapes, spaces, keys in another
// case) takes json.Unmarshal (TestDecodePayloadIsJSONUnmarshal,
// FuzzDecodePayload compare the two).
func decodePayload(data []byte) (Payload, error) {
	if p, ok := decodeShort(data); ok {
		return p, nil
	}
	var p Payload
	err := json.Unmarshal(data, &p)
	return p, err
}

// decodeShort is decodePayload's short way; ok is false when it does not
// apply.
func decodeShort(data []byte) (p Payload, ok bool) {
	if !utf8.Valid(data) { // json.Unmarshal replaces what is not
		return Payload{}, false
	}
	d := shortDecoder{s: string(data)}
	ok = d.object(func(key string) bool {
		switch key {
		case "step":
			return d.str(&p.Step)
		case "operation_id":
			return d.str(&p.OperationID)
		case "instance_id":
			return d.str(&p.InstanceID)
		case "detached_id":
			return d.str(&p.DetachedID)
		case "campaign_id":
			return d.str(&p.CampaignID)
		case "error":
			return d.str(&p.Error)
		case "cause":
			return d.str(&p.Cause)
		case "execution_input":
			// A key twice: json.Unmarshal decodes into the value it has.
			in := p.ExecutionInput
			if in == nil {
				in = &broker.WorkflowInput{}
			}
			p.ExecutionInput = in
			return d.object(func(key string) bool {
				switch key {
				case "instance_id":
					return d.str(&in.InstanceID)
				case "binding_id":
					return d.str(&in.BindingID)
				case "kind":
					return d.str((*string)(&in.Kind))
				}
				return false
			})
		}
		return false
	})
	return p, ok && d.i == len(d.s)
}

// shortDecoder reads compact JSON objects of strings without escapes from
// s, whose parts the strings it reads are.
type shortDecoder struct {
	s string
	i int
}

// object reads an object, calling field to read the value of each key.
func (d *shortDecoder) object(field func(key string) bool) bool {
	if d.i >= len(d.s) || d.s[d.i] != '{' {
		return false
	}
	d.i++
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		return true
	}
	for {
		var key string
		if !d.str(&key) || d.i >= len(d.s) || d.s[d.i] != ':' {
			return false
		}
		d.i++
		if !field(key) || d.i >= len(d.s) {
			return false
		}
		switch d.s[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string without escapes or control characters into v.
func (d *shortDecoder) str(v *string) bool {
	if d.i >= len(d.s) || d.s[d.i] != '"' {
		return false
	}
	for j := d.i + 1; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			*v = d.s[d.i+1 : j]
			d.i = j + 1
			return true
		case c == '\\' || c < 0x20:
			return false
		}
	}
	return false
}

package cloudformation

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"strconv"

	"github.com/serverless-osb/broker/internal/catalog"
	"github.com/serverless-osb/broker/internal/jsonenc"
)

// PreparsedSuffix names a template's pre-parsed form, beside it: make
// build writes one for each template it bundles (Preparse), and the
// functions read it rather than parse the YAML at start, which was most
// of their start with the deployed catalog.
const PreparsedSuffix = ".json"

// preparsed is a template's pre-parsed form: what the driver reads of it
// (Template without its Body and Path), with the sha256 of the body it
// was read from, so that a stale one is never read.
type preparsed struct {
	Source   string    `json:"source"`
	Template *Template `json:"template"`
}

func templateDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// Preparse returns the pre-parsed form of a template's body, or nil when
// it has none: a body that is no usable template (Configure says why),
// or one whose values JSON would not give back as the YAML's are (a
// float written as a whole number), which the functions parse at start.
func Preparse(body []byte) ([]byte, error) {
	t, err := parseTemplate(body)
	if err != nil {
		return nil, nil
	}
	t.Body = ""
	out, err := json.Marshal(preparsed{Source: templateDigest(body), Template: t})
	if err != nil {
		return nil, nil
	}
	back, ok := decodePreparsed(out, body)
	if !ok {
		return nil, nil
	}
	back.Body = ""
	if !reflect.DeepEqual(back, t) {
		return nil, nil
	}
	return out, nil
}

// readPreparsed is the template read from path's pre-parsed form, if it
// is there and was made from body.
func readPreparsed(path string, body []byte) (*Template, bool) {
	data, err := os.ReadFile(path + PreparsedSuffix)
	if err != nil {
		return nil, false
	}
	return decodePreparsed(data, body)
}

func decodePreparsed(data, body []byte) (*Template, bool) {
	// The short way first (jsonenc.DecodeAny, then the fields by name):
	// encoding/json's reflection was two thirds of reading the deployed
	// catalog's 25 templates at every cold start. A form it does not take
	// whole (an escape, a key or a type Preparse does not write) is read
	// by encoding/json, by its own rules.
	p, ok := preparsedOf(data)
	if !ok {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		if d.Decode(&p) != nil {
			return nil, false
		}
	}
	if p.Source != templateDigest(body) || p.Template == nil {
		return nil, false
	}
	t := p.Template
	t.Body = string(body)
	for i := range t.Declared {
		if t.Declared[i].Properties != nil {
			t.Declared[i].Properties = catalog.YAMLNumbers(t.Declared[i].Properties).(map[string]any)
		}
	}
	return t, true
}

// preparsedOf reads a pre-parsed form as encoding/json (UseNumber) reads
// it into a preparsed, when it is read the short way (jsonenc.DecodeAny)
// and holds only the keys, as Preparse writes them, and the types of
// their fields; ok is false for anything else, which encoding/json then
// reads (TestPreparsedOfReadsAsEncodingJSON).
func preparsedOf(data []byte) (p preparsed, ok bool) {
	v, ok := jsonenc.DecodeAny(data)
	if !ok {
		return p, false
	}
	r := &formReader{ok: true}
	r.object(v, func(k string, v any) {
		switch k {
		case "source":
			p.Source = r.str(v)
		case "template":
			p.Template = r.template(v)
		default:
			r.ok = false
		}
	})
	return p, r.ok
}

// formReader converts DecodeAny's values into a preparsed's fields as
// encoding/json would (null: the zero value; [] and {}: empty, not nil);
// ok turns false at anything it does not take.
type formReader struct{ ok bool }

// object calls each with the members of an object (none for null).
func (r *formReader) object(v any, each func(k string, v any)) bool {
	if v == nil {
		return false
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		r.ok = false
		return false
	}
	for k, e := range m {
		each(k, e)
	}
	return true
}

func (r *formReader) str(v any) string {
	s, isStr := v.(string)
	if !isStr && v != nil {
		r.ok = false
	}
	return s
}

// listOf is an array's elements, each read by elem; nil for null.
func listOf[T any](r *formReader, v any, elem func(any) T) []T {
	a, isList := v.([]any)
	if !isList {
		if v != nil {
			r.ok = false
		}
		return nil
	}
	out := make([]T, len(a))
	for i, e := range a {
		out[i] = elem(e)
	}
	return out
}

func (r *formReader) strs(v any) []string { return listOf(r, v, r.str) }

func (r *formReader) template(v any) *Template {
	t := &Template{}
	if !r.object(v, func(k string, v any) {
		switch k {
		case "Path":
			t.Path = r.str(v)
		case "Body":
			t.Body = r.str(v)
		case "Parameters":
			t.Parameters = r.parameters(v)
		case "Resources":
			if v != nil {
				n, isNum := v.(json.Number)
				i, err := strconv.ParseInt(string(n), 10, 0)
				r.ok = r.ok && isNum && err == nil
				t.Resources = int(i)
			}
		case "Declared":
			t.Declared = r.resources(v)
		case "Outputs":
			t.Outputs = r.strs(v)
		case "PrivateOutputs":
			t.PrivateOutputs = r.strs(v)
		case "Macros":
			t.Macros = r.strs(v)
		default:
			r.ok = false
		}
	}) {
		return nil
	}
	return t
}

func (r *formReader) parameters(v any) map[string]Parameter {
	out := map[string]Parameter{}
	if !r.object(v, func(name string, v any) {
		var p Parameter
		r.object(v, func(k string, v any) {
			switch k {
			case "Type":
				p.Type = r.str(v)
			case "HasDefault":
				b, isBool := v.(bool)
				r.ok = r.ok && (isBool || v == nil)
				p.HasDefault = b
			case "Default":
				p.Default = r.str(v)
			case "AllowedValues":
				p.AllowedValues = r.strs(v)
			default:
				r.ok = false
			}
		})
		out[name] = p
	}) {
		return nil
	}
	return out
}

func (r *formReader) resources(v any) []Resource {
	return listOf(r, v, func(e any) (res Resource) {
		r.object(e, func(k string, v any) {
			switch k {
			case "LogicalID":
				res.LogicalID = r.str(v)
			case "Type":
				res.Type = r.str(v)
			case "Properties":
				if v != nil {
					m, isMap := v.(map[string]any)
					r.ok = r.ok && isMap
					res.Properties = m
				}
			case "DeletionPolicy":
				res.DeletionPolicy = r.str(v)
			default:
				r.ok = false
			}
		})
		return res
	})
}

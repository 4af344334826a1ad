package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/jsonenc"
	"github.com/serverless-osb/broker/internal/logging"
)

// decodeBody reads a JSON object into v; serve bounds the body to
// MaxBodyBytes. Unknown fields are ignored, as the spec requires;
// everything else that is wrong gets a description that says what to fix.
func decodeBody(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		// errors.As's variable escapes: made only for an error.
		if tooLarge := new(*http.MaxBytesError); errors.As(err, tooLarge) {
			return badRequest("The request body is larger than %d bytes (%d KiB), the most this broker stores for one request; send smaller parameters.",
				MaxBodyBytes, MaxBodyBytes>>10)
		}
		return badRequest("The request body could not be read: %v.", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return badRequest("The request body is empty; send a JSON object.")
	}
	// One valid JSON value (the usual body) decodes as the Decoder below
	// would, without the Decoder and its buffer.
	if json.Valid(data) {
		if f, ok := v.(fastBody); ok && f.readFast(data) {
			return nil
		}
		if err := json.Unmarshal(data, v); err != nil {
			return jsonError(err)
		}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return badRequest("The request body has data after its JSON object; send exactly one JSON object.")
	}
	return nil
}

func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return badRequest("The request body is not valid JSON (at byte %d): %v.", syntax.Offset, syntax)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("The request body must be a JSON object, not %s.", typ.Value)
		}
		return badRequest("The field %q must be %s, not %s.", typ.Field, jsonKind(typ.Type.String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("The request body is truncated JSON; send a complete JSON object.")
	}
	return badRequest("The request body is not valid JSON: %v.", err)
}

func jsonKind(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "a JSON object"
}

// asObject checks that a field, when present, is a JSON object; null
// counts as absent. An object with a key twice, at any depth, or two keys
// of one object that differ only in case, is refused naming the key: the
// schema validated one value, and a target's parser may read another
// (the first, the last, or the key in the other case). What is returned
// is the object re-encoded, one value per key, so that what a driver
// forwards is what was validated, whatever the client's spelling.
func asObject(name string, raw json.RawMessage) (json.RawMessage, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, nil
	}
	if t[0] != '{' {
		return nil, badRequest("The field %q must be a JSON object.", name)
	}
	// Most objects are already what re-encoding makes (compact, keys
	// sorted, once, in lower case): kept as they are, without decoding.
	if jsonenc.Canonical(t, jsonenc.CanonicalOptions{LowerKeys: true}) {
		return json.RawMessage(t), nil
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	v, err := decodeUnique(dec, name)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("re-encode %s: %w", name, err)
	}
	return json.RawMessage(bytes.TrimSpace(out.Bytes())), nil
}

// decodeUnique reads one JSON value from dec (numbers as json.Number), and
// refuses a key twice in an object, or two keys of an object equal under
// case folding; path names the value ("parameters", "parameters.db",
// "parameters.list[2]").
func decodeUnique(dec *json.Decoder, path string) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(err)
	}
	switch tok {
	case json.Delim('{'):
		obj, seen := map[string]any{}, map[string]string{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, jsonError(err)
			}
			key := tok.(string)
			folded := strings.ToLower(strings.ToUpper(key))
			switch other, dup := seen[folded]; {
			case dup && other == key:
				return nil, badRequest("The field %q has the key %q twice; send each key once, with the value you mean.", path, key)
			case dup:
				return nil, badRequest("The field %q has the keys %q and %q, which differ only in case; send one of them.", path, other, key)
			}
			seen[folded] = key
			if obj[key], err = decodeUnique(dec, path+"."+key); err != nil {
				return nil, err
			}
		}
		return obj, closing(dec)
	case json.Delim('['):
		list := []any{}
		for i := 0; dec.More(); i++ {
			item, err := decodeUnique(dec, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			list = append(list, item)
		}
		return list, closing(dec)
	}
	return tok, nil // a string, json.Number, bool or nil
}

// closing reads the delimiter that ends an object or an array.
func closing(dec *json.Decoder) error {
	if _, err := dec.Token(); err != nil {
		return jsonError(err)
	}
	return nil
}

// field is one string field of a request, for validation.
type field struct {
	name     string
	value    *string // nil: absent
	required bool
}

// checkFields enforces required and non-empty strings (the spec: strings,
// if present, MUST be non-empty) and sane identifiers.
func checkFields(fields ...field) error {
	for _, f := range fields {
		switch {
		case f.value == nil && f.required:
			return badRequest("The field %q is required.", f.name)
		case f.value == nil:
		case *f.value == "":
			return badRequest("The field %q must be a non-empty string.", f.name)
		default:
			if err := checkID(f.name, *f.value); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkID refuses identifiers the broker would not store faithfully (see
// broker.CheckID): invalid UTF-8, control characters, absurd lengths.
func checkID(name, v string) error {
	if err := broker.CheckID(v); err != nil {
		return badRequest("The %s is not valid: %v; %s.", name, err, broker.IDRule)
	}
	return nil
}

// pathIDs validates the ids in the URL and records them for the log line
// (only once they are valid: a refused id is never logged).
func pathIDs(r *http.Request) (instanceID, bindingID string, err error) {
	instanceID, bindingID = r.PathValue("instance_id"), r.PathValue("binding_id")
	if err := checkID("instance_id in the URL", instanceID); err != nil {
		return "", "", err
	}
	ri := info(r)
	ri.instanceID = instanceID
	if r.Pattern != "" && strings.Contains(r.Pattern, "{binding_id}") {
		if err := checkID("binding_id in the URL", bindingID); err != nil {
			return "", "", err
		}
		ri.bindingID = bindingID
	}
	return instanceID, bindingID, nil
}

// logIDs returns the request's context with the ids that pathIDs
// validated added, for later log lines.
func logIDs(r *http.Request) context.Context {
	ri := info(r)
	switch {
	case ri.instanceID == "":
		return r.Context()
	case ri.bindingID == "":
		return logging.With(r.Context(), slog.String("instance_id", ri.instanceID))
	}
	return logging.With(r.Context(), slog.String("instance_id", ri.instanceID), slog.String("binding_id", ri.bindingID))
}

// query reads the query parameters: accepts_incomplete and the named
// strings (required ones must be present; any present must be non-empty).
type query struct {
	acceptsIncomplete bool
	values            map[string]string
}

func parseQuery(r *http.Request, required []string, optional []string) (query, error) {
	var q url.Values // nil for no query (a bind's, a provision's): no map
	if r.URL.RawQuery != "" {
		q = r.URL.Query()
	}
	var out query
	switch v := q.Get("accepts_incomplete"); v {
	case "", "false":
	case "true":
		out.acceptsIncomplete = true
	default:
		return out, badRequest("The query parameter accepts_incomplete must be true or false, not %q.", v)
	}
	for _, name := range append(append([]string(nil), required...), optional...) {
		vals, present := q[name]
		isRequired := contains(required, name)
		switch {
		case !present && isRequired:
			return out, badRequest("The query parameter %s is required.", name)
		case !present:
		case len(vals) != 1 || vals[0] == "":
			return out, badRequest("The query parameter %s must be given once, non-empty.", name)
		default:
			if err := checkID(name, vals[0]); err != nil {
				return out, err
			}
			if out.values == nil {
				out.values = map[string]string{}
			}
			out.values[name] = vals[0]
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// maintenanceInfo is the request form of maintenance_info.
type maintenanceInfo struct {
	Version     *string `json:"version"`
	Description string  `json:"description"`
}

func (m *maintenanceInfo) domain() (*broker.MaintenanceInfo, error) {
	if m == nil {
		return nil, nil
	}
	if m.Version == nil || *m.Version == "" {
		return nil, badRequest("The field \"maintenance_info.version\" is required when maintenance_info is sent.")
	}
	return &broker.MaintenanceInfo{Version: *m.Version, Description: m.Description}, nil
}

package local

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

// appendRecord appends what json.Marshal makes of r, byte for byte: the
// records are written on every transition, and encoding/json's reflection
// costs about ten allocations a record. It writes the record itself when
// every string is plain ASCII, every time json.Marshal's RFC 3339 and every
// JSON text canonical (what the engine writes: canonicalJSON,
// jsonenc.MarshalValue), and leaves anything else to json.Marshal
// (TestAppendRecordIsJSONMarshal, FuzzAppendRecord compare the two).
func appendRecord(b []byte, r *record) ([]byte, error) {
	if !plainRecord(r) {
		data, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode execution %s: %w", r.Name, err)
		}
		return append(b, data...), nil
	}
	b = append(b, `{"name":"`...)
	b = append(b, r.Name...)
	b = append(b, `","workflow":"`...)
	b = append(b, r.Workflow...)
	b = append(b, `","input":`...)
	b = appendRaw(b, r.Input)
	b = append(b, `,"status":"`...)
	b = append(b, r.Status...)
	b = append(b, `","started_at":`...)
	b = appendTime(b, r.StartedAt)
	if !r.StoppedAt.IsZero() {
		b = append(b, `,"stopped_at":`...)
		b = appendTime(b, r.StoppedAt)
	}
	if len(r.Output) > 0 {
		b = append(b, `,"output":`...)
		b = append(b, r.Output...)
	}
	b = appendStringField(b, `,"error":"`, r.Error)
	b = appendStringField(b, `,"cause":"`, r.Cause)
	b = appendStringField(b, `,"state":"`, r.State)
	if !r.StateEnteredAt.IsZero() {
		b = append(b, `,"state_entered_at":`...)
		b = appendTime(b, r.StateEnteredAt)
	}
	if len(r.StateInput) > 0 {
		b = append(b, `,"state_input":`...)
		b = append(b, r.StateInput...)
	}
	b = append(b, `,"history":`...)
	if r.History == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, s := range r.History {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, s...)
			b = append(b, '"')
		}
		b = append(b, ']')
	}
	b = appendStringField(b, `,"caught":"`, r.Caught)
	return append(b, '}'), nil
}

// recordSize is at least the length of appendRecord's text of a plain r.
func recordSize(r *record) int {
	// The keys and punctuation, and three times.
	n := 200 + 3*len(`"2006-01-02T15:04:05.999999999+00:00"`)
	for _, s := range [...]string{r.Name, string(r.Workflow), string(r.Status), r.Error, r.Cause, r.State, r.Caught} {
		n += len(s)
	}
	for _, s := range r.History {
		n += len(s) + 3
	}
	return n + len(r.Input) + len(r.Output) + len(r.StateInput)
}

// plainRecord says appendRecord can write r itself.
func plainRecord(r *record) bool {
	for _, s := range [...]string{r.Name, string(r.Workflow), string(r.Status), r.Error, r.Cause, r.State, r.Caught} {
		if !plainString(s) {
			return false
		}
	}
	for _, s := range r.History {
		if !plainString(s) {
			return false
		}
	}
	for _, t := range [...]time.Time{r.StartedAt, r.StoppedAt, r.StateEnteredAt} {
		if !plainTime(t) {
			return false
		}
	}
	if r.Input != nil && len(r.Input) == 0 {
		return false // json.Marshal fails on it
	}
	opts := jsonenc.CanonicalOptions{EscapeHTML: true}
	return (len(r.Input) == 0 || jsonenc.Canonical(r.Input, opts)) &&
		(len(r.Output) == 0 || jsonenc.Canonical(r.Output, opts)) &&
		(len(r.StateInput) == 0 || jsonenc.Canonical(r.StateInput, opts))
}

// plainString says json.Marshal writes s as it is, quoted: printable ASCII
// that it does not escape.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// plainTime says time.Time.MarshalJSON writes t as AppendFormat with
// RFC3339Nano does: a year of four digits and an offset in whole minutes
// under a day (it fails on others).
func plainTime(t time.Time) bool {
	_, offset := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && offset%60 == 0 && offset > -24*3600 && offset < 24*3600
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendRaw writes a json.RawMessage as json.Marshal does: null when empty.
func appendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// appendStringField writes an omitempty string field, prefix being its
// comma, key and opening quote.
func appendStringField(b []byte, prefix, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, prefix...)
	b = append(b, s...)
	return append(b, '"')
}

package bolt

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// The instance and record items, which every change of an instance reads
// (a bind twice: its read, then its write's conditions), are read here
// without encoding/json's reflection: about 4 us and 17 allocations an
// instance. The reader takes what appendJSON writes (and jsonenc.Marshal
// wrote before it): known keys once each, no whitespace, strings without
// escapes, times in UTC. Anything else is left to json.Unmarshal whole
// (decode), so what an item decodes to, or its error, is json.Unmarshal's
// (FuzzItemRead compares them).

// itemRead reads an item of its own type from data; ok is false when it
// left the item to json.Unmarshal.
type itemRead interface {
	readJSON(data []byte) (ok bool)
}

var (
	_ itemRead = (*instanceItem)(nil)
	_ itemRead = (*resourceItem)(nil)
)

// jr reads one JSON object; ok turns false at the first thing it does not
// take.
type jr struct {
	b  []byte
	i  int
	ok bool
	// scratch holds a time written back, to compare.
	scratch [40]byte
}

// next moves to the object's next key and returns it, or nil at its end
// (or at anything it does not take: ok is false then).
func (r *jr) next() []byte {
	if !r.ok || r.i >= len(r.b) {
		r.ok = false
		return nil
	}
	switch c := r.b[r.i]; {
	case c == '}':
		r.i++
		return nil
	case c == ',' && r.b[r.i-1] != '{':
		r.i++
	case r.b[r.i-1] != '{':
		r.ok = false
		return nil
	}
	k, ok := r.plain()
	if !ok || len(k) == 0 || r.i >= len(r.b) || r.b[r.i] != ':' {
		r.ok = false
		return nil
	}
	r.i++
	return k
}

// open reads the '{' an object starts with.
func (r *jr) open() {
	if r.ok && r.i < len(r.b) && r.b[r.i] == '{' {
		r.i++
		return
	}
	r.ok = false
}

// plain reads a string without escapes, control characters or invalid
// UTF-8, which json.Unmarshal reads as it is, and returns its bytes.
func (r *jr) plain() ([]byte, bool) {
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return nil, false
	}
	start := r.i + 1
	for j := start; j < len(r.b); j++ {
		switch c := r.b[j]; {
		case c == '"':
			s := r.b[start:j]
			if !utf8.Valid(s) {
				return nil, false
			}
			r.i = j + 1
			return s, true
		case c < 0x20 || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

func (r *jr) str(dst *string) {
	s, ok := r.plain()
	if !ok {
		r.ok = false
		return
	}
	*dst = string(s)
}

func (r *jr) int(dst *int64) {
	j := r.i
	if j < len(r.b) && r.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(r.b) && r.b[j] >= '0' && r.b[j] <= '9' {
		j++
	}
	// No leading zero (invalid JSON), and nothing that makes it a float.
	if j == digits || r.b[digits] == '0' && j > digits+1 || j < len(r.b) && (r.b[j] == '.' || r.b[j] == 'e' || r.b[j] == 'E') {
		r.ok = false
		return
	}
	n, err := strconv.ParseInt(string(r.b[r.i:j]), 10, 64)
	if err != nil {
		r.ok = false
		return
	}
	*dst, r.i = n, j
}

// time reads a time as time.Time.UnmarshalJSON does, for the UTC times
// the items hold, written as time.Time.MarshalJSON writes them.
func (r *jr) time(dst *time.Time) {
	s, ok := r.plain()
	if !ok || len(s) == 0 || s[len(s)-1] != 'Z' {
		r.ok = false
		return
	}
	t, err := time.Parse(time.RFC3339Nano, string(s))
	if err != nil || string(t.AppendFormat(r.scratch[:0], time.RFC3339Nano)) != string(s) {
		r.ok = false
		return
	}
	*dst = t
}

// raw reads null, an object or an array as json.Unmarshal reads it into
// a json.RawMessage: a copy of its bytes, when they are valid and compact.
func (r *jr) raw(dst *json.RawMessage) {
	if bytes.HasPrefix(r.b[r.i:], []byte("null")) {
		*dst, r.i = json.RawMessage("null"), r.i+4
		return
	}
	if r.i >= len(r.b) || r.b[r.i] != '{' && r.b[r.i] != '[' {
		r.ok = false
		return
	}
	depth, inString := 0, false
	for j := r.i; j < len(r.b); j++ {
		c := r.b[j]
		switch {
		case inString && c == '\\':
			j++
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				v := r.b[r.i : j+1]
				if !compact(v) || !json.Valid(v) {
					r.ok = false
					return
				}
				*dst, r.i = append(json.RawMessage(nil), v...), j+1
				return
			}
		}
	}
	r.ok = false
}

// end reports whether the reader took the whole of its bytes.
func (r *jr) end() bool { return r.ok && r.i == len(r.b) }

// once marks field n seen, and stops at a key read twice (json.Unmarshal
// would merge or replace).
func (r *jr) once(seen *uint64, n uint) {
	if *seen&(1<<n) != 0 {
		r.ok = false
	}
	*seen |= 1 << n
}

func (it *instanceItem) readJSON(data []byte) bool {
	r := jr{b: data, ok: true}
	var seen uint64
	var n int64
	r.open()
	for k := r.next(); k != nil; k = r.next() {
		switch string(k) {
		case "id":
			r.once(&seen, 0)
			r.str(&it.ID)
		case "service_id":
			r.once(&seen, 1)
			r.str(&it.ServiceID)
		case "plan_id":
			r.once(&seen, 2)
			r.str(&it.PlanID)
		case "organization_guid":
			r.once(&seen, 3)
			r.str(&it.OrganizationGUID)
		case "space_guid":
			r.once(&seen, 4)
			r.str(&it.SpaceGUID)
		case "parameters":
			r.once(&seen, 5)
			r.raw(&it.Parameters)
		case "context":
			r.once(&seen, 6)
			r.raw(&it.Context)
		case "maintenance_info":
			r.once(&seen, 7)
			it.MaintenanceInfo = r.maintenanceInfo()
		case "plan_digest":
			r.once(&seen, 8)
			r.str(&it.PlanDigest)
		case "dashboard_url":
			r.once(&seen, 9)
			r.str(&it.DashboardURL)
		case "metadata":
			// Only an empty one: json.Unmarshal fills the maps.
			r.once(&seen, 10)
			r.open()
			if r.next() != nil {
				r.ok = false
			}
		case "state":
			r.once(&seen, 11)
			r.str(&it.State)
		case "op":
			r.once(&seen, 12)
			r.str(&it.Op)
		case "last_op":
			r.once(&seen, 13)
			r.str(&it.LastOp)
		case "binding_ops":
			r.once(&seen, 14)
			r.int(&n)
			if int64(int(n)) != n {
				r.ok = false
			}
			it.BindingOps = int(n)
		case "fingerprint":
			r.once(&seen, 15)
			r.str(&it.Fingerprint)
		case "version":
			r.once(&seen, 16)
			r.int(&it.Version)
		case "created_at":
			r.once(&seen, 17)
			r.time(&it.CreatedAt)
		case "updated_at":
			r.once(&seen, 18)
			r.time(&it.UpdatedAt)
		default:
			r.ok = false
		}
	}
	return r.end()
}

// maintenanceInfo reads a maintenance_info object: a version and at most
// a description.
func (r *jr) maintenanceInfo() *maintenanceInfoItem {
	m := &maintenanceInfoItem{}
	var seen uint64
	r.open()
	for k := r.next(); k != nil; k = r.next() {
		switch string(k) {
		case "version":
			r.once(&seen, 0)
			r.str(&m.Version)
		case "description":
			r.once(&seen, 1)
			r.str(&m.Description)
		default:
			r.ok = false
		}
	}
	return m
}

func (it *resourceItem) readJSON(data []byte) bool {
	r := jr{b: data, ok: true}
	var seen uint64
	r.open()
	for k := r.next(); k != nil; k = r.next() {
		switch string(k) {
		case "instance_id":
			r.once(&seen, 0)
			r.str(&it.InstanceID)
		case "name":
			r.once(&seen, 1)
			r.str(&it.Name)
		case "data":
			r.once(&seen, 2)
			r.raw(&it.Data)
		case "updated_at":
			r.once(&seen, 3)
			r.time(&it.UpdatedAt)
		default:
			r.ok = false
		}
	}
	return r.end()
}

package bolt

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/serverless-osb/broker/internal/jsonenc"
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

// jr reads one JSON object through a jsonenc.Scanner (compact text), with
// the item types' own values: a string copied, an int, a time, raw JSON.
type jr struct {
	jsonenc.Scanner
	// scratch holds a time written back, to compare.
	scratch [40]byte
}

func newJR(data []byte) jr { return jr{Scanner: jsonenc.NewScanner(data, jsonenc.ScanOptions{})} }

func (r *jr) str(dst *string) {
	if s, ok := r.Plain(); ok {
		*dst = string(s)
	}
}

func (r *jr) int(dst *int64) {
	s, ok := r.Number()
	// Nothing that makes it a float.
	if !ok || bytes.ContainsAny(s, ".eE") {
		r.Fail()
		return
	}
	n, err := strconv.ParseInt(string(s), 10, 64)
	if err != nil {
		r.Fail()
		return
	}
	*dst = n
}

// time reads a time as time.Time.UnmarshalJSON does, for the UTC times
// the items hold, written as time.Time.MarshalJSON writes them.
func (r *jr) time(dst *time.Time) {
	s, ok := r.Plain()
	if !ok || len(s) == 0 || s[len(s)-1] != 'Z' {
		r.Fail()
		return
	}
	t, err := time.Parse(time.RFC3339Nano, string(s))
	if err != nil || string(t.AppendFormat(r.scratch[:0], time.RFC3339Nano)) != string(s) {
		r.Fail()
		return
	}
	*dst = t
}

// raw reads null, an object or an array as json.Unmarshal reads it into
// a json.RawMessage: a copy of its bytes, when they are valid and compact
// (Skip takes only such).
func (r *jr) raw(dst *json.RawMessage) {
	switch r.Peek() {
	case 'n':
		if r.Literal("null") {
			*dst = json.RawMessage("null")
		}
	case '{', '[':
		if v, ok := r.Skip(); ok {
			*dst = append(json.RawMessage(nil), v...)
		}
	default:
		r.Fail()
	}
}

// once marks field n seen, and stops at a key read twice (json.Unmarshal
// would merge or replace).
func (r *jr) once(seen *uint64, n uint) {
	if *seen&(1<<n) != 0 {
		r.Fail()
	}
	*seen |= 1 << n
}

func (it *instanceItem) readJSON(data []byte) bool {
	r := newJR(data)
	var seen uint64
	var n int64
	r.Enter('{')
	for k, ok := r.Key(); ok; k, ok = r.Key() {
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
			r.Enter('{')
			if _, ok := r.Key(); ok {
				r.Fail()
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
				r.Fail()
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
			r.Fail()
		}
	}
	return r.End()
}

// maintenanceInfo reads a maintenance_info object: a version and at most
// a description.
func (r *jr) maintenanceInfo() *maintenanceInfoItem {
	m := &maintenanceInfoItem{}
	var seen uint64
	r.Enter('{')
	for k, ok := r.Key(); ok; k, ok = r.Key() {
		switch string(k) {
		case "version":
			r.once(&seen, 0)
			r.str(&m.Version)
		case "description":
			r.once(&seen, 1)
			r.str(&m.Description)
		default:
			r.Fail()
		}
	}
	return m
}

func (it *resourceItem) readJSON(data []byte) bool {
	r := newJR(data)
	var seen uint64
	r.Enter('{')
	for k, ok := r.Key(); ok; k, ok = r.Key() {
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
			r.Fail()
		}
	}
	return r.End()
}

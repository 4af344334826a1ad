package bolt

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// The items a request writes most (instance, operation, binding, record)
// are encoded here field by field, without encoding/json's reflection,
// which was about a tenth of a synchronous provision's CPU outside its
// fsyncs: a boxed time.Time.MarshalJSON per time, a validation and a copy
// per raw value. The bytes are those jsonenc.Marshal writes of the same
// storage type (FuzzItemJSON compares them). An item with anything this
// writer does not take (a string that needs an escape, raw JSON that is
// not compact, a map, an endpoint, a time out of RFC 3339's range) is
// left to jsonenc.Marshal whole, so that its bytes and its errors stay
// encoding/json's.

// itemJSON appends an item's JSON; ok is false when it left the item to
// encoding/json.
type itemJSON interface {
	appendJSON(b []byte) (out []byte, ok bool)
}

var (
	_ itemJSON = instanceItem{}
	_ itemJSON = operationItem{}
	_ itemJSON = bindingItem{}
	_ itemJSON = resourceItem{}
)

// jw writes one JSON object; ok turns false at the first value it does not
// take.
type jw struct {
	b     []byte
	ok    bool
	comma bool
}

func newJW(b []byte) jw { return jw{b: append(b, '{'), ok: true} }

func (w *jw) end() ([]byte, bool) { return append(w.b, '}'), w.ok }

func (w *jw) key(name string) {
	if w.comma {
		w.b = append(w.b, ',')
	}
	w.comma = true
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, '"', ':')
}

// str writes s quoted when encoding/json (without HTML escaping) writes
// it as it is: no control character, quote, backslash, invalid UTF-8,
// U+2028 or U+2029.
func (w *jw) str(name, s string) {
	w.key(name)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' {
				w.ok = false
				return
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			w.ok = false
			return
		}
		i += size
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, s...)
	w.b = append(w.b, '"')
}

func (w *jw) strOmitEmpty(name, s string) {
	if s != "" {
		w.str(name, s)
	}
}

func (w *jw) int(name string, n int64) {
	w.key(name)
	w.b = strconv.AppendInt(w.b, n, 10)
}

func (w *jw) bool(name string, v bool) {
	w.key(name)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *jw) boolPtrOmitEmpty(name string, v *bool) {
	if v != nil {
		w.bool(name, *v)
	}
}

// time writes t as time.Time.MarshalJSON does (RFC 3339 with nanoseconds),
// for the UTC times the items hold and a year it can write.
func (w *jw) time(name string, t time.Time) {
	w.key(name)
	if _, offset := t.Zone(); offset != 0 || t.Year() < 0 || t.Year() > 9999 {
		w.ok = false
		return
	}
	w.b = append(w.b, '"')
	w.b = t.AppendFormat(w.b, time.RFC3339Nano)
	w.b = append(w.b, '"')
}

func (w *jw) timeOmitZero(name string, t time.Time) {
	if !t.IsZero() {
		w.time(name, t)
	}
}

// raw writes raw JSON as encoding/json does (compacted; nil is null) when
// it is valid and compact already.
func (w *jw) raw(name string, v json.RawMessage) {
	w.key(name)
	if v == nil {
		w.b = append(w.b, "null"...)
		return
	}
	if !validCompact(v) {
		w.ok = false
		return
	}
	w.b = append(w.b, v...)
}

func (w *jw) rawOmitEmpty(name string, v json.RawMessage) {
	if len(v) > 0 {
		w.raw(name, v)
	}
}

// mapOmitEmpty takes only an empty map, which omitempty leaves out.
func (w *jw) mapOmitEmpty(m map[string]any) {
	if len(m) > 0 {
		w.ok = false
	}
}

func (w *jw) maintenanceInfo(name string, m *maintenanceInfoItem) {
	if m == nil {
		return
	}
	w.key(name)
	in := jw{b: append(w.b, '{'), ok: true}
	in.str("version", m.Version)
	in.strOmitEmpty("description", m.Description)
	w.b, w.ok = append(in.b, '}'), w.ok && in.ok
}

func (it instanceItem) appendJSON(b []byte) ([]byte, bool) {
	w := newJW(b)
	w.str("id", it.ID)
	w.str("service_id", it.ServiceID)
	w.str("plan_id", it.PlanID)
	w.strOmitEmpty("organization_guid", it.OrganizationGUID)
	w.strOmitEmpty("space_guid", it.SpaceGUID)
	w.rawOmitEmpty("parameters", it.Parameters)
	w.rawOmitEmpty("context", it.Context)
	w.maintenanceInfo("maintenance_info", it.MaintenanceInfo)
	w.strOmitEmpty("plan_digest", it.PlanDigest)
	w.strOmitEmpty("dashboard_url", it.DashboardURL)
	w.key("metadata")
	w.b = append(w.b, "{}"...)
	w.mapOmitEmpty(it.Metadata.Labels)
	w.mapOmitEmpty(it.Metadata.Attributes)
	w.str("state", it.State)
	w.strOmitEmpty("op", it.Op)
	w.strOmitEmpty("last_op", it.LastOp)
	w.int("binding_ops", int64(it.BindingOps))
	w.str("fingerprint", it.Fingerprint)
	w.int("version", it.Version)
	w.time("created_at", it.CreatedAt)
	w.time("updated_at", it.UpdatedAt)
	return w.end()
}

func (it operationItem) appendJSON(b []byte) ([]byte, bool) {
	w := newJW(b)
	w.str("id", it.ID)
	w.str("instance_id", it.InstanceID)
	w.strOmitEmpty("binding_id", it.BindingID)
	w.str("kind", it.Kind)
	w.str("state", it.State)
	w.strOmitEmpty("description", it.Description)
	w.strOmitEmpty("detail", it.Detail)
	w.str("fingerprint", it.Fingerprint)
	w.bool("async", it.Async)
	w.str("plan_id", it.PlanID)
	if t := it.Target; t != nil {
		w.key("target")
		in := jw{b: append(w.b, '{'), ok: true}
		in.strOmitEmpty("plan_id", t.PlanID)
		in.rawOmitEmpty("parameters", t.Parameters)
		in.rawOmitEmpty("context", t.Context)
		in.maintenanceInfo("maintenance_info", t.MaintenanceInfo)
		in.strOmitEmpty("plan_digest", t.PlanDigest)
		w.b, w.ok = append(in.b, '}'), w.ok && in.ok
	}
	w.int("retry_after", it.RetryAfter)
	w.boolPtrOmitEmpty("instance_usable", it.InstanceUsable)
	w.boolPtrOmitEmpty("update_repeatable", it.UpdateRepeatable)
	w.time("created_at", it.CreatedAt)
	w.time("updated_at", it.UpdatedAt)
	w.time("next_check_at", it.NextCheckAt)
	w.timeOmitZero("finished_at", it.FinishedAt)
	w.timeOmitZero("expires_at", it.ExpiresAt)
	w.timeOmitZero("outage_since", it.OutageSince)
	if it.OutageAttempts != 0 {
		w.int("outage_attempts", int64(it.OutageAttempts))
	}
	if it.OutageInBegin {
		w.bool("outage_in_begin", true)
	}
	return w.end()
}

func (it bindingItem) appendJSON(b []byte) ([]byte, bool) {
	w := newJW(b)
	w.str("instance_id", it.InstanceID)
	w.str("id", it.ID)
	w.str("service_id", it.ServiceID)
	w.str("plan_id", it.PlanID)
	w.strOmitEmpty("app_guid", it.AppGUID)
	w.rawOmitEmpty("bind_resource", it.BindResource)
	w.rawOmitEmpty("parameters", it.Parameters)
	w.rawOmitEmpty("context", it.Context)
	w.str("state", it.State)
	w.mapOmitEmpty(it.Credentials)
	if len(it.Endpoints) > 0 {
		w.ok = false
	}
	w.rawOmitEmpty("sealed", it.Sealed)
	w.strOmitEmpty("predecessor_id", it.PredecessorID)
	w.timeOmitZero("expires_at", it.ExpiresAt)
	w.timeOmitZero("renew_before", it.RenewBefore)
	w.strOmitEmpty("op", it.Op)
	w.strOmitEmpty("last_op", it.LastOp)
	w.str("fingerprint", it.Fingerprint)
	w.int("version", it.Version)
	w.time("created_at", it.CreatedAt)
	w.time("updated_at", it.UpdatedAt)
	return w.end()
}

func (it resourceItem) appendJSON(b []byte) ([]byte, bool) {
	w := newJW(b)
	w.str("instance_id", it.InstanceID)
	w.str("name", it.Name)
	w.raw("data", it.Data)
	w.time("updated_at", it.UpdatedAt)
	return w.end()
}

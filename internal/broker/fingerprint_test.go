package broker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/catalog"
)

// The fingerprint of a request says which of its fields make two requests
// "identical" (a re-sent request gets 200 or 202, a different one 409). Its
// fields are named once, in the requestFingerprint methods (service.go).
// These tests walk every field of each details type: a field must change
// the fingerprint, or be listed below with the reason it does not. A new
// field that fails here is either hashed (copy it onto the instance,
// binding or target, then into its requestFingerprint) or listed.

// fingerprintCase is one details type: how the broker fingerprints a
// request of that type, and the fields left out on purpose.
type fingerprintCase struct {
	name        string
	details     any // a zero value of the details type
	fingerprint func(details any) string
	leftOut     map[string]string // field: why it is not part of the fingerprint
	where       string            // where a new field goes, for the failure message
}

var fingerprintCases = []fingerprintCase{
	{
		name:    "provision",
		details: ProvisionDetails{},
		fingerprint: func(d any) string {
			inst := d.(ProvisionDetails).instance(&catalog.Plan{})
			// An update recomputes it from the instance: an instance's
			// fingerprint must not depend on whether it was updated.
			if again := (Target{}).Apply(inst).Fingerprint; again != inst.Fingerprint {
				return "recomputed differently by Target.Apply: " + again
			}
			return inst.Fingerprint
		},
		leftOut: map[string]string{
			"InstanceID":        "the id is the key the request is about, not an attribute",
			"Context":           "a platform may send a new context (a renamed space, say) for the same instance",
			"AcceptsIncomplete": "it is the client's ability, not the instance's attribute",
		},
		where: "hash it in Instance.requestFingerprint (service.go; a field of InstanceRequest is on the Instance already, another one is copied there in ProvisionDetails.instance, provision.go)",
	},
	{
		name:        "update",
		details:     UpdateDetails{},
		fingerprint: func(d any) string { return d.(UpdateDetails).target().requestFingerprint() },
		leftOut: map[string]string{
			"InstanceID":        "the id is the key the request is about, not an attribute",
			"ServiceID":         "it must equal the instance's service; an update cannot change it",
			"AcceptsIncomplete": "it is the client's ability, not what the update asks",
		},
		where: "copy it onto Target in UpdateDetails.target (update.go), apply it in Target.Apply and hash it in Target.requestFingerprint (service.go)",
	},
	{
		name:        "bind",
		details:     BindDetails{},
		fingerprint: func(d any) string { return d.(BindDetails).binding().Fingerprint },
		leftOut: map[string]string{
			"InstanceID":        "the ids are the keys the request is about, not attributes",
			"BindingID":         "the ids are the keys the request is about, not attributes",
			"Context":           "a platform may send a new context for the same binding",
			"AcceptsIncomplete": "it is the client's ability, not the binding's attribute",
		},
		where: "hash it in Binding.requestFingerprint (service.go; a field of BindingRequest is on the Binding already, another one is copied there in BindDetails.binding, bind.go)",
	},
}

func TestEveryRequestFieldIsInItsFingerprintOrListedAsLeftOut(t *testing.T) {
	for _, c := range fingerprintCases {
		t.Run(c.name, func(t *testing.T) {
			typ := reflect.TypeOf(c.details)
			for name := range c.leftOut {
				if _, ok := typ.FieldByName(name); !ok {
					t.Errorf("%s.%s is listed as left out of the fingerprint but is no field of it: was it renamed?", typ.Name(), name)
				}
			}
			// The fields, with those of an embedded struct (InstanceRequest,
			// BindingRequest) in its place.
			var fields []reflect.StructField
			for _, f := range reflect.VisibleFields(typ) {
				if !f.Anonymous {
					fields = append(fields, f)
				}
			}
			base := reflect.New(typ).Elem()
			for _, f := range fields {
				setField(t, typ, base.FieldByIndex(f.Index), f.Name, "a")
			}
			want := c.fingerprint(base.Interface())
			for _, f := range fields {
				other := reflect.New(typ).Elem()
				other.Set(base)
				setField(t, typ, other.FieldByIndex(f.Index), f.Name, "b")
				changed := c.fingerprint(other.Interface()) != want
				why, left := c.leftOut[f.Name]
				switch {
				case left && changed:
					t.Errorf("%s.%s is listed as left out of the %s fingerprint (%s), yet it changes it: take it off the list in fingerprint_test.go",
						typ.Name(), f.Name, c.name, why)
				case !left && !changed:
					t.Errorf("%s.%s does not change the %s fingerprint, so a request that differs only in it counts as identical: "+
						"%s, or list it in fingerprint_test.go with the reason it is left out",
						typ.Name(), f.Name, c.name, c.where)
				}
			}
		})
	}
}

// setField sets v, the field name of typ, to a value made of the field's
// name and variant, so that each field and each variant differs.
func setField(t *testing.T, typ reflect.Type, v reflect.Value, name, variant string) {
	t.Helper()
	s := name + "-" + variant
	switch v.Interface().(type) {
	case string:
		v.SetString(s)
	case bool:
		v.SetBool(variant == "a")
	case json.RawMessage:
		v.Set(reflect.ValueOf(json.RawMessage(`{"` + name + `":"` + variant + `"}`)))
	case *MaintenanceInfo:
		v.Set(reflect.ValueOf(&MaintenanceInfo{Version: s, Description: "same"}))
	default:
		t.Fatalf("%s.%s is a %s, which fingerprint_test.go cannot vary yet: add a case to setField", typ.Name(), name, v.Type())
	}
}

func TestFingerprintIgnoresKeyOrderAndSpacing(t *testing.T) {
	fp := func(params string, mi *MaintenanceInfo) string {
		return Instance{InstanceRequest: InstanceRequest{ServiceID: "s", PlanID: "p", OrganizationGUID: "o", SpaceGUID: "sp",
			Parameters: json.RawMessage(params), MaintenanceInfo: mi}}.requestFingerprint()
	}
	a := fp(`{"a":1,"b":[1,2]}`, nil)
	if a != fp(`{ "b":[1,2], "a":1 }`, nil) {
		t.Fatal("the same parameters fingerprint differently")
	}
	if a == fp(`{"a":2,"b":[1,2]}`, nil) {
		t.Fatal("other parameters fingerprint the same")
	}
	if fp("", nil) != fp(`{}`, nil) {
		t.Fatal("absent and empty parameters differ")
	}
	if fp("", &MaintenanceInfo{Version: "1.0.0"}) == fp("", nil) {
		t.Fatal("maintenance_info is not part of the fingerprint")
	}
}

// The fingerprints are stored with instances, bindings and operations: a
// change of what they hash (or of how, such as the JSON spelling of
// MaintenanceInfo) makes every re-sent request for an existing instance or
// binding a conflict. These values were computed before the fingerprints
// moved onto the domain types; a deliberate change updates them and says so.
func TestFingerprintsKeepTheirStoredValues(t *testing.T) {
	mi := &MaintenanceInfo{Version: "1.0.0", Description: "First release."}
	got := map[string]string{
		"instance": Instance{InstanceRequest: InstanceRequest{ServiceID: "svc", PlanID: "plan", OrganizationGUID: "org", SpaceGUID: "space",
			Parameters: json.RawMessage(`{"b":[1,2], "a":1}`), MaintenanceInfo: mi}}.requestFingerprint(),
		"update": Target{PlanID: "plan-2", Parameters: json.RawMessage(`{"a":1}`),
			Context: json.RawMessage(`{"platform":"cf"}`), MaintenanceInfo: mi}.requestFingerprint(),
		"bind": Binding{BindingRequest: BindingRequest{ServiceID: "svc", PlanID: "plan", AppGUID: "app", BindResource: json.RawMessage(`{"app_guid":"app"}`),
			Parameters: json.RawMessage(`{"a":1}`), PredecessorID: "pred"}}.requestFingerprint(),
	}
	want := map[string]string{
		"instance": "89679c399f85deaa9c8584c9c9c8950bdc613c6685a1b26683039c6217c0bbe4",
		"update":   "df87015d65c4a40720f71d7b1c5cfca6c0d362927516a0815cde35d1f3de9953",
		"bind":     "d8bdf9a5da242d2754a05c104b8a4ac8035939649b6c77c03b99c24c347b993c",
	}
	for kind, w := range want {
		if got[kind] != w {
			t.Errorf("the %s fingerprint changed: %s, was %s", kind, got[kind], w)
		}
	}
}

// fingerprintBefore is Fingerprint as it was written first, one Write and
// one json.Marshal per value: the fingerprints stored with every instance,
// binding and operation are its, so Fingerprint must give the same.
func fingerprintBefore(values ...any) string {
	h := sha256.New()
	for _, v := range values {
		if raw, ok := v.(json.RawMessage); ok {
			v = canonical(raw)
		}
		b, _ := json.Marshal(v)
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestFingerprintIsTheSameAsStored(t *testing.T) {
	long := strings.Repeat("a-long-value-", 60) // past the stack buffer
	cases := [][]any{
		{"deprovision"},
		{"svc", "plan", "org", "space", json.RawMessage(`{}`), ""},
		{"svc", "plan", "org", "space", json.RawMessage(nil), "1.0.0"},
		{"svc", "plan", "org", "space", json.RawMessage(`null`), "1.0.0"},
		{"svc", "plan", "org", "space", json.RawMessage(`{ }`), "1.0.0"},
		{"svc", "plan", "org", "space", json.RawMessage(`{"b":[1,2], "a":"<&>"}`), "1.0.0"},
		{"svc", "plan", "org", "space", json.RawMessage(`not json`), "1.0.0"},
		{"bind", "a \"quoted\" \\ value", "<html>&", "a<b", "a>b", "a&b", "tab\there", "new\nline", "\x7f", "é ü 日本", "\u2028", "\xff\xfe", ""},
		{"update", "plan", json.RawMessage(`{"x":1}`), json.RawMessage(`{"platform":"cf"}`), &MaintenanceInfo{Version: "2.0.0"}},
		{long, json.RawMessage(`{"k":"` + long + `"}`), nil, 3, true},
	}
	for _, c := range cases {
		if got, want := Fingerprint(c...), fingerprintBefore(c...); got != want {
			t.Errorf("Fingerprint(%q) = %s, want %s as stored", c, got, want)
		}
	}
}

// The request fingerprints append their fields without boxing them
// (appendFingerprintString, appendFingerprintRaw): the same bytes as
// Fingerprint of the same values, which is the stored one.
func TestRequestFingerprintsAreTheStoredOnes(t *testing.T) {
	long := strings.Repeat("a-long-value-", 60)
	for _, s := range []string{"", "plain", "a \"quoted\" \\ value", "<html>&", "tab\there", "é 日本", "\u2028", "\xff\xfe", long} {
		for _, raw := range []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(`null`), json.RawMessage(`{"b":[1,2], "a":"` + s + `"}`),
			json.RawMessage(`"a string"`), json.RawMessage(`not json`), json.RawMessage(`{"k":"` + long + `"}`)} {
			inst := Instance{InstanceRequest: InstanceRequest{ServiceID: s, PlanID: "plan", OrganizationGUID: s, SpaceGUID: "space",
				Parameters: raw, MaintenanceInfo: &MaintenanceInfo{Version: s}}}
			if got, want := inst.requestFingerprint(), fingerprintBefore(s, "plan", s, "space", raw, s); got != want {
				t.Errorf("instance with %q and %s: %s, want %s", s, raw, got, want)
			}
			bd := Binding{BindingRequest: BindingRequest{ServiceID: "svc", PlanID: s, AppGUID: s, BindResource: raw, Parameters: raw, PredecessorID: s}}
			if got, want := bd.requestFingerprint(), fingerprintBefore("bind", "svc", s, s, raw, raw, s); got != want {
				t.Errorf("binding with %q and %s: %s, want %s", s, raw, got, want)
			}
		}
	}
}

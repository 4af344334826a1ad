package bolt

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/jsonenc"
)

// items are storage items with every field the writer takes set, some
// with values it leaves to encoding/json, built from a few values.
func items(s, u string, raw []byte, at time.Time, n int64, flag bool) []itemJSON {
	r := json.RawMessage(raw)
	yes := flag
	mi := &maintenanceInfoItem{Version: s, Description: u}
	var labels map[string]any
	if flag {
		labels = map[string]any{}
	} else {
		labels = map[string]any{s: u}
	}
	return []itemJSON{
		instanceItem{ID: s, ServiceID: u, PlanID: s, OrganizationGUID: u, SpaceGUID: s, Parameters: r, Context: r,
			MaintenanceInfo: mi, PlanDigest: u, DashboardURL: s, Metadata: metadataItem{Labels: labels}, State: u, Op: s,
			LastOp: u, BindingOps: int(n), Fingerprint: s, Version: n, CreatedAt: at, UpdatedAt: at},
		instanceItem{ID: s, Metadata: metadataItem{Attributes: labels}},
		operationItem{ID: s, InstanceID: u, BindingID: s, Kind: u, State: s, Description: u, Detail: s, Fingerprint: u,
			Async: flag, PlanID: s, Target: &targetItem{PlanID: u, Parameters: r, Context: r, MaintenanceInfo: mi, PlanDigest: s},
			RetryAfter: n, InstanceUsable: &yes, UpdateRepeatable: &yes, CreatedAt: at, UpdatedAt: at, NextCheckAt: at,
			FinishedAt: at, ExpiresAt: at, OutageSince: at, OutageAttempts: int(n), OutageInBegin: flag},
		operationItem{ID: s, Target: &targetItem{}},
		bindingItem{InstanceID: s, ID: u, ServiceID: s, PlanID: u, AppGUID: s, BindResource: r, Parameters: r, Context: r,
			State: u, Credentials: labels, Sealed: r, PredecessorID: s, ExpiresAt: at, RenewBefore: at, Op: u, LastOp: s,
			Fingerprint: u, Version: n, CreatedAt: at, UpdatedAt: at},
		bindingItem{ID: s, Endpoints: []endpointItem{{Host: u, Ports: []string{s}}}},
		resourceItem{InstanceID: s, Name: u, Data: r, UpdatedAt: at},
		resourceItem{},
	}
}

// itemCase is a case of the item encoders' tests: the items made of its
// values (items), with and without the flag, of which taken are written by
// the encoder under test rather than left to another.
type itemCase struct {
	name  string
	s, u  string
	raw   string
	at    time.Time
	taken int
}

// runItemCases checks each case's items with check, which says whether
// the encoder under test took the item, and counts them (how: "written
// here", in the message).
func runItemCases(t *testing.T, cases []itemCase, check func(*testing.T, itemJSON) bool, how string) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			taken := 0
			for _, flag := range []bool{true, false} {
				for _, it := range items(c.s, c.u, []byte(c.raw), c.at, 42, flag) {
					if check(t, it) {
						taken++
					}
				}
			}
			if taken != c.taken {
				t.Errorf("%d items %s, want %d", taken, how, c.taken)
			}
		})
	}
}

// checkItemJSON fails t when an item's JSON is not jsonenc.Marshal's.
func checkItemJSON(t *testing.T, it itemJSON) (taken bool) {
	t.Helper()
	want, err := jsonenc.Marshal(it)
	got, ok := it.appendJSON(nil)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("%T: written as %s, where jsonenc.Marshal fails: %v", it, got, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%T:\n got %s\nwant %s", it, got, want)
	}
	return true
}

func TestItemJSONIsJSONEncs(t *testing.T) {
	at := time.Date(2026, 11, 28, 17, 0, 0, 120000000, time.UTC)
	cases := []itemCase{
		// 11 of the 16 items have no map or endpoint.
		{"plain values are written here", "sync-1", "a <b> & c é", `{"a":[1,2.5e3,"x y"],"b":null}`, at, 11},
		// An empty raw value is left out, but for a record's data, which
		// encoding/json refuses.
		{"the zero time and empty raw values too", "x", "", "", time.Time{}.UTC(), 9},
		// 5 of the 11 have no raw value, and no time.
		{"raw JSON with spaces is left to encoding/json", "x", "y", `{"a": 1}`, at, 5},
		{"raw JSON whose string does not end too", "x", "y", `"a \"`, at, 5},
		{"raw JSON with spaces in its strings only is written here", "x", "y", `{"a":"b \" c","d":["e\\","f g"]}`, at, 11},
		{"invalid raw JSON is left to encoding/json", "x", "y", `{"a":`, at, 5},
		// 2 have no string either.
		{"a string with a quote is left to encoding/json", `a"b`, "y", `{}`, at, 2},
		{"a control character too", "a\nb", "y", `{}`, at, 2},
		{"invalid UTF-8 too", "a\xffb", "y", `{}`, at, 2},
		{"U+2028 too", "a\u2028b", "y", `{}`, at, 2},
		{"a time outside UTC too", "x", "y", `{}`, at.In(time.FixedZone("x", 3600)), 5},
		{"a year past 9999 too", "x", "y", `{}`, at.AddDate(9000, 0, 0), 5},
	}
	runItemCases(t, cases, checkItemJSON, "written here")
}

func FuzzItemJSON(f *testing.F) {
	f.Add("sync-1", "a <b> & c", []byte(`{"a":[1,2]}`), int64(1764349200), int64(120000000), int64(3), true)
	f.Add("a\"b", "\u2028", []byte(` {"a": 1}`), int64(-62135596800), int64(0), int64(-1), false)
	f.Add("x", "y", []byte(nil), int64(253402300800), int64(1), int64(0), true)
	f.Fuzz(func(t *testing.T, s, u string, raw []byte, sec, nsec, n int64, flag bool) {
		for _, at := range []time.Time{time.Unix(sec, nsec).UTC(), time.Unix(sec, nsec)} {
			for _, it := range items(s, u, raw, at, n, flag) {
				checkItemJSON(t, it)
			}
		}
	})
}

// BenchmarkItemJSON encodes a synchronous provision's three items (the
// instance, its operation, its record) by field and through encoding/json.
func BenchmarkItemJSON(b *testing.B) {
	at := time.Date(2026, 11, 28, 17, 0, 0, 123456789, time.UTC)
	usable := true
	provision := []itemJSON{
		instanceItem{ID: "sync-1", ServiceID: "4618c717-e0da-4a48-8d9c-b1f789bf2f5e", PlanID: "e3daf424-4de7-4619-b0ff-5de8cd16cc5e",
			OrganizationGUID: "o", SpaceGUID: "s", Parameters: json.RawMessage(`{}`), MaintenanceInfo: &maintenanceInfoItem{Version: "1.0.0"},
			PlanDigest: "sha256:61f69c552cb7424d92f8c59d", State: "provisioned", LastOp: "01a2233e-fda7-717c-bbb2-c0841a402366",
			Fingerprint: "61f69c552cb7424d92f8c59d61f69c552cb7424d92f8c59d", Version: 1, CreatedAt: at, UpdatedAt: at},
		operationItem{ID: "01a2233e-fda7-717c-bbb2-c0841a402366", InstanceID: "sync-1", Kind: "provision", State: "succeeded",
			Description: "The service instance was provisioned.", Fingerprint: "61f69c552cb7424d92f8c59d61f69c552cb7424d92f8c59d",
			PlanID: "e3daf424-4de7-4619-b0ff-5de8cd16cc5e", InstanceUsable: &usable, CreatedAt: at, UpdatedAt: at, NextCheckAt: at, FinishedAt: at},
		resourceItem{InstanceID: "sync-1", Name: "instance", UpdatedAt: at,
			Data: json.RawMessage(`{"v":1,"alg":"A256GCM","kid":"k20261128T174100.413585217Z-bad1c8bc","ctx":"AgT8yRt0AUA=","nonce":"nvpjMeZBpuvlUgMl","ct":"U8VkWy1zNFrpj24lxGvyfvnuG4vEvU8VkWy1zNFrpj24lxGvyfvnuG4vEv"}`)},
	}
	b.Run("by field", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, it := range provision {
				if _, ok := it.appendJSON(make([]byte, 0, itemJSONSize)); !ok {
					b.Fatalf("%T left to encoding/json", it)
				}
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, it := range provision {
				if _, err := jsonenc.Marshal(it); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

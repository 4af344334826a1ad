package bolt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/jsonenc"
	"github.com/serverless-osb/broker/internal/store/itemtest"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

// storedItems are the items of itemtest.Cases as the store wrote them up to
// commit d3c8482, where an item was the domain struct's JSON, at their keys
// of layout 1 (layout.go). The data directories of `make run` hold items in
// this form: the store must read them once it has moved them to its
// layout, and write the same values (at the key moved, when it moved).
var storedItems = []storedItem{
	{"instance with every field", "i#i-1\x00instance", // moved to i#i-1\x00p#instance
		`{"id":"i-1","service_id":"svc-1","plan_id":"plan-1","organization_guid":"org-1","space_guid":"space-1","parameters":{"z":1,"a":[1,2.50],"big":123456789012345678901234567890123456789012,"html":"<a&b>"},"context":{"platform":"cloudfoundry","z":{"y":null}},"maintenance_info":{"version":"1.2.0","description":"first"},"plan_digest":"sha256:d1","dashboard_url":"https://dashboard.example.com/i-1?a=1&b=<2>","metadata":{"labels":{"empty":"","none":null,"team":"blue"},"attributes":{"count":3,"list":["a",2,false],"nested":{"k":"v"},"on":true,"weight":1.5}},"state":"updating","op":"op-2","last_op":"op-2","binding_ops":2,"fingerprint":"fp-i-1","version":7,"created_at":"2025-03-01T12:00:00.123456789Z","updated_at":"2025-03-01T12:01:00.123456789Z"}`},
	{"instance with few fields", "i#i-2\x00instance", // moved to i#i-2\x00p#instance
		`{"id":"i-2","service_id":"","plan_id":"","metadata":{},"state":"ready","binding_ops":0,"fingerprint":"","version":0,"created_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z"}`},
	{"binding with every field", "i#i-1\x00b#b-1",
		`{"instance_id":"i-1","id":"b-1","service_id":"svc-1","plan_id":"plan-1","app_guid":"app-1","bind_resource":{"app_guid":"app-1","route":"r"},"parameters":{"role":"reader","n":10},"context":{"platform":"cloudfoundry"},"state":"ready","credentials":{"extra":{"x":null},"hosts":["a","b"],"port":5432,"tls":true,"user":"u"},"endpoints":[{"host":"db.example.com","ports":["5432","5433"],"protocol":"tcp"},{"host":"other.example.com","ports":[]},{"host":"third.example.com","ports":null}],"sealed":{"alg":"A256GCM","ct":"Y3Q=","ctx":"Y3R4","kec":{"instance_id":"i-1"},"kid":"k-1","nonce":"bm9uY2U=","v":1},"predecessor_id":"b-0","expires_at":"2025-03-02T12:00:00.123456789Z","renew_before":"2025-03-02T00:00:00.123456789Z","op":"op-3","last_op":"op-3","fingerprint":"fp-b-1","version":3,"created_at":"2025-03-01T12:00:00.123456789Z","updated_at":"2025-03-01T12:00:01.123456789Z"}`},
	{"binding with few fields", "i#i-1\x00b#b-2",
		`{"instance_id":"i-1","id":"b-2","service_id":"","plan_id":"","state":"creating","fingerprint":"","version":0,"created_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z"}`},
	{"operation in progress with every field", "i#i-1\x00op#op-2",
		`{"id":"op-2","instance_id":"i-1","binding_id":"b-1","kind":"update","state":"in progress","description":"updating <plan>","fingerprint":"fp-op-2","async":true,"plan_id":"plan-1","target":{"plan_id":"plan-2","parameters":{"z":1,"a":2,"html":"<&>"},"context":{"platform":"kubernetes"},"maintenance_info":{"version":"2.0.0"},"plan_digest":"sha256:d2"},"retry_after":5000000000,"instance_usable":false,"update_repeatable":true,"created_at":"2025-03-01T12:00:00.123456789Z","updated_at":"2025-03-01T12:00:01.123456789Z","next_check_at":"2025-03-01T12:00:30.123456789Z"}`},
	{"finished operation", "i#i-1\x00op#op-1",
		`{"id":"op-1","instance_id":"i-1","kind":"provision","state":"succeeded","fingerprint":"fp-op-1","async":false,"plan_id":"plan-1","retry_after":0,"created_at":"2025-03-01T12:00:00.123456789Z","updated_at":"2025-03-01T12:01:00.123456789Z","next_check_at":"2025-03-01T12:01:00.123456789Z","finished_at":"2025-03-01T12:01:00.123456789Z","expires_at":"2025-03-08T12:01:00.123456789Z"}`},
	{"finished operation without expiry", "i#i-1\x00op#op-0",
		`{"id":"op-0","instance_id":"i-1","kind":"bind","state":"failed","fingerprint":"","async":false,"plan_id":"","retry_after":0,"created_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z","next_check_at":"0001-01-01T00:00:00Z","finished_at":"2025-03-01T12:00:00.123456789Z"}`},
	{"failed operation with an operator's detail", "i#i-1\x00op#op-3",
		`{"id":"op-3","instance_id":"i-1","kind":"provision","state":"failed","description":"The S3 Bucket \"Bucket\" could not be created: the broker's service role lacks a permission.","detail":"Bucket (AWS::S3::Bucket) CREATE_FAILED: User: arn:aws:sts::123456789012:assumed-role/cfn is not authorized to perform: s3:CreateBucket <&>","fingerprint":"fp-op-3","async":true,"plan_id":"plan-1","retry_after":0,"created_at":"2025-03-01T12:00:00.123456789Z","updated_at":"2025-03-01T12:01:00.123456789Z","next_check_at":"2025-03-01T12:01:00.123456789Z","finished_at":"2025-03-01T12:01:00.123456789Z","expires_at":"2025-03-08T12:01:00.123456789Z"}`},
	{"resource", "i#i-1\x00r#db",
		`{"instance_id":"i-1","name":"db","data":{"b":1,"a":"<x>"},"updated_at":"2025-03-01T12:00:00.123456789Z"}`},
	{"resource without data", "i#i-1\x00r#empty",
		`{"instance_id":"i-1","name":"empty","data":null,"updated_at":"0001-01-01T00:00:00Z"}`},
	{"detached resource", "detached\x00d-1",
		`{"id":"d-1","instance_id":"i-1","name":"old","data":[3,2,1],"plan_id":"plan-1","operation_id":"op-2","reason":"update failed","state":"failed","attempts":2,"failure":"gave up","created_at":"2025-03-01T12:00:00.123456789Z","updated_at":"2025-03-01T13:00:00.123456789Z"}`},
	{"detached resource with a cleanup failure's detail", "detached\x00d-2",
		`{"id":"d-2","instance_id":"i-1","name":"stack","data":{"stack":"osb-i-1"},"plan_id":"plan-1","operation_id":"op-3","reason":"provision failed","state":"failed","attempts":3,"failure":"The stack osb-i-1 could not be deleted (tried 3 times).","failure_detail":"Bucket (AWS::S3::Bucket): The bucket you tried to delete is not empty <&>","created_at":"2025-03-01T12:00:00.123456789Z","updated_at":"2025-03-01T13:00:00.123456789Z"}`},
}

type storedItem struct{ name, key, value string }

// movedKeys are the keys of layout 1 that layout 2 moved.
var movedKeys = map[string]string{"i#i-1\x00instance": "i#i-1\x00p#instance", "i#i-2\x00instance": "i#i-2\x00p#instance"}

func TestStoredItems(t *testing.T) {
	// A file of layout 1, written as bbolt.Open and the store's buckets
	// left it, then opened by the store.
	path := filepath.Join(t.TempDir(), "broker.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		items, err := tx.CreateBucket([]byte(itemsBucket))
		if err != nil {
			return err
		}
		for _, item := range storedItems {
			if err := items.Put([]byte(item.key), []byte(item.value)); err != nil {
				return err
			}
		}
		inProgress, err := tx.CreateBucket([]byte(layout1InProgress))
		if err != nil {
			return err
		}
		return inProgress.Put([]byte("i#i-1\x00op#op-2"), nil)
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	old, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close() })
	for _, c := range itemtest.Cases() {
		i := slices.IndexFunc(storedItems, func(item storedItem) bool { return item.name == c.Name })
		if i < 0 {
			t.Fatalf("no stored item for %q", c.Name)
		}
		stored := storedItems[i]
		t.Run(c.Name+" is read from the item stored before", func(t *testing.T) {
			got, err := readCase(t.Context(), old, c.Value)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range itemtest.Diff(got, c.Value) {
				t.Error(d)
			}
		})
		t.Run(c.Name+" is written as before", func(t *testing.T) {
			s := openStore(t)
			key, err := writeCase(t.Context(), s, c.Value)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			err = s.db.View(func(tx *bbolt.Tx) error {
				got = string(tx.Root().Get(key))
				return nil
			})
			want := cmp.Or(movedKeys[stored.key], stored.key)
			if len(got) > 0 && got[0] == binMark {
				// Operations, instances, bindings and records are written
				// in binary now (itembin.go): the same item as the JSON
				// stored before.
				if !sameItem(key, []byte(got), []byte(stored.value)) {
					t.Errorf("%q: %x reads other than %s", key, got, stored.value)
				}
				got = stored.value
			}
			// The key's layout 4 form (keys.go), shown as layout 3 wrote it.
			if err != nil || showKey(key) != strconv.Quote(want) || got != stored.value {
				t.Errorf("got %s: %s (%v)\nwant %q: %s", showKey(key), got, err, want, stored.value)
			}
		})
	}
	t.Run("the operation in progress is listed", func(t *testing.T) {
		ops, err := old.ListInProgress(t.Context())
		if err != nil || len(ops) != 1 || ops[0].ID != "op-2" {
			t.Errorf("got %+v, %v; want op-2", ops, err)
		}
	})
}

func openStore(t *testing.T) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "broker.db"))
}

// openAt opens the file at path until the test ends.
func openAt(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// readCase reads the item of like's type and ids through the port.
func readCase(ctx context.Context, s *Store, like any) (any, error) {
	switch v := like.(type) {
	case broker.Instance:
		return s.GetInstance(ctx, v.ID)
	case broker.Binding:
		return s.GetBinding(ctx, v.InstanceID, v.ID)
	case broker.Operation:
		return s.GetOperation(ctx, v.InstanceID, v.ID)
	case broker.Resource:
		return storetest.Record(ctx, s, v.InstanceID, v.Name)
	case broker.Detached:
		return s.GetDetached(ctx, v.ID)
	}
	return nil, fmt.Errorf("no item for %T", like)
}

// writeCase writes v as the store's transactions do, and returns its key.
func writeCase(ctx context.Context, s *Store, v any) (key []byte, err error) {
	err = s.update(ctx, func(t tx) error {
		switch v := v.(type) {
		case broker.Instance:
			key = instanceKey(v.ID)
			return t.putInstance(v)
		case broker.Binding:
			if err := t.putBinding(v); err != nil {
				return err
			}
			slot, _ := t.bindingSlot(v.InstanceID, v.ID)
			key = bindingKey(v.InstanceID, slot, v.ID)
			return nil
		case broker.Operation:
			key = operationKey(v.InstanceID, v.ID)
			return t.putOperation(v)
		case broker.Resource:
			if err := t.putResource(v); err != nil {
				return err
			}
			key, _ = t.resourceKey(v.InstanceID, v.Name, false)
			return nil
		case broker.Detached:
			key = detachedKey(v.ID)
			return t.putDetached(v)
		}
		return fmt.Errorf("no item for %T", v)
	})
	return key, err
}

// TestFieldNames is the list of every name the storage types write:
// renaming a field of the domain changes nothing here, and renaming one
// here is a change of the file's format, which items already stored do not
// follow.
func TestFieldNames(t *testing.T) {
	golden := []struct {
		item any
		want []string
	}{
		{instanceItem{}, []string{"id", "service_id", "plan_id", "organization_guid", "space_guid", "parameters", "context",
			"maintenance_info", "maintenance_info.version", "maintenance_info.description", "plan_digest", "dashboard_url",
			"metadata", "metadata.labels", "metadata.attributes", "state", "op", "last_op", "binding_ops",
			"fingerprint", "version", "created_at", "updated_at"}},
		{bindingItem{}, []string{"instance_id", "id", "service_id", "plan_id", "app_guid", "bind_resource", "parameters",
			"context", "state", "credentials", "endpoints", "endpoints.host", "endpoints.ports", "endpoints.protocol",
			"sealed", "predecessor_id", "expires_at", "renew_before", "op", "last_op", "fingerprint", "version",
			"created_at", "updated_at"}},
		{operationItem{}, []string{"id", "instance_id", "binding_id", "kind", "state", "description", "detail", "fingerprint", "async",
			"plan_id", "target", "target.plan_id", "target.parameters", "target.context", "target.maintenance_info",
			"target.maintenance_info.version", "target.maintenance_info.description", "target.plan_digest", "retry_after", "instance_usable",
			"update_repeatable", "created_at", "updated_at", "next_check_at", "finished_at", "expires_at",
			"outage_since", "outage_attempts", "outage_in_begin"}},
		{resourceItem{}, []string{"instance_id", "name", "data", "updated_at"}},
		{detachedItem{}, []string{"id", "instance_id", "name", "data", "plan_id", "operation_id", "reason", "state",
			"attempts", "failure", "failure_detail", "created_at", "updated_at",
			"outage_since", "outage_attempts", "outage_reason", "next_try_at"}},
		{sealingItem{}, []string{"sealed_only", "key_id", "since", "sensitive_plans"}},
	}
	for _, g := range golden {
		t.Run(fmt.Sprintf("%T has the fields it always had", g.item), func(t *testing.T) {
			if got := itemtest.Names(g.item, "json"); !slices.Equal(got, g.want) {
				t.Errorf("got  %q\nwant %q", got, g.want)
			}
		})
		t.Run(fmt.Sprintf("%T holds no type of the domain", g.item), func(t *testing.T) {
			if got := itemtest.DomainFields(g.item); len(got) > 0 {
				t.Errorf("fields of domain types: %q", got)
			}
		})
	}
}

// TestSealingModeItem pins the sealing mode's item, which came after
// d3c8482: key "broker\x00sealing", written and read alike.
func TestSealingModeItem(t *testing.T) {
	mode := broker.SealingMode{SealedOnly: true, KeyID: "k20260101T000000.000000000Z-1a2b3c4d",
		Since: time.Date(2026, time.January, 2, 3, 4, 5, 6, time.UTC), SensitivePlans: []string{"plan-1", "plan-2"}}
	const want = `{"sealed_only":true,"key_id":"k20260101T000000.000000000Z-1a2b3c4d","since":"2026-01-02T03:04:05.000000006Z","sensitive_plans":["plan-1","plan-2"]}`
	if string(sealingKey) != "broker\x00sealing" {
		t.Errorf("key %q", sealingKey)
	}
	got, err := jsonenc.Marshal(newSealingItem(mode))
	if err != nil || string(got) != want {
		t.Errorf("written as %s %v\nwant %s", got, err, want)
	}
	back, err := decode(sealingKey, []byte(want), sealingItem.mode)
	if err != nil || !reflect.DeepEqual(back, mode) {
		t.Errorf("read back %+v %v, want %+v", back, err, mode)
	}
	// The item as written before sensitive_plans reads as no plan.
	const first = `{"sealed_only":true,"key_id":"k-1","since":"2026-01-02T03:04:05.000000006Z"}`
	back, err = decode(sealingKey, []byte(first), sealingItem.mode)
	if err != nil || !back.SealedOnly || back.SensitivePlans != nil {
		t.Errorf("the first format read back %+v %v", back, err)
	}
}

// sameItem reports whether a and b, the values at key, read alike.
func sameItem(key, a, b []byte) bool {
	sk, _ := skOf(key)
	var isBinding, record bool
	if len(sk) > 0 && sk[0] == skOperation {
		_, _, record, isBinding, _ = slotSK(sk[1:])
	}
	switch {
	case isOperationKey(key):
		return readAlike(key, a, b, operationItem.operation)
	case isInstanceKey(key):
		return readAlike(key, a, b, instanceItem.instance)
	case isBinding && !record:
		return readAlike(key, a, b, bindingItem.binding)
	default:
		return readAlike(key, a, b, resourceItem.resource)
	}
}

func readAlike[I, D any](key, a, b []byte, domain func(I) D) bool {
	x, err1 := decode(key, a, domain)
	y, err2 := decode(key, b, domain)
	return err1 == nil && err2 == nil && reflect.DeepEqual(x, y)
}

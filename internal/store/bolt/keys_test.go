package bolt

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// keyIDs are ids of every form: UUIDs in their canonical lowercase form
// (16 bytes in a key), and others kept as text: uppercase and braced
// UUIDs, UUID-shaped text that is not hex, ids of every length.
var keyIDs = []string{
	"0e4bc3f0-6f2a-4c1e-9d3b-7a1f2e3d4c5b",
	"00000000-0000-0000-0000-000000000000",
	"ffffffff-ffff-ffff-ffff-ffffffffffff",
	"01936f7e-0000-7000-8000-000000000001",
	"0E4BC3F0-6F2A-4C1E-9D3B-7A1F2E3D4C5B",
	"{0e4bc3f0-6f2a-4c1e-9d3b-7a1f2e3d4c5b}",
	"0e4bc3f0-6f2a-4c1e-9d3b-7a1f2e3d4c5g",
	"0e4bc3f06f2a4c1e9d3b7a1f2e3d4c5b",
	"0e4bc3f0-6f2a-4c1e-9d3b-7a1f2e3d4c5",
	"0e4bc3f0-6f2a-4c1e-9d3b-7a1f2e3d4c5b0",
	"0e4bc3f0x6f2a-4c1e-9d3b-7a1f2e3d4c5b",
	"i-1", "a", "é-ünïcode-☃", "op$1", "b#x", strings.Repeat("z", 255),
}

func TestKeyIDsReadBackAsWritten(t *testing.T) {
	for _, id := range keyIDs {
		k := appendID(nil, id)
		if uuidLen := 1 + 16; (len(k) == uuidLen) != (id == strings.ToLower(id) && len(id) == 36 && !strings.ContainsAny(id, "gx")) {
			t.Errorf("%q: %d bytes in a key", id, len(k))
		}
		got, rest, ok := cutID(append(k, "tail"...))
		if !ok || got != id || string(rest) != "tail" {
			t.Errorf("%q: read back %q, rest %q, %v", id, got, rest, ok)
		}
		if rest, ok := skipID(append(k, "tail"...)); !ok || string(rest) != "tail" {
			t.Errorf("%q: skipped to %q, %v", id, rest, ok)
		}
	}
	for _, bad := range [][]byte{nil, {idUUID, 1, 2}, {idText, 'a'}, {'x'}} {
		if _, _, ok := cutID(bad); ok {
			t.Errorf("cutID(%q) read an id", bad)
		}
		if _, ok := skipID(bad); ok {
			t.Errorf("skipID(%q) read an id", bad)
		}
	}
}

// TestKeysKeepEachPartitionApart: no instance's partition is a prefix of
// another's, and every key of an instance reads back its instance's id and
// kind.
func TestKeysKeepEachPartitionApart(t *testing.T) {
	for _, a := range keyIDs {
		for _, b := range keyIDs {
			if a != b && bytes.HasPrefix(pk(b), pk(a)) {
				t.Errorf("the partition of %q is a prefix of %q's", a, b)
			}
		}
		slot, _ := uuidBytes(newUUID())
		binding := bindingKey(a, slot, a)
		for _, k := range [][]byte{instanceKey(a), binding, operationKey(a, a), inProgressKey(a, a),
			recordKey(a, "db"), append(binding, skRecordOf)} {
			if id, _, ok := splitKey(k); !ok || id != a {
				t.Errorf("%q: key %s reads instance %q, %v", a, showKey(k), id, ok)
			}
			if c := bytes.Compare(k, partitionEnd(a)); c >= 0 || !bytes.HasPrefix(k, pk(a)) {
				t.Errorf("%q: key %s outside its partition", a, showKey(k))
			}
		}
		if !isOperationKey(operationKey(a, a)) || isOperationKey(inProgressKey(a, a)) || isOperationKey(instanceKey(a)) ||
			isOperationKey(binding) || isOperationKey(append(binding, skRecordOf)) {
			t.Errorf("%q: isOperationKey", a)
		}
		if !isInstanceKey(instanceKey(a)) || isInstanceKey(operationKey(a, a)) {
			t.Errorf("%q: isInstanceKey", a)
		}
		if got := inProgressKeyOf(operationKey(a, a)); !bytes.Equal(got, inProgressKey(a, a)) {
			t.Errorf("%q: inProgressKeyOf %s, want %s", a, showKey(got), showKey(inProgressKey(a, a)))
		}
		sk, _ := skOf(append(binding, skRecordOf))
		if got, id, record, isBinding, ok := slotSK(sk[1:]); !ok || !isBinding || !record || id != a || got != slot {
			t.Errorf("%q: the binding's record's SK reads %q, %v, %v, %v", a, id, record, isBinding, ok)
		}
		sk, _ = skOf(binding)
		if got, id, record, isBinding, ok := slotSK(sk[1:]); !ok || !isBinding || record || id != a || got != slot {
			t.Errorf("%q: the binding's SK reads %q, %v, %v, %v", a, id, record, isBinding, ok)
		}
		sk, _ = skOf(operationKey(a, a))
		if _, _, _, isBinding, ok := slotSK(sk[1:]); !ok || isBinding {
			t.Errorf("%q: the operation's SK reads as a binding's, %v", a, ok)
		}
	}
}

// TestKeysSortAnInstancesItems: the operations (in the order of their ids:
// the broker's UUIDv7s, oldest first), and among them the bindings, each at
// its slot (a UUIDv7 made when it is first written) with its record beside
// it, then the in-progress keys, the instance, its records.
func TestKeysSortAnInstancesItems(t *testing.T) {
	inst := "0e4bc3f0-6f2a-4c1e-9d3b-7a1f2e3d4c5b"
	var ops []string
	for range 50 {
		ops = append(ops, newUUID())
	}
	uuids := slices.Clone(ops)
	slices.Sort(uuids)
	// Two bindings made just after operations 10 and 30 were.
	slot1, slot2 := uuidAfter(uuids[10]), uuidAfter(uuids[30])
	var want [][]byte
	for i, op := range uuids {
		want = append(want, operationKey(inst, op))
		switch i {
		case 10:
			b := bindingKey(inst, slot1, "5a7d2c1e-0b3f-4e6a-8c9d-1f2e3a4b5c6d")
			want = append(want, b, append(b, skRecordOf))
		case 30:
			b := bindingKey(inst, slot2, "b-2")
			want = append(want, b, append(b, skRecordOf))
		}
	}
	want = append(want, operationKey(inst, "detach-d-1"))
	want = append(want, inProgressKey(inst, uuids[3]), inProgressKey(inst, uuids[7]), instanceKey(inst),
		recordKey(inst, "a"), recordKey(inst, "zone"))
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortFunc(got, bytes.Compare)
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("key %d: got %s, want %s", i, showKey(got[i]), showKey(want[i]))
		}
	}
}

// uuidAfter is the UUID that sorts just after u: u's bytes plus one.
func uuidAfter(u string) [16]byte {
	b, _ := uuidBytes(u)
	for i := 15; i >= 0; i-- {
		if b[i]++; b[i] != 0 {
			break
		}
	}
	return b
}

// TestUUIDKeysSortAsTheirText: the partitions of instances whose ids are
// UUIDs come in the order of the ids' text, as ListInstances pages them.
func TestUUIDKeysSortAsTheirText(t *testing.T) {
	var ids []string
	for range 200 {
		ids = append(ids, newUUID())
	}
	byKey := slices.Clone(ids)
	slices.SortFunc(byKey, func(a, b string) int { return bytes.Compare(pk(a), pk(b)) })
	slices.Sort(ids)
	if !slices.Equal(byKey, ids) {
		t.Error("partitions sort other than their ids")
	}
}

func TestShowKey(t *testing.T) {
	inst := "0e4bc3f0-6f2a-4c1e-9d3b-7a1f2e3d4c5b"
	for k, want := range map[string]string{
		string(instanceKey(inst)):                                 `"i#` + inst + `\x00p#instance"`,
		string(operationKey("i-1", "op-1")):                       `"i#i-1\x00op#op-1"`,
		string(inProgressKey("i-1", inst)):                        `"i#i-1\x00op$` + inst + `"`,
		string(bindingKey(inst, [16]byte{1}, "b-1")):              `"i#` + inst + `\x00b#b-1"`,
		string(append(bindingKey(inst, [16]byte{1}, "b-1"), 'r')): `"i#` + inst + `\x00b#b-1\x00r"`,
		string(recordKey("i-1", "db")):                            `"i#i-1\x00r#db"`,
		"detached\x00d-1":                                         `"detached\x00d-1"`,
		string(append(pk("i-1"), 'z')):                            fmt.Sprintf("%q", string(append(pk("i-1"), 'z'))),
		string(append(operationKey("i-1", "o"), 1)):               fmt.Sprintf("%q", string(append(operationKey("i-1", "o"), 1))),
	} {
		if got := showKey([]byte(k)); got != want {
			t.Errorf("showKey(%q) = %s, want %s", k, got, want)
		}
	}
}

func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return uuidText(u[:])
}

// FuzzKeyID: any id (ids hold no NUL) reads back from its key form, and its
// partition is no prefix of another id's.
func FuzzKeyID(f *testing.F) {
	for _, id := range keyIDs {
		f.Add(id, "i-1")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.IndexByte(a, 0) >= 0 || strings.IndexByte(b, 0) >= 0 {
			return
		}
		got, rest, ok := cutID(appendID(nil, a))
		if !ok || got != a || len(rest) != 0 {
			t.Fatalf("%q read back as %q, rest %q, %v", a, got, rest, ok)
		}
		if a != b && bytes.HasPrefix(pk(b), pk(a)) {
			t.Fatalf("the partition of %q is a prefix of %q's", a, b)
		}
		if c := compareIDs(a, b); c != bytes.Compare(appendID(nil, a), appendID(nil, b)) {
			t.Fatalf("compareIDs(%q, %q) = %d, their keys compare otherwise", a, b, c)
		}
	})
}

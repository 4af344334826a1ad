package bolt

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestIDTableAgreesWithAMap holds the table to a map over random sets and
// deletes, with the real hash and with hashes that collide often (the
// first byte of the id only: many ids then live in other, and ids move
// between the two as the holders of their hash go and come back).
func TestIDTableAgreesWithAMap(t *testing.T) {
	for name, hash := range map[string]func(string) uint64{
		"maphash":   idHash,
		"colliding": func(id string) uint64 { return uint64(id[0]) },
	} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			tab := newIDTable[uint64]()
			tab.hash = hash
			want := map[string]uint64{}
			ids := make([]string, 300)
			for i := range ids {
				ids[i] = fmt.Sprintf("%c-%d", 'a'+rng.IntN(4), i)
			}
			for step := range 20000 {
				id := ids[rng.IntN(len(ids))]
				switch rng.IntN(3) {
				case 0, 1:
					v := rng.Uint64()
					tab.set(id, v)
					want[id] = v
				case 2:
					tab.delete(id)
					delete(want, id)
				}
				if tab.len() != len(want) {
					t.Fatalf("step %d: len %d, want %d", step, tab.len(), len(want))
				}
				probe := ids[rng.IntN(len(ids))]
				got, ok := tab.get(probe)
				if w, wok := want[probe]; ok != wok || got != w {
					t.Fatalf("step %d: get(%q) = %d, %v; want %d, %v", step, probe, got, ok, w, wok)
				}
			}
			all := map[string]uint64{}
			tab.each(func(id []byte, v uint64) {
				if _, dup := all[string(id)]; dup {
					t.Fatalf("each gave %q twice", id)
				}
				all[string(id)] = v
			})
			if !maps.Equal(all, want) {
				t.Fatalf("each gave %d ids, want %d", len(all), len(want))
			}
			if name == "colliding" && len(tab.other) == 0 {
				t.Fatal("no id went to other: the collisions were not exercised")
			}
		})
	}
}

// TestIDTableGivesBackTheBytesOfDeletedIDs: ids deleted do not keep their
// bytes for ever (compact), and an empty table holds none.
func TestIDTableGivesBackTheBytesOfDeletedIDs(t *testing.T) {
	tab := newIDTable[struct{}]()
	for i := range 10000 {
		tab.set(fmt.Sprintf("instance-%05d", i), struct{}{})
	}
	full := len(tab.ids)
	for i := range 9000 {
		tab.delete(fmt.Sprintf("instance-%05d", i))
	}
	if len(tab.ids) > full/4 {
		t.Fatalf("%d bytes of ids kept for 1,000 ids, of %d for 10,000", len(tab.ids), full)
	}
	for i := 9000; i < 10000; i++ {
		if _, ok := tab.get(fmt.Sprintf("instance-%05d", i)); !ok {
			t.Fatalf("instance-%05d lost in compaction", i)
		}
	}
	for i := 9000; i < 10000; i++ {
		tab.delete(fmt.Sprintf("instance-%05d", i))
	}
	if tab.len() != 0 || tab.ids != nil {
		t.Fatalf("empty table holds %d ids and %d bytes", tab.len(), len(tab.ids))
	}
}

// TestTheIndexesEntriesHoldNoPointers: the point of idTable is that the
// collector has nothing to scan in an entry; a field that holds a pointer
// (a string, a slice) in a value type would silently undo that.
func TestTheIndexesEntriesHoldNoPointers(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[idEntry[uint32]](),      // plans
		reflect.TypeFor[idEntry[struct{}]](),    // each plan's instances
		reflect.TypeFor[idEntry[bindingSlot]](), // bindings
	} {
		if path := pointerIn(typ, typ.String()); path != "" {
			t.Errorf("%s holds a pointer at %s", typ, path)
		}
	}
}

// pointerIn returns where typ holds a pointer, "" if nowhere.
func pointerIn(typ reflect.Type, at string) string {
	switch typ.Kind() {
	case reflect.Struct:
		for i := range typ.NumField() {
			f := typ.Field(i)
			if p := pointerIn(f.Type, at+"."+f.Name); p != "" {
				return p
			}
		}
		return ""
	case reflect.Array:
		return pointerIn(typ.Elem(), at+"[]")
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return ""
	}
	return at + " (" + typ.Kind().String() + ")"
}

// TestPlanIndexListsAndMovesAgreeWithAModel: the plan index over the
// tables keeps what a map of plans keeps, through moves between plans and
// deletes.
func TestPlanIndexListsAndMovesAgreeWithAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var p planIndex
	p.reset()
	want := map[string]string{}
	plans := []string{"", "plan-a", "plan-b", "plan-c"}
	for step := range 5000 {
		id := fmt.Sprintf("i-%03d", rng.IntN(200))
		plan := plans[rng.IntN(len(plans))]
		p.apply([]planMove{{InstanceID: id, Plan: plan}})
		if plan == "" {
			delete(want, id)
		} else {
			want[id] = plan
		}
		if !p.has(id, plan) {
			t.Fatalf("step %d: has(%s, %q) is false", step, id, plan)
		}
		if step%97 == 0 {
			for _, plan := range plans[1:] {
				var w []string
				for id, pl := range want {
					if pl == plan && id > "i-050" {
						w = append(w, id)
					}
				}
				slices.SortFunc(w, compareIDs)
				if got := p.after(plan, "i-050"); !slices.Equal(got, w) {
					t.Fatalf("step %d: after(%s) = %v, want %v", step, plan, got, w)
				}
			}
		}
	}
	if got := p.after("no-such-plan", ""); len(got) != 0 {
		t.Fatalf("a plan never seen lists %v", got)
	}
}

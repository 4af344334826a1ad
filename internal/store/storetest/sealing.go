package storetest

import (
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

var sealingCases = []testCase{
	{"a store reads the zero sealing mode until one is recorded, then the one recorded", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		modes := broker.SealingModes(s)
		got, err := modes.SealingMode(t.Context())
		must(t, err, "SealingMode")
		equal(t, "sealing mode of a new store", got, broker.SealingMode{})
		want := broker.SealingMode{SealedOnly: true, KeyID: "arn:aws:kms:eu-west-1:123456789012:key/k-1", Since: at(5).Add(time.Nanosecond),
			SensitivePlans: []string{"plan-1", "plan-2"}}
		must(t, modes.SetSealingMode(t.Context(), want), "SetSealingMode")
		got, err = modes.SealingMode(t.Context())
		must(t, err, "SealingMode")
		equal(t, "sealing mode", got, want)
	}},
	{"the sealing mode's item is no instance's: reads, listings and expiry pass it by", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		modes := broker.SealingModes(s)
		want := broker.SealingMode{SealedOnly: true, KeyID: "k-1", Since: at(5)}
		must(t, modes.SetSealingMode(t.Context(), want), "SetSealingMode")
		provision(t, s, "i-1")
		before := snapshot(t, s)
		_, err := s.DeleteExpiredOperations(t.Context(), at(1_000_000_000))
		must(t, err, "DeleteExpiredOperations")
		after := snapshot(t, s)
		equal(t, "instances", after.Instances, before.Instances)
		if len(after.InProgress)+len(after.Detached) != 0 {
			t.Errorf("in progress %s, detached %s: want none", show(after.InProgress), show(after.Detached))
		}
		got, err := modes.SealingMode(t.Context())
		must(t, err, "SealingMode")
		equal(t, "sealing mode", got, want)
	}},
}

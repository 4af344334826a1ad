package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// wantNotFound fails the test unless err wraps broker.ErrNotFound and is not
// a conflict.
func wantNotFound(t *testing.T, err error) {
	t.Helper()
	var c *broker.ConflictError
	if !errors.Is(err, broker.ErrNotFound) || errors.As(err, &c) {
		t.Fatalf("got error %v, want broker.ErrNotFound", err)
	}
}

// emptyConflict fails the test unless err is a *broker.ConflictError with
// every field nil, as the detached-resource methods report one.
func emptyConflict(t *testing.T, err error) {
	t.Helper()
	if c := conflict(t, err); *c != (broker.ConflictError{}) {
		t.Errorf("conflict: got %s, want every field nil", show(c))
	}
}

var detachedCases = []testCase{
	{"ListDetached returns every detached record, oldest first", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		if got := listDetached(t, s); len(got) != 0 {
			t.Fatalf("empty store: got %s, want none", show(got))
		}
		// The creation times order the records differently from their ids
		// and from the order they are written in; ties go by id.
		records := []struct {
			id      string
			created time.Time
		}{
			{"d-z", at(10)},
			{"d-a", at(10)},
			{"d-m", at(10).Add(time.Nanosecond)},
			{"d-b", at(3)},
		}
		byID := map[string]broker.Detached{}
		for i, rec := range records {
			r := newResource("i-1", "r-"+rec.id)
			d := newDetached(r, "op-1")
			d.ID, d.CreatedAt, d.UpdatedAt, d.Attempts = rec.id, rec.created, rec.created, i
			Detach(t, s, r, d)
			byID[rec.id] = d
		}
		want := []broker.Detached{byID["d-b"], byID["d-a"], byID["d-z"], byID["d-m"]}
		equal(t, "detached list", listDetached(t, s), want)
	}},
	{"UpdateDetached stores the record while the stored attempts are the expected ones", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		r := newResource("i-1", "r-1")
		d := newDetached(r, "prov-i-1")
		Detach(t, s, r, d)

		cleaning := d
		cleaning.State, cleaning.Attempts, cleaning.UpdatedAt = broker.DetachedCleaning, 1, at(40)
		must(t, s.UpdateDetached(t.Context(), cleaning, 0), "UpdateDetached to cleaning")
		equal(t, "after the first update", getDetached(t, s, d.ID), &cleaning)

		// The Delete Task records an outage it waits out, then clears it.
		outage := cleaning
		outage.OutageSince, outage.OutageAttempts, outage.OutageReason = at(41), 7, "HTTP 503 <&>"
		outage.NextTryAt, outage.UpdatedAt = at(50), at(45)
		must(t, s.UpdateDetached(t.Context(), outage, 1), "UpdateDetached with an outage")
		equal(t, "during the outage", getDetached(t, s, d.ID), &outage)
		must(t, s.UpdateDetached(t.Context(), cleaning, 1), "UpdateDetached without the outage")
		equal(t, "after the outage", getDetached(t, s, d.ID), &cleaning)

		failed := cleaning
		failed.State, failed.Failure, failed.UpdatedAt = broker.DetachedFailed, "gave up after 3 tries", at(90)
		failed.FailureDetail = "Bucket (AWS::S3::Bucket): The bucket you tried to delete is not empty"
		must(t, s.UpdateDetached(t.Context(), failed, 1), "UpdateDetached to failed")
		equal(t, "after the second update", getDetached(t, s, d.ID), &failed)
	}},
	{"UpdateDetached fails and changes nothing", func(t *testing.T, newStore NewStore) {
		cases := []struct {
			name string
			// setup returns the record to store and the attempts to expect.
			setup func(t *testing.T, s broker.Store) (broker.Detached, int)
			check func(t *testing.T, err error)
		}{
			{"when the stored attempts are higher", func(t *testing.T, s broker.Store) (broker.Detached, int) {
				r := newResource("i-1", "r-1")
				d := newDetached(r, "prov-i-1")
				Detach(t, s, r, d)
				d.State, d.Attempts = broker.DetachedCleaning, 1
				must(t, s.UpdateDetached(t.Context(), d, 0), "UpdateDetached")
				d.Attempts, d.UpdatedAt = 1, at(60)
				return d, 0
			}, emptyConflict},
			{"when the expected attempts are the new record's", func(t *testing.T, s broker.Store) (broker.Detached, int) {
				r := newResource("i-1", "r-1")
				d := newDetached(r, "prov-i-1")
				Detach(t, s, r, d)
				d.State, d.Attempts = broker.DetachedCleaning, 1
				return d, 1
			}, emptyConflict},
			{"when the record does not exist", func(t *testing.T, s broker.Store) (broker.Detached, int) {
				return newDetached(newResource("i-1", "r-1"), "prov-i-1"), 0
			}, wantNotFound},
			{"when the record was deleted", func(t *testing.T, s broker.Store) (broker.Detached, int) {
				r := newResource("i-1", "r-1")
				d := newDetached(r, "prov-i-1")
				Detach(t, s, r, d)
				must(t, s.DeleteDetached(t.Context(), d.ID), "DeleteDetached")
				return d, 0
			}, wantNotFound},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := newStore(t)
				d, attempts := tc.setup(t, s)
				before := snapshot(t, s)
				tc.check(t, s.UpdateDetached(t.Context(), d, attempts))
				unchanged(t, s, before)
			})
		}
	}},
	{"DeleteDetached removes a record and ignores a missing one", func(t *testing.T, newStore NewStore) {
		s := newStore(t)
		r1, r2 := newResource("i-1", "r-1"), newResource("i-1", "r-2")
		d1, d2 := newDetached(r1, "prov-i-1"), newDetached(r2, "prov-i-1")
		Detach(t, s, r1, d1)
		Detach(t, s, r2, d2)
		must(t, s.DeleteDetached(t.Context(), d1.ID), "DeleteDetached")
		if getDetached(t, s, d1.ID) != nil {
			t.Error("the deleted record is still stored")
		}
		equal(t, "detached list", listDetached(t, s), []broker.Detached{d2})
		must(t, s.DeleteDetached(t.Context(), d1.ID), "DeleteDetached of a deleted record")
		must(t, s.DeleteDetached(t.Context(), "d-never"), "DeleteDetached of a record never stored")
		equal(t, "detached list after deleting missing records", listDetached(t, s), []broker.Detached{d2})
	}},
}

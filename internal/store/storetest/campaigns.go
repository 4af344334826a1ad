package storetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
)

// campaigns is the store's broker.Campaigns, which every store has.
func campaigns(t *testing.T, s broker.Store) broker.Campaigns { return s }

// newCampaign is a running campaign with every field set, and its items:
// given out of order, each with every field set.
func newCampaign(id string) (broker.Campaign, []broker.CampaignItem) {
	c := broker.Campaign{ID: id, State: broker.CampaignRunning, CreatedAt: at(10), UpdatedAt: at(10), ExpiresAt: at(100),
		Options: broker.CampaignOptions{PlanIDs: []string{"plan-small"}, CanaryOrgs: []string{"org-1"}, MaxInFlight: 3, MaxFailures: 2, DryRun: true,
			Skip: []string{"i-8"}, Defer: []string{"i-3", "i-9"}}}
	item := func(instance string, order int, state broker.ItemState) broker.CampaignItem {
		return broker.CampaignItem{CampaignID: id, InstanceID: instance, ServiceID: "svc-1", PlanID: "plan-small", Order: order,
			Canary: order == 0, State: state, FromVersion: "1.0.0", ToVersion: "2.0.0", UpdatedAt: at(10), ExpiresAt: at(100)}
	}
	skipped := item("i-3", 2, broker.ItemBlocked)
	skipped.Deferred, skipped.Description = true, "The instance's parameters do not fit version 2.0.0 of its plan."
	busy := item("i-1", 1, broker.ItemBusy)
	busy.OperationID, busy.Attempts, busy.NextTry, busy.Changes = "upgrade-1", 2, at(20), []string{"Modify Bucket (AWS::S3::Bucket)"}
	return c, []broker.CampaignItem{skipped, item("i-2", 0, broker.ItemPending), busy}
}

var campaignCases = []testCase{
	{"a campaign is created with its items and loaded in claim order, each field as written; it is listed", func(t *testing.T, newStore NewStore) {
		s := campaigns(t, newStore(t))
		c, items := newCampaign("upg-1")
		must(t, s.CreateCampaign(t.Context(), c, items), "CreateCampaign")
		got, gotItems, err := s.LoadCampaign(t.Context(), "upg-1")
		must(t, err, "LoadCampaign")
		equal(t, "campaign", got, c)
		equal(t, "items", gotItems, []broker.CampaignItem{items[1], items[2], items[0]})
		one, err := s.GetCampaignItem(t.Context(), "upg-1", "i-1")
		must(t, err, "GetCampaignItem")
		equal(t, "item i-1", one, items[2])
		list, err := s.ListCampaigns(t.Context())
		must(t, err, "ListCampaigns")
		equal(t, "campaigns", list, []broker.Campaign{c})
	}},
	{"creating a campaign again writes nothing and says it exists", func(t *testing.T, newStore NewStore) {
		s := campaigns(t, newStore(t))
		c, items := newCampaign("upg-1")
		must(t, s.CreateCampaign(t.Context(), c, items), "CreateCampaign")
		claimed := items[1]
		claimed.State, claimed.OperationID = broker.ItemRunning, "upgrade-2"
		must(t, s.UpdateCampaignItem(t.Context(), claimed, items[1]), "UpdateCampaignItem")
		again := c
		again.Options.MaxInFlight = 9
		err := s.CreateCampaign(t.Context(), again, items)
		if !errors.Is(err, broker.ErrCampaignExists) {
			t.Fatalf("CreateCampaign again: %v, want ErrCampaignExists", err)
		}
		got, gotItems, err := s.LoadCampaign(t.Context(), "upg-1")
		must(t, err, "LoadCampaign")
		equal(t, "campaign", got, c)
		claimed.Version = 1
		equal(t, "the claimed item", gotItems[0], claimed)
	}},
	{"an item is written only in the state and at the version read, its version then one more", func(t *testing.T, newStore NewStore) {
		s := campaigns(t, newStore(t))
		c, items := newCampaign("upg-1")
		must(t, s.CreateCampaign(t.Context(), c, items), "CreateCampaign")
		read := items[1]
		claimed := read
		claimed.State, claimed.OperationID = broker.ItemRunning, "upgrade-2"
		must(t, s.UpdateCampaignItem(t.Context(), claimed, read), "UpdateCampaignItem")
		late := read
		late.State = broker.ItemSkipped
		var conflict *broker.ConflictError
		if err := s.UpdateCampaignItem(t.Context(), late, read); !errors.As(err, &conflict) {
			t.Fatalf("a write from a stale read: %v, want *ConflictError", err)
		}
		got, err := s.GetCampaignItem(t.Context(), "upg-1", "i-2")
		must(t, err, "GetCampaignItem")
		claimed.Version = 1
		equal(t, "item", got, claimed)
		missing := broker.CampaignItem{CampaignID: "upg-1", InstanceID: "i-9", State: broker.ItemPending}
		if err := s.UpdateCampaignItem(t.Context(), missing, missing); !errors.As(err, &conflict) {
			t.Errorf("a write of a missing item: %v, want *ConflictError", err)
		}
	}},
	{"of lanes claiming one item at once, exactly one wins", func(t *testing.T, newStore NewStore) {
		s := campaigns(t, newStore(t))
		c, items := newCampaign("upg-1")
		must(t, s.CreateCampaign(t.Context(), c, items), "CreateCampaign")
		read := items[1]
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, lost := 0, 0
		for range 8 {
			wg.Go(func() {
				claimed := read
				claimed.State = broker.ItemRunning
				err := s.UpdateCampaignItem(t.Context(), claimed, read)
				mu.Lock()
				defer mu.Unlock()
				var conflict *broker.ConflictError
				switch {
				case err == nil:
					won++
				case errors.As(err, &conflict):
					lost++
				default:
					t.Errorf("UpdateCampaignItem: %v", err)
				}
			})
		}
		wg.Wait()
		if won != 1 || lost != 7 {
			t.Errorf("won %d, lost %d: want 1 and 7", won, lost)
		}
	}},
	{"a campaign ends once: its record and its listing say how", func(t *testing.T, newStore NewStore) {
		s := campaigns(t, newStore(t))
		c, items := newCampaign("upg-1")
		must(t, s.CreateCampaign(t.Context(), c, items), "CreateCampaign")
		ended := c
		ended.State, ended.Outcome, ended.FinishedAt, ended.UpdatedAt = broker.CampaignStopped, "2 failed", at(50), at(50)
		must(t, s.EndCampaign(t.Context(), ended), "EndCampaign")
		var conflict *broker.ConflictError
		again := ended
		again.State = broker.CampaignFinished
		if err := s.EndCampaign(t.Context(), again); !errors.As(err, &conflict) {
			t.Fatalf("EndCampaign again: %v, want *ConflictError", err)
		}
		got, _, err := s.LoadCampaign(t.Context(), "upg-1")
		must(t, err, "LoadCampaign")
		equal(t, "campaign", got, ended)
		list, err := s.ListCampaigns(t.Context())
		must(t, err, "ListCampaigns")
		equal(t, "campaigns", list, []broker.Campaign{ended})
	}},
	{"a campaign's expiry moves with its listing and every item's, no item's version", func(t *testing.T, newStore NewStore) {
		s := campaigns(t, newStore(t))
		c, items := newCampaign("upg-1")
		must(t, s.CreateCampaign(t.Context(), c, items), "CreateCampaign")
		claimed := items[1]
		claimed.State, claimed.OperationID, claimed.Lane = broker.ItemRunning, "upgrade-2", "rest/0"
		must(t, s.UpdateCampaignItem(t.Context(), claimed, items[1]), "UpdateCampaignItem")
		claimed.Version = items[1].Version + 1
		must(t, s.SetCampaignExpiry(t.Context(), "upg-1", at(500)), "SetCampaignExpiry")
		got, gotItems, err := s.LoadCampaign(t.Context(), "upg-1")
		must(t, err, "LoadCampaign")
		want := c
		want.ExpiresAt = at(500)
		equal(t, "campaign", got, want)
		var wantItems []broker.CampaignItem
		for _, it := range []broker.CampaignItem{claimed, items[2], items[0]} {
			it.ExpiresAt = at(500)
			wantItems = append(wantItems, it)
		}
		equal(t, "items", gotItems, wantItems)
		list, err := s.ListCampaigns(t.Context())
		must(t, err, "ListCampaigns")
		equal(t, "campaigns", list, []broker.Campaign{want})
		// A lane's write of the item as read before still succeeds.
		done := claimed
		done.State = broker.ItemUpgraded
		must(t, s.UpdateCampaignItem(t.Context(), done, claimed), "UpdateCampaignItem after SetCampaignExpiry")
		if err := s.SetCampaignExpiry(t.Context(), "upg-2", at(500)); !errors.Is(err, broker.ErrNotFound) {
			t.Errorf("SetCampaignExpiry of no campaign: %v, want ErrNotFound", err)
		}
	}},
	{"campaigns are listed newest first; a missing one is not found", func(t *testing.T, newStore NewStore) {
		s := campaigns(t, newStore(t))
		older, _ := newCampaign("upg-1")
		newer, _ := newCampaign("upg-2")
		newer.CreatedAt = at(20)
		must(t, s.CreateCampaign(t.Context(), older, nil), "CreateCampaign")
		must(t, s.CreateCampaign(t.Context(), newer, nil), "CreateCampaign")
		list, err := s.ListCampaigns(t.Context())
		must(t, err, "ListCampaigns")
		equal(t, "campaigns", list, []broker.Campaign{newer, older})
		if _, _, err := s.LoadCampaign(t.Context(), "upg-9"); !errors.Is(err, broker.ErrNotFound) {
			t.Errorf("LoadCampaign of a missing campaign: %v, want ErrNotFound", err)
		}
		if _, err := s.GetCampaignItem(t.Context(), "upg-1", "i-9"); !errors.Is(err, broker.ErrNotFound) {
			t.Errorf("GetCampaignItem of a missing item: %v, want ErrNotFound", err)
		}
	}},
	{"a campaign's items are no instance's: reads, listings and expiry pass them by", func(t *testing.T, newStore NewStore) {
		store := newStore(t)
		s := campaigns(t, store)
		provision(t, store, "i-1")
		before := snapshot(t, store)
		c, items := newCampaign("upg-1")
		must(t, s.CreateCampaign(t.Context(), c, items), "CreateCampaign")
		_, err := store.DeleteExpiredOperations(t.Context(), at(50))
		must(t, err, "DeleteExpiredOperations")
		equal(t, "the store's instances and operations", snapshot(t, store), before)
		if _, _, err := s.LoadCampaign(t.Context(), "upg-1"); err != nil {
			t.Errorf("LoadCampaign: %v", err)
		}
	}},
}

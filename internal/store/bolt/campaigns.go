package bolt

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

var _ broker.Campaigns = (*Store)(nil)

// A campaign's items share its partition, outside every instance's:
// PK=campaign#<id>, SK=campaign for the campaign, SK=i#<instance_id> for
// each item. A copy of the campaign's record, written in the same
// transaction, lists it: PK=campaigns, SK=<id>.
func campaignPK(id string) string { return "campaign#" + id + sep }

func campaignKey(id string) []byte { return []byte(campaignPK(id) + "campaign") }

func campaignItemKey(id, instanceID string) []byte {
	return []byte(campaignPK(id) + "i#" + instanceID)
}

const pkCampaigns = "campaigns" + sep

func campaignListKey(id string) []byte { return []byte(pkCampaigns + id) }

type campaignItem struct {
	ID         string              `json:"id"`
	Options    campaignOptionsItem `json:"options"`
	State      string              `json:"state"`
	Outcome    string              `json:"outcome,omitempty"`
	CreatedAt  time.Time           `json:"created_at"`
	UpdatedAt  time.Time           `json:"updated_at"`
	FinishedAt time.Time           `json:"finished_at,omitzero"`
	ExpiresAt  time.Time           `json:"expires_at,omitzero"`
}

type campaignOptionsItem struct {
	PlanIDs      []string `json:"plan_ids,omitempty"`
	All          bool     `json:"all,omitempty"`
	Canaries     int      `json:"canaries,omitempty"`
	CanaryOrgs   []string `json:"canary_orgs,omitempty"`
	CanarySpaces []string `json:"canary_spaces,omitempty"`
	MaxInFlight  int      `json:"max_in_flight"`
	MaxFailures  int      `json:"max_failures"`
	DryRun       bool     `json:"dry_run,omitempty"`
	Skip         []string `json:"skip,omitempty"`
	Defer        []string `json:"defer,omitempty"`
}

func newCampaignItem(c broker.Campaign) campaignItem {
	o := c.Options
	return campaignItem{ID: c.ID, Options: campaignOptionsItem(o), State: string(c.State), Outcome: c.Outcome,
		CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC(), FinishedAt: c.FinishedAt.UTC(), ExpiresAt: c.ExpiresAt.UTC()}
}

func (it campaignItem) campaign() broker.Campaign {
	return broker.Campaign{ID: it.ID, Options: broker.CampaignOptions(it.Options), State: broker.CampaignState(it.State), Outcome: it.Outcome,
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt, FinishedAt: it.FinishedAt, ExpiresAt: it.ExpiresAt}
}

type campaignInstanceItem struct {
	CampaignID  string    `json:"campaign_id"`
	InstanceID  string    `json:"instance_id"`
	ServiceID   string    `json:"service_id"`
	PlanID      string    `json:"plan_id"`
	Order       int       `json:"order"`
	Canary      bool      `json:"canary,omitempty"`
	Deferred    bool      `json:"deferred,omitempty"`
	State       string    `json:"state"`
	OperationID string    `json:"operation_id,omitempty"`
	Lane        string    `json:"lane,omitempty"`
	Attempts    int       `json:"attempts,omitempty"`
	NextTry     time.Time `json:"next_try,omitzero"`
	FromVersion string    `json:"from_version,omitempty"`
	ToVersion   string    `json:"to_version,omitempty"`
	Description string    `json:"description,omitempty"`
	Changes     []string  `json:"changes,omitempty"`
	UpdatedAt   time.Time `json:"updated_at"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
	Version     int64     `json:"version"`
}

func newCampaignInstanceItem(it broker.CampaignItem) campaignInstanceItem {
	return campaignInstanceItem{CampaignID: it.CampaignID, InstanceID: it.InstanceID, ServiceID: it.ServiceID, PlanID: it.PlanID,
		Order: it.Order, Canary: it.Canary, Deferred: it.Deferred, State: string(it.State), OperationID: it.OperationID, Lane: it.Lane, Attempts: it.Attempts,
		NextTry: it.NextTry.UTC(), FromVersion: it.FromVersion, ToVersion: it.ToVersion, Description: it.Description,
		Changes: it.Changes, UpdatedAt: it.UpdatedAt.UTC(), ExpiresAt: it.ExpiresAt.UTC(), Version: it.Version}
}

func (it campaignInstanceItem) item() broker.CampaignItem {
	return broker.CampaignItem{CampaignID: it.CampaignID, InstanceID: it.InstanceID, ServiceID: it.ServiceID, PlanID: it.PlanID,
		Order: it.Order, Canary: it.Canary, Deferred: it.Deferred, State: broker.ItemState(it.State), OperationID: it.OperationID, Lane: it.Lane, Attempts: it.Attempts,
		NextTry: it.NextTry, FromVersion: it.FromVersion, ToVersion: it.ToVersion, Description: it.Description,
		Changes: it.Changes, UpdatedAt: it.UpdatedAt, ExpiresAt: it.ExpiresAt, Version: it.Version}
}

func storedCampaign(c *broker.Campaign) *stored {
	if c == nil {
		return nil
	}
	return &stored{state: string(c.State)}
}

func storedCampaignItem(it *broker.CampaignItem) *stored {
	if it == nil {
		return nil
	}
	return &stored{state: string(it.State), version: it.Version}
}

// CreateCampaign stores c and its items in one transaction, unless c is
// stored: then broker.ErrCampaignExists.
func (s *Store) CreateCampaign(ctx context.Context, c broker.Campaign, items []broker.CampaignItem) error {
	err := broker.CheckCampaign(c, items)
	if err == nil {
		err = s.update(ctx, func(t tx) error {
			cur, err := get(t, campaignKey(c.ID), campaignItem.campaign)
			if err != nil {
				return err
			}
			if cur != nil {
				return broker.ErrCampaignExists
			}
			for _, it := range items {
				if t.items.Get(campaignItemKey(c.ID, it.InstanceID)) != nil {
					continue
				}
				if err := put(t.items, campaignItemKey(c.ID, it.InstanceID), newCampaignInstanceItem(it)); err != nil {
					return err
				}
			}
			if err := put(t.items, campaignKey(c.ID), newCampaignItem(c)); err != nil {
				return err
			}
			return put(t.items, campaignListKey(c.ID), newCampaignItem(c))
		})
	}
	if err != nil {
		return fmt.Errorf("create campaign %s: %w", c.ID, err)
	}
	return nil
}

// LoadCampaign reads a campaign and its items, by Order, in one read
// transaction.
func (s *Store) LoadCampaign(ctx context.Context, id string) (broker.Campaign, []broker.CampaignItem, error) {
	var c *broker.Campaign
	var items []broker.CampaignItem
	err := broker.CheckIDs(id)
	if err == nil {
		err = s.view(ctx, func(t tx) (err error) {
			if c, err = get(t, campaignKey(id), campaignItem.campaign); err != nil || c == nil {
				return err
			}
			items, err = scan(t.items, []byte(campaignPK(id)+"i#"), campaignInstanceItem.item)
			return err
		})
	}
	if err == nil && c == nil {
		err = broker.ErrNotFound
	}
	if err != nil {
		return broker.Campaign{}, nil, fmt.Errorf("load campaign %s: %w", id, err)
	}
	broker.SortCampaignItems(items)
	return *c, items, nil
}

// GetCampaignItem reads one item of a campaign.
func (s *Store) GetCampaignItem(ctx context.Context, campaignID, instanceID string) (broker.CampaignItem, error) {
	var it *broker.CampaignItem
	err := broker.CheckIDs(campaignID, instanceID)
	if err == nil {
		err = s.view(ctx, func(t tx) (err error) {
			it, err = get(t, campaignItemKey(campaignID, instanceID), campaignInstanceItem.item)
			return err
		})
	}
	if err == nil && it == nil {
		err = broker.ErrNotFound
	}
	if err != nil {
		return broker.CampaignItem{}, fmt.Errorf("get campaign item %s/%s: %w", campaignID, instanceID, err)
	}
	return *it, nil
}

// UpdateCampaignItem stores it at read's version plus one. Conditions:
// broker.CampaignItemConditions(read); else *broker.ConflictError.
func (s *Store) UpdateCampaignItem(ctx context.Context, it, read broker.CampaignItem) error {
	err := broker.CheckCampaignItem(it, read)
	if err == nil {
		err = s.update(ctx, func(t tx) error {
			cur, err := get(t, campaignItemKey(it.CampaignID, it.InstanceID), campaignInstanceItem.item)
			if err != nil {
				return err
			}
			ok, err := meets(storedCampaignItem(cur), broker.CampaignItemConditions(read))
			switch {
			case err != nil:
				return err
			case !ok:
				return &broker.ConflictError{}
			}
			it.Version = read.Version + 1
			return put(t.items, campaignItemKey(it.CampaignID, it.InstanceID), newCampaignInstanceItem(it))
		})
	}
	if err != nil {
		return fmt.Errorf("update campaign item %s/%s: %w", it.CampaignID, it.InstanceID, err)
	}
	return nil
}

// EndCampaign stores c and its listed copy. Conditions:
// broker.EndCampaignConditions (the stored campaign is running).
func (s *Store) EndCampaign(ctx context.Context, c broker.Campaign) error {
	err := broker.CheckIDs(c.ID)
	if err == nil {
		err = s.update(ctx, func(t tx) error {
			cur, err := get(t, campaignKey(c.ID), campaignItem.campaign)
			if err != nil {
				return err
			}
			ok, err := meets(storedCampaign(cur), broker.EndCampaignConditions())
			switch {
			case err != nil:
				return err
			case !ok:
				return &broker.ConflictError{}
			}
			if err := put(t.items, campaignKey(c.ID), newCampaignItem(c)); err != nil {
				return err
			}
			return put(t.items, campaignListKey(c.ID), newCampaignItem(c))
		})
	}
	if err != nil {
		return fmt.Errorf("end campaign %s: %w", c.ID, err)
	}
	return nil
}

// ListCampaigns returns every campaign kept, newest first.
func (s *Store) ListCampaigns(ctx context.Context) ([]broker.Campaign, error) {
	var cs []broker.Campaign
	err := s.view(ctx, func(t tx) (err error) {
		cs, err = scan(t.items, []byte(pkCampaigns), campaignItem.campaign)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list campaigns: %w", err)
	}
	slices.SortStableFunc(cs, func(a, b broker.Campaign) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	return cs, nil
}

// SetCampaignExpiry sets the expiry of campaign id, of its listed copy and
// of its items, in one transaction; no item's version moves.
func (s *Store) SetCampaignExpiry(ctx context.Context, id string, at time.Time) error {
	err := broker.CheckIDs(id)
	if err == nil {
		err = s.update(ctx, func(t tx) error {
			c, err := get(t, campaignKey(id), func(it campaignItem) campaignItem { return it })
			switch {
			case err != nil:
				return err
			case c == nil:
				return broker.ErrNotFound
			}
			c.ExpiresAt = at.UTC()
			if err := put(t.items, campaignKey(id), c); err != nil {
				return err
			}
			if err := put(t.items, campaignListKey(id), c); err != nil {
				return err
			}
			items, err := scan(t.items, []byte(campaignPK(id)+"i#"), func(it campaignInstanceItem) campaignInstanceItem { return it })
			if err != nil {
				return err
			}
			for _, it := range items {
				it.ExpiresAt = at.UTC()
				if err := put(t.items, campaignItemKey(id, it.InstanceID), it); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("set expiry of campaign %s: %w", id, err)
	}
	return nil
}

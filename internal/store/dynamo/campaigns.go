package dynamo

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
)

var _ broker.Campaigns = (*Store)(nil)

// A campaign's items share its partition, outside every instance's, so
// that LoadCampaign is one Query: PK=campaign#<id>, SK=campaign for the
// campaign, SK=i#<instance_id> for each item. A copy of the campaign's
// record, written in the same transaction, lists it (PK=campaigns,
// SK=<id>), so that ListCampaigns is a Query too (the functions may not
// Scan). Both carry expires_at_epoch, the table's time to live.
func campaignPK(id string) string { return "campaign#" + id }

const (
	skCampaign       = "campaign"
	pkCampaigns      = "campaigns"
	skCampaignPrefix = "i#"
)

func campaignKey(id string) map[string]types.AttributeValue { return key(campaignPK(id), skCampaign) }

func campaignItemKey(id, instanceID string) map[string]types.AttributeValue {
	return key(campaignPK(id), skCampaignPrefix+instanceID)
}

type campaignItem struct {
	PK          string    `dynamodbav:"PK"`
	SK          string    `dynamodbav:"SK"`
	ID          string    `dynamodbav:"id"`
	Options     jsonText  `dynamodbav:"options"`
	State       string    `dynamodbav:"state"`
	Outcome     string    `dynamodbav:"outcome,omitempty"`
	CreatedAt   time.Time `dynamodbav:"created_at"`
	UpdatedAt   time.Time `dynamodbav:"updated_at"`
	FinishedAt  time.Time `dynamodbav:"finished_at,omitempty"`
	ExpiresAt   time.Time `dynamodbav:"expires_at,omitempty"`
	ExpiresUnix int64     `dynamodbav:"expires_at_epoch,omitempty"`
}

// campaignOptions is how the options attribute writes a campaign's
// options: a JSON text, in the bolt store's words.
type campaignOptions struct {
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

func newCampaignItem(c broker.Campaign, pkValue, skValue string) (campaignItem, error) {
	data, err := json.Marshal(campaignOptions(c.Options))
	if err != nil {
		return campaignItem{}, fmt.Errorf("options: %w", err)
	}
	opts, err := newJSONText(data, "options")
	if err != nil {
		return campaignItem{}, err
	}
	it := campaignItem{PK: pkValue, SK: skValue, ID: c.ID, Options: opts, State: string(c.State), Outcome: c.Outcome,
		CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC(), FinishedAt: c.FinishedAt.UTC(), ExpiresAt: c.ExpiresAt.UTC()}
	if !c.ExpiresAt.IsZero() {
		it.ExpiresUnix = c.ExpiresAt.Unix()
	}
	return it, nil
}

func (it campaignItem) campaign() (broker.Campaign, error) {
	opts, err := jsonValue[campaignOptions](it.Options.raw(), "options")
	if err != nil {
		return broker.Campaign{}, err
	}
	return broker.Campaign{ID: it.ID, Options: broker.CampaignOptions(opts), State: broker.CampaignState(it.State), Outcome: it.Outcome,
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt, FinishedAt: it.FinishedAt, ExpiresAt: it.ExpiresAt}, nil
}

type campaignInstanceItem struct {
	PK          string    `dynamodbav:"PK"`
	SK          string    `dynamodbav:"SK"`
	CampaignID  string    `dynamodbav:"campaign_id"`
	InstanceID  string    `dynamodbav:"instance_id"`
	ServiceID   string    `dynamodbav:"service_id"`
	PlanID      string    `dynamodbav:"plan_id,omitempty"`
	Order       int       `dynamodbav:"order"`
	Canary      bool      `dynamodbav:"canary,omitempty"`
	Deferred    bool      `dynamodbav:"deferred,omitempty"`
	State       string    `dynamodbav:"state"`
	OperationID string    `dynamodbav:"operation_id,omitempty"`
	Lane        string    `dynamodbav:"lane,omitempty"`
	Attempts    int       `dynamodbav:"attempts,omitempty"`
	NextTry     time.Time `dynamodbav:"next_try,omitempty"`
	FromVersion string    `dynamodbav:"from_version,omitempty"`
	ToVersion   string    `dynamodbav:"to_version,omitempty"`
	Description string    `dynamodbav:"description,omitempty"`
	Changes     []string  `dynamodbav:"changes,omitempty"`
	UpdatedAt   time.Time `dynamodbav:"updated_at"`
	ExpiresAt   time.Time `dynamodbav:"expires_at,omitempty"`
	ExpiresUnix int64     `dynamodbav:"expires_at_epoch,omitempty"`
	Version     int64     `dynamodbav:"version"`
}

func newCampaignInstanceItem(it broker.CampaignItem) (campaignInstanceItem, error) {
	out := campaignInstanceItem{PK: campaignPK(it.CampaignID), SK: skCampaignPrefix + it.InstanceID,
		CampaignID: it.CampaignID, InstanceID: it.InstanceID, ServiceID: it.ServiceID, PlanID: it.PlanID,
		Order: it.Order, Canary: it.Canary, Deferred: it.Deferred, State: string(it.State), OperationID: it.OperationID, Lane: it.Lane, Attempts: it.Attempts,
		NextTry: it.NextTry.UTC(), FromVersion: it.FromVersion, ToVersion: it.ToVersion, Description: it.Description,
		Changes: it.Changes, UpdatedAt: it.UpdatedAt.UTC(), ExpiresAt: it.ExpiresAt.UTC(), Version: it.Version}
	if !it.ExpiresAt.IsZero() {
		out.ExpiresUnix = it.ExpiresAt.Unix()
	}
	return out, nil
}

func (it campaignInstanceItem) item() (broker.CampaignItem, error) {
	return broker.CampaignItem{CampaignID: it.CampaignID, InstanceID: it.InstanceID, ServiceID: it.ServiceID, PlanID: it.PlanID,
		Order: it.Order, Canary: it.Canary, Deferred: it.Deferred, State: broker.ItemState(it.State), OperationID: it.OperationID, Lane: it.Lane, Attempts: it.Attempts,
		NextTry: it.NextTry, FromVersion: it.FromVersion, ToVersion: it.ToVersion, Description: it.Description,
		Changes: it.Changes, UpdatedAt: it.UpdatedAt, ExpiresAt: it.ExpiresAt, Version: it.Version}, nil
}

// CreateCampaign stores c's items, each by a PutItem conditional on no
// item being there (so that a create cut short and run again keeps what
// it wrote), then, in one transaction conditional on its absence, the
// campaign's record and its listed copy. A stored campaign: nothing is
// written, broker.ErrCampaignExists.
func (s *Store) CreateCampaign(ctx context.Context, c broker.Campaign, items []broker.CampaignItem) error {
	err := broker.CheckCampaign(c, items)
	if err == nil {
		err = s.createCampaign(ctx, c, items)
	}
	if err != nil {
		return fmt.Errorf("create campaign %s: %w", c.ID, err)
	}
	return nil
}

func (s *Store) createCampaign(ctx context.Context, c broker.Campaign, items []broker.CampaignItem) error {
	if _, err := get(ctx, s, campaignKey(c.ID), campaignItem.campaign); err == nil {
		return broker.ErrCampaignExists
	} else if !errors.Is(err, broker.ErrNotFound) {
		return err
	}
	missing, err := condition([]broker.Condition{broker.Missing})
	if err != nil {
		return err
	}
	for _, it := range items {
		item, err := encode(newCampaignInstanceItem(it))
		if err != nil {
			return err
		}
		if _, err := s.putItemIf(ctx, item, missing); err != nil {
			return err
		}
	}
	err = s.run(ctx, func(add adder) {
		for _, k := range [][2]string{{campaignPK(c.ID), skCampaign}, {pkCampaigns, c.ID}} {
			item, err := encode(newCampaignItem(c, k[0], k[1]))
			if err != nil {
				add(write{}, err)
				continue
			}
			add(s.put(item, []broker.Condition{broker.Missing}, noRole))
		}
	})
	var conflict *broker.ConflictError
	if errors.As(err, &conflict) {
		return broker.ErrCampaignExists
	}
	return err
}

// LoadCampaign reads a campaign and its items, by Order: one consistent
// Query of its partition (more pages only past 1 MB).
func (s *Store) LoadCampaign(ctx context.Context, id string) (broker.Campaign, []broker.CampaignItem, error) {
	var c *broker.Campaign
	var items []broker.CampaignItem
	err := broker.CheckIDs(id)
	if err == nil {
		var raw []map[string]types.AttributeValue
		raw, err = s.queryItems(ctx, expression.Key(attrPK).Equal(expression.Value(campaignPK(id))))
		for _, item := range raw {
			if err != nil {
				break
			}
			if keyPart(item, attrSK) == skCampaign {
				c, err = decode(item, campaignItem.campaign)
				continue
			}
			var it *broker.CampaignItem
			if it, err = decode(item, campaignInstanceItem.item); err == nil {
				items = append(items, *it)
			}
		}
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

// GetCampaignItem reads one item (consistent read).
func (s *Store) GetCampaignItem(ctx context.Context, campaignID, instanceID string) (broker.CampaignItem, error) {
	err := broker.CheckIDs(campaignID, instanceID)
	var it *broker.CampaignItem
	if err == nil {
		it, err = get(ctx, s, campaignItemKey(campaignID, instanceID), campaignInstanceItem.item)
	}
	if err != nil {
		return broker.CampaignItem{}, fmt.Errorf("get campaign item %s/%s: %w", campaignID, instanceID, err)
	}
	return *it, nil
}

// UpdateCampaignItem stores it at read's version plus one: one conditional
// PutItem. Conditions: broker.CampaignItemConditions(read); else
// *broker.ConflictError with no field set.
func (s *Store) UpdateCampaignItem(ctx context.Context, it, read broker.CampaignItem) error {
	err := broker.CheckCampaignItem(it, read)
	if err == nil {
		it.Version = read.Version + 1
		var item map[string]types.AttributeValue
		if item, err = encode(newCampaignInstanceItem(it)); err == nil {
			err = s.putItem(ctx, item, broker.CampaignItemConditions(read), noRole)
		}
	}
	if err != nil {
		return fmt.Errorf("update campaign item %s/%s: %w", it.CampaignID, it.InstanceID, err)
	}
	return nil
}

// EndCampaign stores c and its listed copy in one transaction. Conditions:
// broker.EndCampaignConditions (the stored campaign is running); else
// *broker.ConflictError with no field set.
func (s *Store) EndCampaign(ctx context.Context, c broker.Campaign) error {
	err := broker.CheckIDs(c.ID)
	if err == nil {
		err = s.run(ctx, func(add adder) {
			item, err := encode(newCampaignItem(c, campaignPK(c.ID), skCampaign))
			add(s.putOrFail(item, err, broker.EndCampaignConditions()))
			listed, err := encode(newCampaignItem(c, pkCampaigns, c.ID))
			add(s.putOrFail(listed, err, nil))
		})
	}
	if err != nil {
		return fmt.Errorf("end campaign %s: %w", c.ID, err)
	}
	return nil
}

// putOrFail is put, or the error that encoding item gave.
func (s *Store) putOrFail(item map[string]types.AttributeValue, err error, conds []broker.Condition) (write, error) {
	if err != nil {
		return write{}, err
	}
	return s.put(item, conds, noRole)
}

// ListCampaigns returns every campaign kept, newest first: one consistent
// Query of the listing's partition.
func (s *Store) ListCampaigns(ctx context.Context) ([]broker.Campaign, error) {
	cs, err := query(ctx, s, &dynamodb.QueryInput{ConsistentRead: aws.Bool(true)},
		expression.Key(attrPK).Equal(expression.Value(pkCampaigns)), campaignItem.campaign)
	if err != nil {
		return nil, fmt.Errorf("list campaigns: %w", err)
	}
	slices.SortStableFunc(cs, func(a, b broker.Campaign) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	return cs, nil
}

// queryItems runs a consistent Query of keyCond, every page, and returns
// the items as stored, for a partition that holds more than one kind.
func (s *Store) queryItems(ctx context.Context, keyCond expression.KeyConditionBuilder) ([]map[string]types.AttributeValue, error) {
	e, err := expression.NewBuilder().WithKeyCondition(keyCond).Build()
	if err != nil {
		return nil, fmt.Errorf("build expression: %w", err)
	}
	in := &dynamodb.QueryInput{TableName: s.table, ConsistentRead: aws.Bool(true), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
	var items []map[string]types.AttributeValue
	pages := dynamodb.NewQueryPaginator(s.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		items = append(items, page.Items...)
	}
	return items, nil
}

// campaignExpiryWriters is how many of a campaign's items SetCampaignExpiry
// updates at once: a Task has a minute for thousands of them.
const campaignExpiryWriters = 16

// SetCampaignExpiry sets expires_at and expires_at_epoch (the TTL) of
// campaign id, of its listed copy and of each of its items, each by an
// UpdateItem of those two attributes only, conditional on the item being
// there (a copy dropped meanwhile is not made again): the items, a Query
// of the partition's keys, campaignExpiryWriters at a time; the campaign's
// record last, so that its being found says the items were found too.
func (s *Store) SetCampaignExpiry(ctx context.Context, id string, at time.Time) error {
	err := broker.CheckIDs(id)
	var keys []map[string]types.AttributeValue
	if err == nil {
		keys, err = s.campaignKeys(ctx, id)
	}
	if err == nil {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
			slot = make(chan struct{}, campaignExpiryWriters)
		)
		for _, k := range keys {
			if keyPart(k, attrSK) == skCampaign {
				continue
			}
			slot <- struct{}{}
			wg.Go(func() {
				defer func() { <-slot }()
				if err := s.setExpiry(ctx, k, at); err != nil && !errors.Is(err, broker.ErrNotFound) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		err = errors.Join(errs...)
	}
	if err == nil {
		if err = s.setExpiry(ctx, key(pkCampaigns, id), at); errors.Is(err, broker.ErrNotFound) {
			err = nil // listed copies predate nothing; the record decides
		}
	}
	if err == nil {
		err = s.setExpiry(ctx, campaignKey(id), at)
	}
	if err != nil {
		return fmt.Errorf("set expiry of campaign %s: %w", id, err)
	}
	return nil
}

// campaignKeys are the keys of every item of campaign id's partition: a
// consistent Query projected on them.
func (s *Store) campaignKeys(ctx context.Context, id string) ([]map[string]types.AttributeValue, error) {
	e, err := expression.NewBuilder().WithKeyCondition(expression.Key(attrPK).Equal(expression.Value(campaignPK(id)))).
		WithProjection(expression.NamesList(expression.Name(attrPK), expression.Name(attrSK))).Build()
	if err != nil {
		return nil, fmt.Errorf("build expression: %w", err)
	}
	in := &dynamodb.QueryInput{TableName: s.table, ConsistentRead: aws.Bool(true), KeyConditionExpression: e.KeyCondition(),
		ProjectionExpression: e.Projection(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
	var keys []map[string]types.AttributeValue
	pages := dynamodb.NewQueryPaginator(s.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		keys = append(keys, page.Items...)
	}
	return keys, nil
}

// setExpiry sets the expiry attributes of the item at k, if there is one
// (else broker.ErrNotFound).
func (s *Store) setExpiry(ctx context.Context, k map[string]types.AttributeValue, at time.Time) error {
	update := expression.Set(expression.Name("expires_at"), expression.Value(at.UTC())).
		Set(expression.Name(attrExpiresAt), expression.Value(at.Unix()))
	e, err := build(expression.AttributeExists(expression.Name(attrPK)), &update)
	if err != nil {
		return err
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: s.table, Key: k, UpdateExpression: e.Update(),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return broker.ErrNotFound
	}
	return err
}

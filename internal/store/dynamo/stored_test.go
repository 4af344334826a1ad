package dynamo

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/itemtest"
)

// storedItems are the items of itemtest.Cases as the store wrote them up to
// commit d3c8482, where an item was the domain struct's JSON spread over
// attributes (captured from that code's item builders). Deployed tables
// hold items in this form: the store must read them, and write the same.
var storedItems = map[string]attrs{
	"instance with every field": {
		"PK":               s("i#i-1"),
		"SK":               s("instance"),
		"binding_ops":      n("2"),
		"context":          s(`{"platform":"cloudfoundry","z":{"y":null}}`),
		"created_at":       s("2025-03-01T12:00:00.123456789Z"),
		"dashboard_url":    s("https://dashboard.example.com/i-1?a=1&b=<2>"),
		"fingerprint":      s("fp-i-1"),
		"id":               s("i-1"),
		"last_op":          s("op-2"),
		"maintenance_info": m(attrs{"description": s("first"), "version": s("1.2.0")}),
		"plan_digest":      s("sha256:d1"),
		"metadata": m(attrs{
			"attributes": m(attrs{"count": n("3"), "list": l(s("a"), n("2"), boolean(false)), "nested": m(attrs{"k": s("v")}), "on": boolean(true), "weight": n("1.5")}),
			"labels":     m(attrs{"empty": s(""), "none": null, "team": s("blue")}),
		}),
		"op":                s("op-2"),
		"organization_guid": s("org-1"),
		"parameters":        s(`{"z":1,"a":[1,2.50],"big":123456789012345678901234567890123456789012,"html":"<a&b>"}`),
		"plan_id":           s("plan-1"),
		"service_id":        s("svc-1"),
		"space_guid":        s("space-1"),
		"state":             s("updating"),
		"updated_at":        s("2025-03-01T12:01:00.123456789Z"),
		"version":           n("7"),
	},
	"instance with few fields": {
		"PK":          s("i#i-2"),
		"SK":          s("instance"),
		"binding_ops": n("0"),
		"created_at":  s("0001-01-01T00:00:00Z"),
		"fingerprint": s(""),
		"id":          s("i-2"),
		"metadata":    m(attrs{}),
		"plan_id":     s(""),
		"service_id":  s(""),
		"state":       s("ready"),
		"updated_at":  s("0001-01-01T00:00:00Z"),
		"version":     n("0"),
	},
	"binding with every field": {
		"PK":            s("i#i-1"),
		"SK":            s("b#b-1"),
		"app_guid":      s("app-1"),
		"bind_resource": s(`{"app_guid":"app-1","route":"r"}`),
		"context":       s(`{"platform":"cloudfoundry"}`),
		"created_at":    s("2025-03-01T12:00:00.123456789Z"),
		"credentials":   m(attrs{"extra": m(attrs{"x": null}), "hosts": l(s("a"), s("b")), "port": n("5432"), "tls": boolean(true), "user": s("u")}),
		"endpoints": l(
			m(attrs{"host": s("db.example.com"), "ports": l(s("5432"), s("5433")), "protocol": s("tcp")}),
			m(attrs{"host": s("other.example.com"), "ports": l()}),
			m(attrs{"host": s("third.example.com"), "ports": null}),
		),
		"expires_at":     s("2025-03-02T12:00:00.123456789Z"),
		"fingerprint":    s("fp-b-1"),
		"id":             s("b-1"),
		"instance_id":    s("i-1"),
		"last_op":        s("op-3"),
		"op":             s("op-3"),
		"parameters":     s(`{"role":"reader","n":10}`),
		"plan_id":        s("plan-1"),
		"predecessor_id": s("b-0"),
		"renew_before":   s("2025-03-02T00:00:00.123456789Z"),
		"sealed": m(attrs{
			"alg": s("A256GCM"), "ct": s("Y3Q="), "ctx": s("Y3R4"), "kec": m(attrs{"instance_id": s("i-1")}),
			"kid": s("k-1"), "nonce": s("bm9uY2U="), "v": n("1"),
		}),
		"service_id": s("svc-1"),
		"state":      s("ready"),
		"updated_at": s("2025-03-01T12:00:01.123456789Z"),
		"version":    n("3"),
	},
	"binding with few fields": {
		"PK":          s("i#i-1"),
		"SK":          s("b#b-2"),
		"created_at":  s("0001-01-01T00:00:00Z"),
		"fingerprint": s(""),
		"id":          s("b-2"),
		"instance_id": s("i-1"),
		"plan_id":     s(""),
		"service_id":  s(""),
		"state":       s("creating"),
		"updated_at":  s("0001-01-01T00:00:00Z"),
		"version":     n("0"),
	},
	"operation in progress with every field": {
		"PK":                s("i#i-1"),
		"SK":                s("op#op-2"),
		"async":             boolean(true),
		"binding_id":        s("b-1"),
		"created_at":        s("2025-03-01T12:00:00.123456789Z"),
		"description":       s("updating <plan>"),
		"fingerprint":       s("fp-op-2"),
		"id":                s("op-2"),
		"inprogress":        s("1"),
		"instance_id":       s("i-1"),
		"instance_usable":   boolean(false),
		"kind":              s("update"),
		"next_check_at":     s("2025-03-01T12:00:30.123456789Z"),
		"plan_id":           s("plan-1"),
		"retry_after":       n("5000000000"),
		"state":             s("in progress"),
		"target":            s(`{"plan_id":"plan-2","parameters":{"z":1,"a":2,"html":"<&>"},"context":{"platform":"kubernetes"},"maintenance_info":{"version":"2.0.0"},"plan_digest":"sha256:d2"}`),
		"update_repeatable": boolean(true),
		"updated_at":        s("2025-03-01T12:00:01.123456789Z"),
	},
	"finished operation": {
		"PK":               s("i#i-1"),
		"SK":               s("op#op-1"),
		"async":            boolean(false),
		"created_at":       s("2025-03-01T12:00:00.123456789Z"),
		"expires_at":       s("2025-03-08T12:01:00.123456789Z"),
		"expires_at_epoch": n("1741435260"),
		"fingerprint":      s("fp-op-1"),
		"finished_at":      s("2025-03-01T12:01:00.123456789Z"),
		"id":               s("op-1"),
		"instance_id":      s("i-1"),
		"kind":             s("provision"),
		"next_check_at":    s("2025-03-01T12:01:00.123456789Z"),
		"plan_id":          s("plan-1"),
		"retry_after":      n("0"),
		"state":            s("succeeded"),
		"updated_at":       s("2025-03-01T12:01:00.123456789Z"),
	},
	"finished operation without expiry": {
		"PK":            s("i#i-1"),
		"SK":            s("op#op-0"),
		"async":         boolean(false),
		"created_at":    s("0001-01-01T00:00:00Z"),
		"fingerprint":   s(""),
		"finished_at":   s("2025-03-01T12:00:00.123456789Z"),
		"id":            s("op-0"),
		"instance_id":   s("i-1"),
		"kind":          s("bind"),
		"next_check_at": s("0001-01-01T00:00:00Z"),
		"plan_id":       s(""),
		"retry_after":   n("0"),
		"state":         s("failed"),
		"updated_at":    s("0001-01-01T00:00:00Z"),
	},
	"failed operation with an operator's detail": {
		"PK":               s("i#i-1"),
		"SK":               s("op#op-3"),
		"async":            boolean(true),
		"created_at":       s("2025-03-01T12:00:00.123456789Z"),
		"description":      s("The S3 Bucket \"Bucket\" could not be created: the broker's service role lacks a permission."),
		"detail":           s("Bucket (AWS::S3::Bucket) CREATE_FAILED: User: arn:aws:sts::123456789012:assumed-role/cfn is not authorized to perform: s3:CreateBucket <&>"),
		"expires_at":       s("2025-03-08T12:01:00.123456789Z"),
		"expires_at_epoch": n("1741435260"),
		"fingerprint":      s("fp-op-3"),
		"finished_at":      s("2025-03-01T12:01:00.123456789Z"),
		"id":               s("op-3"),
		"instance_id":      s("i-1"),
		"kind":             s("provision"),
		"next_check_at":    s("2025-03-01T12:01:00.123456789Z"),
		"plan_id":          s("plan-1"),
		"retry_after":      n("0"),
		"state":            s("failed"),
		"updated_at":       s("2025-03-01T12:01:00.123456789Z"),
	},
	"resource": {
		"PK":          s("i#i-1"),
		"SK":          s("r#db"),
		"data":        s(`{"b":1,"a":"<x>"}`),
		"instance_id": s("i-1"),
		"name":        s("db"),
		"updated_at":  s("2025-03-01T12:00:00.123456789Z"),
	},
	"resource without data": {
		"PK":          s("i#i-1"),
		"SK":          s("r#empty"),
		"data":        s("null"),
		"instance_id": s("i-1"),
		"name":        s("empty"),
		"updated_at":  s("0001-01-01T00:00:00Z"),
	},
	"detached resource": {
		"PK":           s("detached"),
		"SK":           s("d-1"),
		"attempts":     n("2"),
		"created_at":   s("2025-03-01T12:00:00.123456789Z"),
		"data":         s("[3,2,1]"),
		"failure":      s("gave up"),
		"id":           s("d-1"),
		"instance_id":  s("i-1"),
		"name":         s("old"),
		"operation_id": s("op-2"),
		"plan_id":      s("plan-1"),
		"reason":       s("update failed"),
		"state":        s("failed"),
		"updated_at":   s("2025-03-01T13:00:00.123456789Z"),
	},
	"detached resource with a cleanup failure's detail": {
		"PK":             s("detached"),
		"SK":             s("d-2"),
		"attempts":       n("3"),
		"created_at":     s("2025-03-01T12:00:00.123456789Z"),
		"data":           s(`{"stack":"osb-i-1"}`),
		"failure":        s("The stack osb-i-1 could not be deleted (tried 3 times)."),
		"failure_detail": s("Bucket (AWS::S3::Bucket): The bucket you tried to delete is not empty <&>"),
		"id":             s("d-2"),
		"instance_id":    s("i-1"),
		"name":           s("stack"),
		"operation_id":   s("op-3"),
		"plan_id":        s("plan-1"),
		"reason":         s("provision failed"),
		"state":          s("failed"),
		"updated_at":     s("2025-03-01T13:00:00.123456789Z"),
	},
}

func TestStoredItems(t *testing.T) {
	for _, c := range itemtest.Cases() {
		stored, ok := storedItems[c.Name]
		if !ok {
			t.Fatalf("no stored item for %q", c.Name)
		}
		t.Run(c.Name+" is read from the item stored before", func(t *testing.T) {
			got, err := decodeCase(stored, c.Value)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range itemtest.Diff(got, c.Value) {
				t.Error(d)
			}
		})
		t.Run(c.Name+" is written as before", func(t *testing.T) {
			got, err := encodeCase(c.Value)
			if err != nil {
				t.Fatal(err)
			}
			want := stored
			if v, ok := stored["plan_id"].(*types.AttributeValueMemberS); ok && v.Value == "" {
				// An empty plan is no longer written: plan_id is the key of
				// the ByPlan index, which cannot be an empty string. It
				// reads back alike (above).
				want = maps.Clone(stored)
				delete(want, "plan_id")
			}
			for _, d := range diffItems(got, want) {
				t.Error(d)
			}
		})
	}
}

// diffItems lists the attributes in which got and want differ.
func diffItems(got, want attrs) []string {
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: missing, want %#v", name, want[name]))
		} else if !reflect.DeepEqual(g, want[name]) {
			diffs = append(diffs, fmt.Sprintf("%s: got %#v, want %#v", name, g, want[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: got %#v, want none", name, got[name]))
		}
	}
	return diffs
}

type attrs = map[string]types.AttributeValue

func s(v string) types.AttributeValue     { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue     { return &types.AttributeValueMemberN{Value: v} }
func boolean(v bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: v} }
func m(v attrs) types.AttributeValue      { return &types.AttributeValueMemberM{Value: v} }

func l(v ...types.AttributeValue) types.AttributeValue {
	return &types.AttributeValueMemberL{Value: append([]types.AttributeValue{}, v...)}
}

var null types.AttributeValue = &types.AttributeValueMemberNULL{Value: true}

// encodeCase writes a domain value as the store does.
func encodeCase(v any) (attrs, error) {
	switch v := v.(type) {
	case broker.Instance:
		return encode(newInstanceItem(v))
	case broker.Binding:
		return encode(newBindingItem(v))
	case broker.Operation:
		return encode(newOperationItem(v))
	case broker.Resource:
		return encode(newResourceItem(v))
	case broker.Detached:
		return encode(newDetachedItem(v))
	}
	return nil, fmt.Errorf("no item for %T", v)
}

// decodeCase reads item as the store does, as a value of like's type.
func decodeCase(item attrs, like any) (any, error) {
	switch like.(type) {
	case broker.Instance:
		return deref(decode(item, instanceItem.instance))
	case broker.Binding:
		return deref(decode(item, bindingItem.binding))
	case broker.Operation:
		return deref(decode(item, operationItem.operation))
	case broker.Resource:
		return deref(decode(item, resourceItem.resource))
	case broker.Detached:
		return deref(decode(item, detachedItem.detached))
	}
	return nil, fmt.Errorf("no item for %T", like)
}

func deref[T any](v *T, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return *v, nil
}

// TestAttributeNames is the list of every attribute the storage types
// store: renaming a field of the domain changes nothing here, and renaming
// an attribute here is a change of the table's format, which items already
// stored do not follow.
func TestAttributeNames(t *testing.T) {
	golden := []struct {
		item any
		tag  string
		want []string
	}{
		{instanceItem{}, "dynamodbav", []string{"PK", "SK", "id", "service_id", "plan_id", "organization_guid", "space_guid",
			"parameters", "context", "maintenance_info", "maintenance_info.version", "maintenance_info.description",
			"plan_digest", "dashboard_url", "metadata", "metadata.labels", "metadata.attributes", "state", "op", "last_op",
			"binding_ops", "fingerprint", "version", "created_at", "updated_at"}},
		{bindingItem{}, "dynamodbav", []string{"PK", "SK", "instance_id", "id", "service_id", "plan_id", "app_guid",
			"bind_resource", "parameters", "context", "state", "credentials",
			"endpoints", "endpoints.host", "endpoints.ports", "endpoints.protocol",
			"sealed", "predecessor_id", "expires_at", "renew_before", "op", "last_op", "fingerprint", "version",
			"created_at", "updated_at"}},
		{operationItem{}, "dynamodbav", []string{"PK", "SK", "inprogress", "expires_at_epoch", "id", "instance_id",
			"binding_id", "kind", "state", "description", "detail", "fingerprint", "async", "plan_id", "target", "retry_after",
			"instance_usable", "update_repeatable", "created_at", "updated_at", "next_check_at", "finished_at", "expires_at",
			"outage_since", "outage_attempts", "outage_in_begin"}},
		// The JSON text of an operation's target attribute.
		{targetText{}, "json", []string{"plan_id", "parameters", "context",
			"maintenance_info", "maintenance_info.version", "maintenance_info.description", "plan_digest"}},
		{resourceItem{}, "dynamodbav", []string{"PK", "SK", "instance_id", "name", "data", "updated_at"}},
		{detachedItem{}, "dynamodbav", []string{"PK", "SK", "id", "instance_id", "name", "data", "plan_id",
			"operation_id", "reason", "state", "attempts", "failure", "failure_detail", "created_at", "updated_at",
			"outage_since", "outage_attempts", "outage_reason", "next_try_at"}},
		{sealingItem{}, "dynamodbav", []string{"PK", "SK", "sealed_only", "key_id", "since", "sensitive_plans"}},
		{campaignItem{}, "dynamodbav", []string{"PK", "SK", "id", "options", "state", "outcome", "created_at", "updated_at",
			"finished_at", "expires_at", "expires_at_epoch"}},
		{campaignInstanceItem{}, "dynamodbav", []string{"PK", "SK", "campaign_id", "instance_id", "service_id", "plan_id",
			"order", "canary", "deferred", "state", "operation_id", "lane", "attempts", "next_try", "from_version", "to_version", "description",
			"changes", "updated_at", "expires_at", "expires_at_epoch", "version"}},
	}
	for _, g := range golden {
		t.Run(fmt.Sprintf("%T has the attributes it always had", g.item), func(t *testing.T) {
			if got := itemtest.Names(g.item, g.tag); !slices.Equal(got, g.want) {
				t.Errorf("got  %q\nwant %q", got, g.want)
			}
		})
		t.Run(fmt.Sprintf("%T holds no type of the domain", g.item), func(t *testing.T) {
			if got := itemtest.DomainFields(g.item); len(got) > 0 {
				t.Errorf("fields of domain types: %q", got)
			}
		})
	}

	// The names that keys, the index, time to live and expressions use must
	// be attributes of the items they apply to.
	all := []any{instanceItem{}, bindingItem{}, operationItem{}, resourceItem{}, detachedItem{}}
	uses := []struct {
		attr  string
		items []any
	}{
		{attrPK, all},
		{attrSK, all},
		{attrInProgress, []any{operationItem{}}},
		{attrExpiresAt, []any{operationItem{}}},
		{attrOp, []any{instanceItem{}, bindingItem{}}},
		{attrState, []any{instanceItem{}, operationItem{}}},
		{attrVersion, []any{instanceItem{}, bindingItem{}}},
		{attrBindingOps, []any{instanceItem{}}},
		{attrAttempts, []any{detachedItem{}}},
		{attrData, []any{resourceItem{}, detachedItem{}}},
		{attrCredentials, []any{bindingItem{}}},
		{attrSealed, []any{bindingItem{}}},
		{attrServiceID, []any{instanceItem{}}},
		{attrPlanID, []any{instanceItem{}}},
	}
	for _, u := range uses {
		for _, item := range u.items {
			if !slices.Contains(itemtest.Names(item, "dynamodbav"), u.attr) {
				t.Errorf("%T has no attribute %q", item, u.attr)
			}
		}
	}
}

// TestSealingModeItem pins the sealing mode's item, which came after
// d3c8482: one item, PK=broker SK=sealing, written and read alike.
func TestSealingModeItem(t *testing.T) {
	mode := broker.SealingMode{SealedOnly: true, KeyID: "arn:aws:kms:eu-west-1:123456789012:key/k-1",
		Since: time.Date(2026, time.January, 2, 3, 4, 5, 6, time.UTC), SensitivePlans: []string{"plan-1", "plan-2"}}
	want := attrs{
		"PK": s("broker"), "SK": s("sealing"), "sealed_only": boolean(true),
		"key_id": s("arn:aws:kms:eu-west-1:123456789012:key/k-1"), "since": s("2026-01-02T03:04:05.000000006Z"),
		"sensitive_plans": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("plan-1"), s("plan-2")}},
	}
	got, err := encode(newSealingItem(mode))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffItems(got, want) {
		t.Error(d)
	}
	back, err := decode(want, sealingItem.mode)
	if err != nil || !reflect.DeepEqual(*back, mode) {
		t.Errorf("read back %+v %v, want %+v", back, err, mode)
	}
	// The item as written before sensitive_plans reads as no plan.
	delete(want, "sensitive_plans")
	if back, err = decode(want, sealingItem.mode); err != nil || !back.SealedOnly || back.SensitivePlans != nil {
		t.Errorf("the first format read back %+v %v", back, err)
	}
}

// TestCampaignOptionsAreStoredAsBefore: a campaign's options attribute is
// a JSON text in the words the store wrote since the fleet upgrade came
// (those of the bolt store): the store's own, not the domain's, which has
// no JSON of its own.
func TestCampaignOptionsAreStoredAsBefore(t *testing.T) {
	c := broker.Campaign{ID: "upg-1", State: broker.CampaignRunning, Options: broker.CampaignOptions{
		PlanIDs: []string{"plan-1"}, All: true, Canaries: 2, CanaryOrgs: []string{"org-1"}, CanarySpaces: []string{"space-1"},
		MaxInFlight: 3, MaxFailures: 4, DryRun: true, Skip: []string{"i-1"}, Defer: []string{"i-2", "i-3"}}}
	const stored = `{"plan_ids":["plan-1"],"all":true,"canaries":2,"canary_orgs":["org-1"],"canary_spaces":["space-1"],"max_in_flight":3,"max_failures":4,"dry_run":true,"skip":["i-1"],"defer":["i-2","i-3"]}`
	it, err := newCampaignItem(c, "campaign#upg-1", skCampaign)
	if err != nil || string(it.Options) != stored {
		t.Fatalf("options written as %s (%v), want %s", it.Options, err, stored)
	}
	got, err := campaignItem{ID: "upg-1", Options: stored, State: "running"}.campaign()
	if err != nil || !reflect.DeepEqual(got.Options, c.Options) {
		t.Fatalf("options read as %+v (%v), want %+v", got.Options, err, c.Options)
	}
	t.Run("a campaign stored before instances could be skipped or deferred", func(t *testing.T) {
		const before = `{"plan_ids":["plan-1"],"canaries":2,"max_in_flight":3,"max_failures":4}`
		got, err := campaignItem{ID: "upg-0", Options: before, State: "finished"}.campaign()
		want := broker.CampaignOptions{PlanIDs: []string{"plan-1"}, Canaries: 2, MaxInFlight: 3, MaxFailures: 4}
		if err != nil || !reflect.DeepEqual(got.Options, want) {
			t.Fatalf("options read as %+v (%v), want %+v", got.Options, err, want)
		}
	})
	t.Run("the options of a campaign that sets only what it must", func(t *testing.T) {
		it, err := newCampaignItem(broker.Campaign{ID: "upg-2", Options: broker.CampaignOptions{MaxInFlight: 1, MaxFailures: 1}}, "campaign#upg-2", skCampaign)
		if want := `{"max_in_flight":1,"max_failures":1}`; err != nil || string(it.Options) != want {
			t.Fatalf("options written as %s (%v), want %s", it.Options, err, want)
		}
	})
}

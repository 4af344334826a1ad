// Package itemtest holds domain values for the stores' format tests: every
// kind of item, once with every field the domain had at commit d3c8482 set
// and once with as few as can be, so that each store can pin the form it
// stores them in, and read the items it stored then, without restating the
// values. It also lists the names a storage type gives its fields, for the
// stores' golden lists.
//
// Each value is what a store reads back after writing it: times in UTC, raw
// JSON compact, numbers inside maps as float64 (as encoding/json decodes
// them), a resource's missing data as the JSON null.
//
// The stores' TestStoredItems pair these values with the items stored at
// d3c8482, so a field added to the domain since is left zero here (those
// items do not have it): new fields round-trip in the contract suite
// (internal/store/storetest), and their names join the golden lists.
package itemtest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// Case is one domain value: a broker.Instance, Binding, Operation, Resource
// or Detached.
type Case struct {
	Name  string
	Value any
}

// t0 has nanoseconds, so that a store losing precision fails.
var t0 = time.Date(2025, time.March, 1, 12, 0, 0, 123456789, time.UTC)

// Cases returns fresh values on each call, so a test may change them.
func Cases() []Case {
	no, yes := false, true
	return []Case{
		{"instance with every field", broker.Instance{
			ID: "i-1", InstanceRequest: broker.InstanceRequest{ServiceID: "svc-1", PlanID: "plan-1", OrganizationGUID: "org-1", SpaceGUID: "space-1", Parameters:
			// Key order, a number DynamoDB could not hold and HTML
			// characters must all come back as they were.
			json.RawMessage(`{"z":1,"a":[1,2.50],"big":123456789012345678901234567890123456789012,"html":"<a&b>"}`), Context: json.RawMessage(`{"platform":"cloudfoundry","z":{"y":null}}`), MaintenanceInfo: &broker.MaintenanceInfo{Version: "1.2.0", Description: "first"}}, PlanDigest: "sha256:d1", DashboardURL: "https://dashboard.example.com/i-1?a=1&b=<2>",
			Metadata: broker.InstanceMetadata{
				Labels:     map[string]any{"team": "blue", "empty": "", "none": nil},
				Attributes: map[string]any{"weight": 1.5, "count": 3.0, "on": true, "list": []any{"a", 2.0, false}, "nested": map[string]any{"k": "v"}},
			},
			State: broker.InstanceUpdating, Op: "op-2", LastOp: "op-2", BindingOps: 2, Fingerprint: "fp-i-1", Version: 7,
			CreatedAt: t0, UpdatedAt: t0.Add(time.Minute),
		}},
		{"instance with few fields", broker.Instance{ID: "i-2", State: broker.InstanceReady}},
		{"binding with every field", broker.Binding{
			InstanceID: "i-1", ID: "b-1", BindingRequest: broker.BindingRequest{ServiceID: "svc-1", PlanID: "plan-1", AppGUID: "app-1",
				BindResource:  json.RawMessage(`{"app_guid":"app-1","route":"r"}`),
				Parameters:    json.RawMessage(`{"role":"reader","n":10}`),
				Context:       json.RawMessage(`{"platform":"cloudfoundry"}`),
				PredecessorID: "b-0"},
			State:       broker.BindingReady,
			Credentials: broker.Credentials{"user": "u", "port": 5432.0, "tls": true, "hosts": []any{"a", "b"}, "extra": map[string]any{"x": nil}},
			Endpoints: []broker.Endpoint{
				{Host: "db.example.com", Ports: []string{"5432", "5433"}, Protocol: "tcp"},
				{Host: "other.example.com", Ports: []string{}},
				{Host: "third.example.com"},
			},
			Sealed:    json.RawMessage(`{"alg":"A256GCM","ct":"Y3Q=","ctx":"Y3R4","kec":{"instance_id":"i-1"},"kid":"k-1","nonce":"bm9uY2U=","v":1}`),
			ExpiresAt: t0.Add(24 * time.Hour), RenewBefore: t0.Add(12 * time.Hour),
			Op: "op-3", LastOp: "op-3", Fingerprint: "fp-b-1", Version: 3,
			CreatedAt: t0, UpdatedAt: t0.Add(time.Second),
		}},
		{"binding with few fields", broker.Binding{InstanceID: "i-1", ID: "b-2", State: broker.BindingCreating}},
		{"operation in progress with every field", broker.Operation{
			ID: "op-2", InstanceID: "i-1", BindingID: "b-1", Kind: broker.KindUpdate, State: broker.OperationInProgress,
			Description: "updating <plan>", Fingerprint: "fp-op-2", Async: true, PlanID: "plan-1",
			Target: &broker.Target{
				PlanID:          "plan-2",
				Parameters:      json.RawMessage(`{"z":1,"a":2,"html":"<&>"}`),
				Context:         json.RawMessage(`{"platform":"kubernetes"}`),
				MaintenanceInfo: &broker.MaintenanceInfo{Version: "2.0.0"},
				PlanDigest:      "sha256:d2",
			},
			RetryAfter: 5 * time.Second, InstanceUsable: &no, UpdateRepeatable: &yes,
			CreatedAt: t0, UpdatedAt: t0.Add(time.Second), NextCheckAt: t0.Add(30 * time.Second),
		}},
		{"finished operation", broker.Operation{
			ID: "op-1", InstanceID: "i-1", Kind: broker.KindProvision, State: broker.OperationSucceeded,
			Fingerprint: "fp-op-1", PlanID: "plan-1",
			CreatedAt: t0, UpdatedAt: t0.Add(time.Minute), NextCheckAt: t0.Add(time.Minute),
			FinishedAt: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Minute + broker.Retention),
		}},
		{"finished operation without expiry", broker.Operation{
			ID: "op-0", InstanceID: "i-1", Kind: broker.KindBind, State: broker.OperationFailed, FinishedAt: t0,
		}},
		{"failed operation with an operator's detail", broker.Operation{
			ID: "op-3", InstanceID: "i-1", Kind: broker.KindProvision, State: broker.OperationFailed,
			Description: "The S3 Bucket \"Bucket\" could not be created: the broker's service role lacks a permission.",
			Detail:      `Bucket (AWS::S3::Bucket) CREATE_FAILED: User: arn:aws:sts::123456789012:assumed-role/cfn is not authorized to perform: s3:CreateBucket <&>`,
			Fingerprint: "fp-op-3", Async: true, PlanID: "plan-1",
			CreatedAt: t0, UpdatedAt: t0.Add(time.Minute), NextCheckAt: t0.Add(time.Minute),
			FinishedAt: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Minute + broker.Retention),
		}},
		{"resource", broker.Resource{InstanceID: "i-1", Name: "db", Data: json.RawMessage(`{"b":1,"a":"<x>"}`), UpdatedAt: t0}},
		{"resource without data", broker.Resource{InstanceID: "i-1", Name: "empty", Data: json.RawMessage(`null`)}},
		{"detached resource", broker.Detached{
			ID: "d-1", InstanceID: "i-1", Name: "old", Data: json.RawMessage(`[3,2,1]`), PlanID: "plan-1",
			OperationID: "op-2", Reason: "update failed", State: broker.DetachedFailed, Attempts: 2,
			Failure: "gave up", CreatedAt: t0, UpdatedAt: t0.Add(time.Hour),
		}},
		{"detached resource with a cleanup failure's detail", broker.Detached{
			ID: "d-2", InstanceID: "i-1", Name: "stack", Data: json.RawMessage(`{"stack":"osb-i-1"}`), PlanID: "plan-1",
			OperationID: "op-3", Reason: "provision failed", State: broker.DetachedFailed, Attempts: 3,
			Failure:       "The stack osb-i-1 could not be deleted (tried 3 times).",
			FailureDetail: "Bucket (AWS::S3::Bucket): The bucket you tried to delete is not empty <&>",
			CreatedAt:     t0, UpdatedAt: t0.Add(time.Hour),
		}},
	}
}

// Names lists the names that the tag key (json, dynamodbav) gives the
// fields of v's struct type, in field order; a field of struct type (or a
// pointer to, or slice of, one) other than time.Time adds its own names as
// "name.field". A field without the tag, or tagged "-", is listed as
// "!Field": a storage type names every field it stores.
func Names(v any, key string) []string {
	return names(reflect.TypeOf(v), key, "")
}

func names(t reflect.Type, key, prefix string) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get(key), ",")
		if name == "" || name == "-" {
			out = append(out, prefix+"!"+f.Name)
			continue
		}
		out = append(out, prefix+name)
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() {
			out = append(out, names(ft, key, prefix+name+".")...)
		}
	}
	return out
}

// DomainFields lists the fields of v's struct type, nested ones included,
// whose type (or element type) is declared in package broker: a storage
// type holding one would store it under the domain's json tags.
func DomainFields(v any) []string {
	return domainFields(reflect.TypeOf(v), "")
}

func domainFields(t reflect.Type, prefix string) []string {
	domain := reflect.TypeFor[broker.Instance]().PkgPath()
	var out []string
	for f := range t.Fields() {
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map {
			ft = ft.Elem()
		}
		switch {
		case ft.PkgPath() == domain:
			out = append(out, prefix+f.Name+" ("+ft.String()+")")
		case ft.Kind() == reflect.Struct:
			out = append(out, domainFields(ft, prefix+f.Name+".")...)
		}
	}
	return out
}

// Diff lists the fields in which two values of the same struct type
// differ, raw JSON shown as text.
func Diff(got, want any) []string {
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	if g.Type() != w.Type() || g.Kind() != reflect.Struct {
		return []string{fmt.Sprintf("got a %T, want a %T", got, want)}
	}
	var diffs []string
	for i := range g.NumField() {
		gf, wf := g.Field(i).Interface(), w.Field(i).Interface()
		if !reflect.DeepEqual(gf, wf) {
			diffs = append(diffs, fmt.Sprintf("%s: got %s, want %s", g.Type().Field(i).Name, show(gf), show(wf)))
		}
	}
	return diffs
}

func show(v any) string {
	switch v := v.(type) {
	case json.RawMessage:
		if v == nil {
			return "nil"
		}
		return fmt.Sprintf("%q", v)
	case *broker.Target:
		if v != nil {
			return fmt.Sprintf("&%+v (parameters %q, context %q)", *v, v.Parameters, v.Context)
		}
	}
	return fmt.Sprintf("%#v", v)
}

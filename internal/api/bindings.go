package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/jsonenc"
)

// bindBody is the request body of bind.
type bindBody struct {
	ServiceID            *string         `json:"service_id"`
	PlanID               *string         `json:"plan_id"`
	AppGUID              *string         `json:"app_guid"`
	BindResource         json.RawMessage `json:"bind_resource"`
	Parameters           json.RawMessage `json:"parameters"`
	Context              json.RawMessage `json:"context"`
	PredecessorBindingID *string         `json:"predecessor_binding_id"`
}

// decodeBind reads PUT /v2/service_instances/:instance_id/service_bindings/:binding_id (bind).
func decodeBind(r *http.Request) (broker.BindDetails, error) {
	var body bindBody
	req, err := readRequest(r, nil, nil, &body)
	if err != nil {
		return broker.BindDetails{}, err
	}
	if err := checkFields(field{"service_id", body.ServiceID, true}, field{"plan_id", body.PlanID, true},
		field{"app_guid", body.AppGUID, false}, field{"predecessor_binding_id", body.PredecessorBindingID, false}); err != nil {
		return broker.BindDetails{}, err
	}
	d := broker.BindDetails{InstanceID: req.instanceID, BindingID: req.bindingID,
		BindingRequest: broker.BindingRequest{ServiceID: *body.ServiceID, PlanID: *body.PlanID}, AcceptsIncomplete: req.acceptsIncomplete}
	if body.PredecessorBindingID != nil {
		d.PredecessorID = *body.PredecessorBindingID
	}
	if d.BindResource, err = asObject("bind_resource", body.BindResource); err != nil {
		return d, err
	}
	if d.Parameters, err = asObject("parameters", body.Parameters); err != nil {
		return d, err
	}
	if d.Context, err = asObject("context", body.Context); err != nil {
		return d, err
	}
	// app_guid at the top level is deprecated in favour of bind_resource.app_guid.
	if body.AppGUID != nil {
		d.AppGUID = *body.AppGUID
	}
	if d.BindResource != nil {
		var br bindResourceBody
		if !br.readFast(d.BindResource) && json.Unmarshal(d.BindResource, &br) != nil {
			return d, badRequest("The field \"bind_resource\" is malformed: app_guid and route must be strings.")
		}
		if err := checkFields(field{"bind_resource.app_guid", br.AppGUID, false}, field{"bind_resource.route", br.Route, false}); err != nil {
			return d, err
		}
		if br.AppGUID != nil && d.AppGUID == "" {
			d.AppGUID = *br.AppGUID
		}
	}
	return d, nil
}

// bindingBody is the 200/201/202 body of bind. A 202 carries only the
// operation: never credentials.
type bindingBody struct {
	Metadata    *bindingMetadataBody `json:"metadata,omitempty"`
	Credentials broker.Credentials   `json:"credentials,omitempty"`
	Endpoints   []endpointBody       `json:"endpoints,omitempty"`
	Operation   string               `json:"operation,omitempty"`
}

// bindingMetadataBody is a binding's OSB metadata: when its credentials
// expire and when to renew them (rotate the binding).
type bindingMetadataBody struct {
	ExpiresAt   string `json:"expires_at,omitempty"`
	RenewBefore string `json:"renew_before,omitempty"`
}

// metadataLayout spells a time as the spec's examples do, before a "Z".
const metadataLayout = "2006-01-02T15:04:05.0"

// bindingMetadata is the metadata of credentials that expire at expires
// and are to be renewed before renew, as the spec spells times; nil when
// they do not expire.
func bindingMetadata(expires, renew time.Time) *bindingMetadataBody {
	if expires.IsZero() {
		return nil
	}
	spell := func(t time.Time) string { return t.UTC().Format(metadataLayout) + "Z" }
	return &bindingMetadataBody{ExpiresAt: spell(expires), RenewBefore: spell(renew)}
}

// endpointBody is OSB's endpoint object of a binding.
type endpointBody struct {
	Host     string   `json:"host"`
	Ports    []string `json:"ports"`
	Protocol string   `json:"protocol,omitempty"`
}

func endpoints(es []broker.Endpoint) []endpointBody {
	if es == nil {
		return nil
	}
	out := make([]endpointBody, len(es))
	for i, e := range es {
		out[i] = endpointBody{Host: e.Host, Ports: e.Ports, Protocol: e.Protocol}
	}
	return out
}

func encodeBind(res broker.BindResult, _ http.Header) (int, any) {
	body := bindingBody{Operation: res.Operation}
	if res.Result != broker.ResultAccepted {
		body.Credentials, body.Endpoints = res.Credentials, endpoints(res.Endpoints)
		return statusOf(res.Result), body.encode(res.ExpiresAt, res.RenewBefore)
	}
	return statusOf(res.Result), body.encode(time.Time{}, time.Time{})
}

// encode is json.Marshal(b), with b's Metadata the bindingMetadata of
// expires and renew, byte for byte, written directly: through reflection
// the credentials' map and the metadata cost a bind a dozen allocations.
// What jsonenc cannot write (a value not decoded from JSON) is left to
// writeJSON's json.Marshal, as before.
func (b bindingBody) encode(expires, renew time.Time) any {
	fallback := func() any {
		b.Metadata = bindingMetadata(expires, renew)
		return b
	}
	out := make([]byte, 0, 256)
	out = append(out, '{')
	if !expires.IsZero() {
		// The layout's characters and a year's digits and sign need no
		// escape.
		out = append(out, `"metadata":{"expires_at":"`...)
		out = append(expires.UTC().AppendFormat(out, metadataLayout), `Z","renew_before":"`...)
		out = append(renew.UTC().AppendFormat(out, metadataLayout), `Z"}`...)
	}
	if len(b.Credentials) > 0 {
		if len(out) > 1 {
			out = append(out, ',')
		}
		var err error
		if out, err = jsonenc.AppendValue(append(out, `"credentials":`...), map[string]any(b.Credentials)); err != nil {
			return fallback()
		}
	}
	if len(b.Endpoints) > 0 {
		e, err := json.Marshal(b.Endpoints)
		if err != nil {
			return fallback()
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(out, `"endpoints":`...), e...)
	}
	if b.Operation != "" {
		if len(out) > 1 {
			out = append(out, ',')
		}
		var err error
		if out, err = jsonenc.AppendValue(append(out, `"operation":`...), b.Operation); err != nil {
			return fallback()
		}
	}
	return json.RawMessage(append(out, '}'))
}

// decodeUnbind reads DELETE /v2/service_instances/:instance_id/service_bindings/:binding_id (unbind).
func decodeUnbind(r *http.Request) (broker.UnbindDetails, error) {
	req, err := readRequest(r, []string{"service_id", "plan_id"}, nil, nil)
	if err != nil {
		return broker.UnbindDetails{}, err
	}
	return broker.UnbindDetails{InstanceID: req.instanceID, BindingID: req.bindingID, ServiceID: req.values["service_id"],
		PlanID: req.values["plan_id"], AcceptsIncomplete: req.acceptsIncomplete}, nil
}

func encodeUnbind(res broker.UnbindResult, header http.Header) (int, any) {
	return encodeDeprovision(broker.DeprovisionResult(res), header)
}

// decodeFetchBinding reads GET /v2/service_instances/:instance_id/service_bindings/:binding_id
// (fetch binding).
func decodeFetchBinding(r *http.Request) (broker.FetchBindingDetails, error) {
	req, err := readRequest(r, nil, []string{"service_id", "plan_id"}, nil)
	if err != nil {
		return broker.FetchBindingDetails{}, err
	}
	return broker.FetchBindingDetails{InstanceID: req.instanceID, BindingID: req.bindingID,
		ServiceID: req.values["service_id"], PlanID: req.values["plan_id"]}, nil
}

// fetchedBindingBody is the 200 body of fetch binding.
type fetchedBindingBody struct {
	Metadata    *bindingMetadataBody `json:"metadata,omitempty"`
	Credentials broker.Credentials   `json:"credentials,omitempty"`
	Endpoints   []endpointBody       `json:"endpoints,omitempty"`
	Parameters  json.RawMessage      `json:"parameters,omitempty"`
}

func encodeFetchBinding(b broker.Binding, _ http.Header) (int, any) {
	return http.StatusOK, fetchedBindingBody{Metadata: bindingMetadata(b.ExpiresAt, b.RenewBefore),
		Credentials: b.Credentials, Endpoints: endpoints(b.Endpoints), Parameters: b.Parameters}
}

package api

import (
	"encoding/json"
	"net/http"

	"github.com/serverless-osb/broker/internal/broker"
)

type bindBody struct {
	ServiceID            *string         `json:"service_id"`
	PlanID               *string         `json:"plan_id"`
	AppGUID              *string         `json:"app_guid"`
	BindResource         json.RawMessage `json:"bind_resource"`
	Parameters           json.RawMessage `json:"parameters"`
	Context              json.RawMessage `json:"context"`
	PredecessorBindingID *string         `json:"predecessor_binding_id"`
}

// bindingBody is the 200/201/202 body of bind. A 202 carries only the
// operation: never credentials.
type bindingBody struct {
	Metadata    *broker.BindingMetadata `json:"metadata,omitempty"`
	Credentials broker.Credentials      `json:"credentials,omitempty"`
	Endpoints   []broker.Endpoint       `json:"endpoints,omitempty"`
	Operation   string                  `json:"operation,omitempty"`
}

// bind handles PUT /v2/service_instances/:instance_id/service_bindings/:binding_id.
func (h *handlers) bind(w http.ResponseWriter, r *http.Request) {
	d, err := h.bindDetails(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	res, err := h.broker.Bind(logIDs(r, d.InstanceID, d.BindingID).Context(), d)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	body := bindingBody{Operation: res.Operation}
	if res.Result != broker.ResultAccepted {
		body.Credentials, body.Endpoints = res.Credentials, res.Endpoints
		body.Metadata = broker.NewBindingMetadata(res.ExpiresAt, res.RenewBefore)
	}
	h.writeJSON(w, r, statusOf(res.Result), body)
}

func (h *handlers) bindDetails(w http.ResponseWriter, r *http.Request) (broker.BindDetails, error) {
	instanceID, bindingID, err := pathIDs(r)
	if err != nil {
		return broker.BindDetails{}, err
	}
	q, err := parseQuery(r, nil, nil)
	if err != nil {
		return broker.BindDetails{}, err
	}
	var body bindBody
	if err := decodeBody(w, r, &body); err != nil {
		return broker.BindDetails{}, err
	}
	if err := checkFields(field{"service_id", body.ServiceID, true}, field{"plan_id", body.PlanID, true},
		field{"app_guid", body.AppGUID, false}, field{"predecessor_binding_id", body.PredecessorBindingID, false}); err != nil {
		return broker.BindDetails{}, err
	}
	d := broker.BindDetails{InstanceID: instanceID, BindingID: bindingID, ServiceID: *body.ServiceID,
		PlanID: *body.PlanID, AcceptsIncomplete: q.acceptsIncomplete}
	if body.PredecessorBindingID != nil {
		d.PredecessorBindingID = *body.PredecessorBindingID
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
		var br struct {
			AppGUID *string `json:"app_guid"`
			Route   *string `json:"route"`
		}
		if err := json.Unmarshal(d.BindResource, &br); err != nil {
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

// unbind handles DELETE /v2/service_instances/:instance_id/service_bindings/:binding_id.
func (h *handlers) unbind(w http.ResponseWriter, r *http.Request) {
	instanceID, bindingID, err := pathIDs(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	q, err := parseQuery(r, []string{"service_id", "plan_id"}, nil)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	res, err := h.broker.Unbind(logIDs(r, instanceID, bindingID).Context(), broker.UnbindDetails{
		InstanceID: instanceID, BindingID: bindingID, ServiceID: q.values["service_id"], PlanID: q.values["plan_id"],
		AcceptsIncomplete: q.acceptsIncomplete,
	})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeJSON(w, r, statusOf(res.Result), operationBody{Operation: res.Operation})
}

// fetchBinding handles GET /v2/service_instances/:instance_id/service_bindings/:binding_id.
func (h *handlers) fetchBinding(w http.ResponseWriter, r *http.Request) {
	instanceID, bindingID, err := pathIDs(r)
	if err == nil {
		_, err = parseQuery(r, nil, []string{"service_id", "plan_id"})
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	b, err := h.broker.FetchBinding(logIDs(r, instanceID, bindingID).Context(), instanceID, bindingID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeJSON(w, r, http.StatusOK, b)
}

// lastBindingOperation handles
// GET /v2/service_instances/:instance_id/service_bindings/:binding_id/last_operation.
func (h *handlers) lastBindingOperation(w http.ResponseWriter, r *http.Request) {
	h.answerLastOperation(w, r, h.broker.LastBindingOperation)
}

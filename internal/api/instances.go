package api

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

type provisionBody struct {
	ServiceID        *string          `json:"service_id"`
	PlanID           *string          `json:"plan_id"`
	OrganizationGUID *string          `json:"organization_guid"`
	SpaceGUID        *string          `json:"space_guid"`
	Parameters       json.RawMessage  `json:"parameters"`
	Context          json.RawMessage  `json:"context"`
	MaintenanceInfo  *maintenanceInfo `json:"maintenance_info"`
}

// instanceBody is the 200/201/202 body of provision and update.
type instanceBody struct {
	DashboardURL string                   `json:"dashboard_url,omitempty"`
	Operation    string                   `json:"operation,omitempty"`
	Metadata     *broker.InstanceMetadata `json:"metadata,omitempty"`
}

func metadata(m broker.InstanceMetadata) *broker.InstanceMetadata {
	if len(m.Labels) == 0 && len(m.Attributes) == 0 {
		return nil
	}
	return &m
}

// provision handles PUT /v2/service_instances/:instance_id.
func (h *handlers) provision(w http.ResponseWriter, r *http.Request) {
	d, err := h.provisionDetails(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	res, err := h.broker.Provision(logIDs(r, d.InstanceID, "").Context(), d)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeJSON(w, r, statusOf(res.Result), instanceBody{DashboardURL: res.DashboardURL,
		Operation: res.Operation, Metadata: metadata(res.Metadata)})
}

func (h *handlers) provisionDetails(w http.ResponseWriter, r *http.Request) (broker.ProvisionDetails, error) {
	instanceID, _, err := pathIDs(r)
	if err != nil {
		return broker.ProvisionDetails{}, err
	}
	q, err := parseQuery(r, nil, nil)
	if err != nil {
		return broker.ProvisionDetails{}, err
	}
	var body provisionBody
	if err := decodeBody(w, r, &body); err != nil {
		return broker.ProvisionDetails{}, err
	}
	if err := checkFields(
		field{"service_id", body.ServiceID, true}, field{"plan_id", body.PlanID, true},
		field{"organization_guid", body.OrganizationGUID, true}, field{"space_guid", body.SpaceGUID, true},
	); err != nil {
		return broker.ProvisionDetails{}, err
	}
	d := broker.ProvisionDetails{InstanceID: instanceID, ServiceID: *body.ServiceID, PlanID: *body.PlanID,
		OrganizationGUID: *body.OrganizationGUID, SpaceGUID: *body.SpaceGUID, AcceptsIncomplete: q.acceptsIncomplete}
	if d.Parameters, err = asObject("parameters", body.Parameters); err != nil {
		return d, err
	}
	if d.Context, err = asObject("context", body.Context); err != nil {
		return d, err
	}
	d.MaintenanceInfo, err = body.MaintenanceInfo.domain()
	return d, err
}

type updateBody struct {
	ServiceID       *string          `json:"service_id"`
	PlanID          *string          `json:"plan_id"`
	Parameters      json.RawMessage  `json:"parameters"`
	Context         json.RawMessage  `json:"context"`
	MaintenanceInfo *maintenanceInfo `json:"maintenance_info"`
	PreviousValues  json.RawMessage  `json:"previous_values"`
}

// update handles PATCH /v2/service_instances/:instance_id.
func (h *handlers) update(w http.ResponseWriter, r *http.Request) {
	d, err := h.updateDetails(w, r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	res, err := h.broker.Update(logIDs(r, d.InstanceID, "").Context(), d)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeJSON(w, r, statusOf(res.Result), instanceBody{DashboardURL: res.DashboardURL,
		Operation: res.Operation, Metadata: metadata(res.Metadata)})
}

func (h *handlers) updateDetails(w http.ResponseWriter, r *http.Request) (broker.UpdateDetails, error) {
	instanceID, _, err := pathIDs(r)
	if err != nil {
		return broker.UpdateDetails{}, err
	}
	q, err := parseQuery(r, nil, nil)
	if err != nil {
		return broker.UpdateDetails{}, err
	}
	var body updateBody
	if err := decodeBody(w, r, &body); err != nil {
		return broker.UpdateDetails{}, err
	}
	if err := checkFields(field{"service_id", body.ServiceID, true}, field{"plan_id", body.PlanID, false}); err != nil {
		return broker.UpdateDetails{}, err
	}
	if _, err := asObject("previous_values", body.PreviousValues); err != nil {
		return broker.UpdateDetails{}, err
	}
	d := broker.UpdateDetails{InstanceID: instanceID, ServiceID: *body.ServiceID, AcceptsIncomplete: q.acceptsIncomplete}
	if body.PlanID != nil {
		d.PlanID = *body.PlanID
	}
	if d.Parameters, err = asObject("parameters", body.Parameters); err != nil {
		return d, err
	}
	if d.Context, err = asObject("context", body.Context); err != nil {
		return d, err
	}
	d.MaintenanceInfo, err = body.MaintenanceInfo.domain()
	return d, err
}

// operationBody is the 200/202 body of the deletes.
type operationBody struct {
	Operation string `json:"operation,omitempty"`
}

// deprovision handles DELETE /v2/service_instances/:instance_id.
func (h *handlers) deprovision(w http.ResponseWriter, r *http.Request) {
	instanceID, _, err := pathIDs(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	q, err := parseQuery(r, []string{"service_id", "plan_id"}, nil)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	res, err := h.broker.Deprovision(logIDs(r, instanceID, "").Context(), broker.DeprovisionDetails{
		InstanceID: instanceID, ServiceID: q.values["service_id"], PlanID: q.values["plan_id"],
		AcceptsIncomplete: q.acceptsIncomplete,
	})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeJSON(w, r, statusOf(res.Result), operationBody{Operation: res.Operation})
}

// fetchInstance handles GET /v2/service_instances/:instance_id.
func (h *handlers) fetchInstance(w http.ResponseWriter, r *http.Request) {
	instanceID, _, err := pathIDs(r)
	if err == nil {
		_, err = parseQuery(r, nil, []string{"service_id", "plan_id"})
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	inst, err := h.broker.FetchInstance(logIDs(r, instanceID, "").Context(), instanceID)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.writeJSON(w, r, http.StatusOK, inst)
}

// lastOperationBody is the body of both last_operation endpoints.
type lastOperationBody struct {
	State            broker.OperationState `json:"state"`
	Description      string                `json:"description,omitempty"`
	InstanceUsable   *bool                 `json:"instance_usable,omitempty"`
	UpdateRepeatable *bool                 `json:"update_repeatable,omitempty"`
}

// lastOperation handles GET /v2/service_instances/:instance_id/last_operation.
func (h *handlers) lastOperation(w http.ResponseWriter, r *http.Request) {
	h.answerLastOperation(w, r, h.broker.LastOperation)
}

func (h *handlers) answerLastOperation(w http.ResponseWriter, r *http.Request,
	get func(ctx context.Context, d broker.LastOperationDetails) (broker.LastOperation, error)) {
	instanceID, bindingID, err := pathIDs(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	q, err := parseQuery(r, nil, []string{"service_id", "plan_id", "operation"})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	r = logIDs(r, instanceID, bindingID)
	lo, err := get(r.Context(), broker.LastOperationDetails{InstanceID: instanceID, BindingID: bindingID, OperationID: q.values["operation"]})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if lo.State == broker.OperationInProgress {
		w.Header().Set("Retry-After", retryAfter(lo.RetryAfter))
	}
	h.writeJSON(w, r, http.StatusOK, lastOperationBody{State: lo.State, Description: lo.Description,
		InstanceUsable: lo.InstanceUsable, UpdateRepeatable: lo.UpdateRepeatable})
}

// retryAfter renders a duration as Retry-After seconds (at least 1).
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

func statusOf(r broker.Result) int {
	switch r {
	case broker.ResultCreated:
		return http.StatusCreated
	case broker.ResultAccepted:
		return http.StatusAccepted
	}
	return http.StatusOK
}

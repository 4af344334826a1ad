package api

import (
	"encoding/json"
	"net/http"

	"github.com/serverless-osb/broker/internal/broker"
)

// provisionBody is the request body of provision.
type provisionBody struct {
	ServiceID        *string          `json:"service_id"`
	PlanID           *string          `json:"plan_id"`
	OrganizationGUID *string          `json:"organization_guid"`
	SpaceGUID        *string          `json:"space_guid"`
	Parameters       json.RawMessage  `json:"parameters"`
	Context          json.RawMessage  `json:"context"`
	MaintenanceInfo  *maintenanceInfo `json:"maintenance_info"`
}

// decodeProvision reads PUT /v2/service_instances/:instance_id (provision).
func decodeProvision(r *http.Request) (broker.ProvisionDetails, error) {
	var body provisionBody
	req, err := readRequest(r, nil, nil, &body)
	if err != nil {
		return broker.ProvisionDetails{}, err
	}
	if err := checkFields(
		field{"service_id", body.ServiceID, true}, field{"plan_id", body.PlanID, true},
		field{"organization_guid", body.OrganizationGUID, true}, field{"space_guid", body.SpaceGUID, true},
	); err != nil {
		return broker.ProvisionDetails{}, err
	}
	d := broker.ProvisionDetails{InstanceID: req.instanceID, AcceptsIncomplete: req.acceptsIncomplete,
		InstanceRequest: broker.InstanceRequest{ServiceID: *body.ServiceID, PlanID: *body.PlanID,
			OrganizationGUID: *body.OrganizationGUID, SpaceGUID: *body.SpaceGUID}}
	d.Parameters, d.Context, d.MaintenanceInfo, err = instanceAttributes(body.Parameters, body.Context, body.MaintenanceInfo)
	return d, err
}

// instanceAttributes checks the attributes provision and update share:
// parameters and context, when present, are JSON objects; maintenance_info
// has a version.
func instanceAttributes(parameters, context json.RawMessage, mi *maintenanceInfo) (
	json.RawMessage, json.RawMessage, *broker.MaintenanceInfo, error) {
	parameters, err := asObject("parameters", parameters)
	if err != nil {
		return nil, nil, nil, err
	}
	if context, err = asObject("context", context); err != nil {
		return nil, nil, nil, err
	}
	m, err := mi.domain()
	return parameters, context, m, err
}

// instanceBody is the 200/201/202 body of provision and update.
type instanceBody struct {
	DashboardURL string                `json:"dashboard_url,omitempty"`
	Operation    string                `json:"operation,omitempty"`
	Metadata     *instanceMetadataBody `json:"metadata,omitempty"`
}

// instanceMetadataBody is OSB's service instance metadata object.
type instanceMetadataBody struct {
	Labels     map[string]any `json:"labels,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

func instanceMetadata(m broker.InstanceMetadata) instanceMetadataBody {
	return instanceMetadataBody{Labels: m.Labels, Attributes: m.Attributes}
}

func encodeProvision(res broker.ProvisionResult, _ http.Header) (int, any) {
	body := instanceBody{DashboardURL: res.DashboardURL, Operation: res.Operation}
	if len(res.Metadata.Labels) > 0 || len(res.Metadata.Attributes) > 0 {
		m := instanceMetadata(res.Metadata)
		body.Metadata = &m
	}
	return statusOf(res.Result), body
}

// updateBody is the request body of update.
type updateBody struct {
	ServiceID       *string          `json:"service_id"`
	PlanID          *string          `json:"plan_id"`
	Parameters      json.RawMessage  `json:"parameters"`
	Context         json.RawMessage  `json:"context"`
	MaintenanceInfo *maintenanceInfo `json:"maintenance_info"`
	PreviousValues  json.RawMessage  `json:"previous_values"`
}

// decodeUpdate reads PATCH /v2/service_instances/:instance_id (update).
// previous_values is checked, not passed on: the broker knows the instance.
func decodeUpdate(r *http.Request) (broker.UpdateDetails, error) {
	var body updateBody
	req, err := readRequest(r, nil, nil, &body)
	if err != nil {
		return broker.UpdateDetails{}, err
	}
	if err := checkFields(field{"service_id", body.ServiceID, true}, field{"plan_id", body.PlanID, false}); err != nil {
		return broker.UpdateDetails{}, err
	}
	if _, err := asObject("previous_values", body.PreviousValues); err != nil {
		return broker.UpdateDetails{}, err
	}
	d := broker.UpdateDetails{InstanceID: req.instanceID, ServiceID: *body.ServiceID, AcceptsIncomplete: req.acceptsIncomplete}
	if body.PlanID != nil {
		d.PlanID = *body.PlanID
	}
	d.Parameters, d.Context, d.MaintenanceInfo, err = instanceAttributes(body.Parameters, body.Context, body.MaintenanceInfo)
	return d, err
}

func encodeUpdate(res broker.UpdateResult, header http.Header) (int, any) {
	return encodeProvision(broker.ProvisionResult(res), header)
}

// decodeDeprovision reads DELETE /v2/service_instances/:instance_id (deprovision).
func decodeDeprovision(r *http.Request) (broker.DeprovisionDetails, error) {
	req, err := readRequest(r, []string{"service_id", "plan_id"}, nil, nil)
	if err != nil {
		return broker.DeprovisionDetails{}, err
	}
	return broker.DeprovisionDetails{InstanceID: req.instanceID, ServiceID: req.values["service_id"],
		PlanID: req.values["plan_id"], AcceptsIncomplete: req.acceptsIncomplete}, nil
}

// operationBody is the 200/202 body of the deletes.
type operationBody struct {
	Operation string `json:"operation,omitempty"`
}

func encodeDeprovision(res broker.DeprovisionResult, _ http.Header) (int, any) {
	return statusOf(res.Result), operationBody{Operation: res.Operation}
}

// decodeFetchInstance reads GET /v2/service_instances/:instance_id (fetch
// instance).
func decodeFetchInstance(r *http.Request) (broker.FetchInstanceDetails, error) {
	req, err := readRequest(r, nil, []string{"service_id", "plan_id"}, nil)
	if err != nil {
		return broker.FetchInstanceDetails{}, err
	}
	return broker.FetchInstanceDetails{InstanceID: req.instanceID,
		ServiceID: req.values["service_id"], PlanID: req.values["plan_id"]}, nil
}

// fetchedInstanceBody is the 200 body of fetch instance.
type fetchedInstanceBody struct {
	ServiceID       string               `json:"service_id"`
	PlanID          string               `json:"plan_id"`
	DashboardURL    string               `json:"dashboard_url,omitempty"`
	Parameters      json.RawMessage      `json:"parameters,omitempty"`
	MaintenanceInfo *maintenanceInfoBody `json:"maintenance_info,omitempty"`
	Metadata        instanceMetadataBody `json:"metadata"`
}

// maintenanceInfoBody is the answer form of maintenance_info.
type maintenanceInfoBody struct {
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

func encodeFetchInstance(inst broker.Instance, _ http.Header) (int, any) {
	body := fetchedInstanceBody{ServiceID: inst.ServiceID, PlanID: inst.PlanID, DashboardURL: inst.DashboardURL,
		Parameters: inst.Parameters, Metadata: instanceMetadata(inst.Metadata)}
	if mi := inst.MaintenanceInfo; mi != nil {
		body.MaintenanceInfo = &maintenanceInfoBody{Version: mi.Version, Description: mi.Description}
	}
	return http.StatusOK, body
}

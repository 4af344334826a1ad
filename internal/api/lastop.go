package api

import (
	"net/http"
	"strconv"

	"github.com/serverless-osb/broker/internal/broker"
)

// decodeLastOperation reads GET /v2/service_instances/:instance_id/last_operation
// and GET /v2/service_instances/:instance_id/service_bindings/:binding_id/last_operation.
func decodeLastOperation(r *http.Request) (broker.LastOperationDetails, error) {
	req, err := readRequest(r, nil, []string{"service_id", "plan_id", "operation"}, nil)
	if err != nil {
		return broker.LastOperationDetails{}, err
	}
	return broker.LastOperationDetails{InstanceID: req.instanceID, BindingID: req.bindingID,
		OperationID: req.values["operation"], ServiceID: req.values["service_id"], PlanID: req.values["plan_id"]}, nil
}

// lastOperationBody is the body of both last_operation endpoints.
type lastOperationBody struct {
	State            broker.OperationState `json:"state"`
	Description      string                `json:"description,omitempty"`
	InstanceUsable   *bool                 `json:"instance_usable,omitempty"`
	UpdateRepeatable *bool                 `json:"update_repeatable,omitempty"`
}

// encodeLastOperation answers while the operation runs with Retry-After.
func encodeLastOperation(lo broker.LastOperation, header http.Header) (int, any) {
	if lo.State == broker.OperationInProgress {
		header.Set("Retry-After", strconv.Itoa(broker.RetryAfterSeconds(lo.RetryAfter)))
	}
	return http.StatusOK, lastOperationBody{State: lo.State, Description: lo.Description,
		InstanceUsable: lo.InstanceUsable, UpdateRepeatable: lo.UpdateRepeatable}
}

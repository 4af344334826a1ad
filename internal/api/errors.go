package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/logging"
)

// errorBody is OSB's error response.
type errorBody struct {
	Error            string `json:"error,omitempty"`
	Description      string `json:"description,omitempty"`
	InstanceUsable   *bool  `json:"instance_usable,omitempty"`
	UpdateRepeatable *bool  `json:"update_repeatable,omitempty"`
}

// status maps each error code to its HTTP status and the "error" string
// sent to the platform. It is the only place that does so. Only the codes
// the OSB spec defines (Service Broker Errors) are sent as "error": a
// platform may act on them. Every other answer has only a description.
var status = map[broker.Code]struct {
	code  int
	error string
}{
	broker.CodeBadRequest:              {http.StatusBadRequest, ""},
	broker.CodeUnauthorized:            {http.StatusUnauthorized, ""},
	broker.CodeForbidden:               {http.StatusForbidden, ""},
	broker.CodeNotFound:                {http.StatusNotFound, ""},
	broker.CodeConflict:                {http.StatusConflict, ""},
	broker.CodeGone:                    {http.StatusGone, ""},
	broker.CodePreconditionFailed:      {http.StatusPreconditionFailed, ""},
	broker.CodeAsyncRequired:           {http.StatusUnprocessableEntity, "AsyncRequired"},
	broker.CodeConcurrencyError:        {http.StatusUnprocessableEntity, "ConcurrencyError"},
	broker.CodeMaintenanceInfoConflict: {http.StatusUnprocessableEntity, "MaintenanceInfoConflict"},
	broker.CodeRequiresApp:             {http.StatusUnprocessableEntity, "RequiresApp"},
	broker.CodeUnprocessable:           {http.StatusUnprocessableEntity, ""},
	broker.CodeUnavailable:             {http.StatusServiceUnavailable, ""},
	broker.CodeInternal:                {http.StatusInternalServerError, ""},
}

// writeError answers with err. An error without a code is a 500 with a
// generic description for the platform and a full log line for us.
func (h *handlers) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *broker.Error
	if !errors.As(err, &e) || e.Code == broker.CodeInternal {
		h.logger.ErrorContext(r.Context(), "internal error", "method", truncate(r.Method, 16),
			"path", truncate(r.URL.Path, maxLoggedBytes), "error", err.Error())
		e = &broker.Error{Code: broker.CodeInternal,
			Description: "The service broker failed internally; the failure was logged. Try again later."}
	}
	s := status[e.Code]
	if e.Code == broker.CodeGone {
		// 410 is how a platform learns that a delete has nothing to do; the
		// expected body is {}.
		h.writeJSON(r.Context(), w, s.code, struct{}{})
		return
	}
	h.writeJSON(r.Context(), w, s.code, errorBody{Error: s.error, Description: e.Description,
		InstanceUsable: e.InstanceUsable, UpdateRepeatable: e.UpdateRepeatable})
}

// badRequest is a 400 with a description.
func badRequest(format string, args ...any) error {
	return broker.Errorf(broker.CodeBadRequest, format, args...)
}

// annotate adds attributes to the request's log lines.
func annotate(r *http.Request, attrs ...slog.Attr) *http.Request {
	return r.WithContext(logging.With(r.Context(), attrs...))
}

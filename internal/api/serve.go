package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/serverless-osb/broker/internal/broker"
)

// serve is the one shape of every endpoint: decode reads the request into
// what call takes (the broker's details type), call does the work, and
// encode turns its result into the status and body of the answer, setting
// any header the answer carries beyond Content-Type. An error from decode
// or call is answered by writeError, the one place that maps errors to
// statuses. The ids that decode validated (see pathIDs) are on every log
// line of the call. Request bodies are read through MaxBodyBytes.
//
// An endpoint is thus a decode and an encode, next to its request and
// answer bodies, and one line in New's routes.
func serve[In, Out any](h *handlers, decode func(*http.Request) (In, error),
	call func(context.Context, In) (Out, error), encode func(Out, http.Header) (status int, body any)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		}
		in, err := decode(r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		// The request itself is copied with ctx only for an error: a
		// copy of the request is an allocation of 250 bytes.
		ctx := logIDs(r)
		out, err := call(ctx, in)
		if err != nil {
			h.writeError(w, r.WithContext(ctx), err)
			return
		}
		status, body := encode(out, w.Header())
		h.writeJSON(ctx, w, status, body)
	}
}

// request is what every endpoint reads first: the ids in the path and the
// query.
type request struct {
	instanceID, bindingID string
	query
}

// readRequest reads the path's ids (see pathIDs), the query (see
// parseQuery) and, when body is not nil, the JSON body into body, in that
// order: the first error the client gets does not depend on the endpoint.
func readRequest(r *http.Request, required, optional []string, body any) (request, error) {
	var req request
	var err error
	if req.instanceID, req.bindingID, err = pathIDs(r); err != nil {
		return request{}, err
	}
	if req.query, err = parseQuery(r, required, optional); err != nil {
		return request{}, err
	}
	if body != nil {
		if err := decodeBody(r, body); err != nil {
			return request{}, err
		}
	}
	return req, nil
}

// writeJSON answers with code and body encoded as JSON; a json.RawMessage
// body is sent as it is, and a nil body is no body at all (304).
func (h *handlers) writeJSON(ctx context.Context, w http.ResponseWriter, code int, body any) {
	if body == nil {
		w.WriteHeader(code)
		return
	}
	data, encoded := body.(json.RawMessage)
	if !encoded {
		var err error
		if data, err = json.Marshal(body); err != nil {
			h.logger.ErrorContext(ctx, "encode response", "error", err.Error())
			code, data = http.StatusInternalServerError, []byte(`{"error":"InternalError","description":"The service broker failed to encode its answer."}`)
		}
	}
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// jsonContentType is every answer's Content-Type, shared rather than a
// slice per answer (Header.Set's); nothing changes a header's values in
// place.
var jsonContentType = []string{"application/json"}

// statusOf is the success status of a broker.Result.
func statusOf(r broker.Result) int {
	switch r {
	case broker.ResultCreated:
		return http.StatusCreated
	case broker.ResultAccepted:
		return http.StatusAccepted
	}
	return http.StatusOK
}

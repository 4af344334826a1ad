// Package tracing traces the AWS SDK calls of the Lambda functions with
// AWS X-Ray, so that one trace shows an OSB request (the function's
// segment, which Lambda's active tracing opens for each invocation), each
// DynamoDB and Step Functions call it made, and the execution it started.
//
// Each call becomes a subsegment of the invocation's segment, sent as one
// UDP datagram to the X-Ray daemon that Lambda runs beside the function
// (AWS_XRAY_DAEMON_ADDRESS), and the call carries the trace header, so that
// Step Functions joins the execution it starts to the trace. That is the
// X-Ray daemon protocol (a header line, then a segment document) and
// nothing more: no collector layer, no exporter, no permission beyond
// xray:PutTraceSegments.
//
// Why not a library: the X-Ray SDK for Go (aws-xray-sdk-go v1.8.5,
// instrumentation/awsv2) does the same with one call, and was tried, but
// its xray package brings aws-sdk-go v1, gRPC, protobuf and fasthttp into
// every binary that imports it: the api bundle went from 4.5 MB to 9.0 MB
// zipped (12 MB to 33 MB unzipped), which every cold start loads and which
// the broker's bundle limit refuses. OpenTelemetry's otelaws needs the OTel
// SDK, an OTLP exporter and, in Lambda, a collector layer or SigV4-signed
// exports with a flush per invocation: more parts and more latency for the
// same trace. AWS points new instrumentation at OpenTelemetry; when its
// Lambda path is as light as the daemon's, swapping is confined to this
// file.
//
// Only the functions instrument their clients (Instrument); the local
// broker and the operator command never do, and send nothing.
package tracing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// DaemonAddressVariable names the daemon's address, as Lambda sets it.
const DaemonAddressVariable = "AWS_XRAY_DAEMON_ADDRESS"

// lambdaTraceKey is where aws-lambda-go keeps the invocation's trace
// header in its context (it also sets _X_AMZN_TRACE_ID).
const lambdaTraceKey = "x-amzn-trace-id"

// Instrument makes every client built from cfg record its calls as X-Ray
// subsegments of the invocation's segment, sent to the daemon at
// AWS_XRAY_DAEMON_ADDRESS, and pass the trace on. Without that variable
// (not in Lambda) it changes nothing.
func Instrument(cfg *aws.Config, logger *slog.Logger) error {
	addr := os.Getenv(DaemonAddressVariable)
	if addr == "" {
		return nil
	}
	// The variable may hold "udp:host:port tcp:host:port".
	for _, part := range strings.Fields(addr) {
		if udp, ok := strings.CutPrefix(part, "udp:"); ok {
			addr = udp
		}
	}
	(&Tracer{Daemon: addr, Logger: logger}).Instrument(cfg)
	return nil
}

// Tracer sends subsegments to a daemon.
type Tracer struct {
	// Daemon is the daemon's UDP address (host:port).
	Daemon string
	Logger *slog.Logger
	// Now is the clock; time.Now by default.
	Now func() time.Time

	once   sync.Once
	conn   net.Conn
	dialed error
}

// Instrument adds the tracer's middleware to every client built from cfg.
func (t *Tracer) Instrument(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("XRaySubsegment", t.subsegment), middleware.After); err != nil {
			return err
		}
		return stack.Build.Add(middleware.BuildMiddlewareFunc("XRayTraceHeader", traceHeader), middleware.After)
	})
}

// header is the parts of an X-Ray trace header.
type header struct {
	root, parent string
	sampled      bool
}

func parseHeader(s string) (header, bool) {
	var h header
	for _, part := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Root":
			h.root = v
		case "Parent":
			h.parent = v
		case "Sampled":
			h.sampled = v == "1"
		}
	}
	return h, h.root != ""
}

func (h header) String() string {
	sampled := "0"
	if h.sampled {
		sampled = "1"
	}
	return "Root=" + h.root + ";Parent=" + h.parent + ";Sampled=" + sampled
}

// invocation returns the trace header of the invocation ctx belongs to.
func invocation(ctx context.Context) (header, bool) {
	if s, ok := ctx.Value(lambdaTraceKey).(string); ok && s != "" {
		return parseHeader(s)
	}
	return header{}, false
}

type outgoingKey struct{}

// subsegment times one call (all its retries) and sends it as a
// subsegment; the call's requests carry the header that names it.
func (t *Tracer) subsegment(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	h, ok := invocation(ctx)
	if !ok {
		return next.HandleInitialize(ctx, in)
	}
	id := newID()
	out := header{root: h.root, parent: id, sampled: h.sampled}
	if !h.sampled {
		out.parent = h.parent
	}
	ctx = middleware.WithStackValue(ctx, outgoingKey{}, out)
	if start, ok := in.Parameters.(*sfn.StartExecutionInput); ok && start.TraceHeader == nil {
		// The execution joins the trace.
		copied := *start
		copied.TraceHeader = aws.String(out.String())
		in.Parameters = &copied
	}
	begin := t.now()
	res, md, err := next.HandleInitialize(ctx, in)
	if h.sampled {
		t.send(ctx, h, id, begin, t.now(), md, err)
	}
	return res, md, err
}

// traceHeader puts the call's trace header on each of its requests.
func traceHeader(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
	if h, ok := middleware.GetStackValue(ctx, outgoingKey{}).(header); ok {
		if req, ok := in.Request.(*smithyhttp.Request); ok {
			req.Header.Set("X-Amzn-Trace-Id", h.String())
		}
	}
	return next.HandleBuild(ctx, in)
}

// document is an X-Ray subsegment, as the daemon takes it.
type document struct {
	Name      string  `json:"name"`
	ID        string  `json:"id"`
	TraceID   string  `json:"trace_id"`
	ParentID  string  `json:"parent_id,omitempty"`
	Type      string  `json:"type"`
	StartTime float64 `json:"start_time"`
	EndTime   float64 `json:"end_time"`
	Namespace string  `json:"namespace"`
	Error     bool    `json:"error,omitempty"`
	Fault     bool    `json:"fault,omitempty"`
	Throttle  bool    `json:"throttle,omitempty"`
	AWS       struct {
		Operation string `json:"operation"`
		Region    string `json:"region,omitempty"`
		RequestID string `json:"request_id,omitempty"`
	} `json:"aws"`
	HTTP *struct {
		Response struct {
			Status int `json:"status"`
		} `json:"response"`
	} `json:"http,omitempty"`
}

func (t *Tracer) send(ctx context.Context, h header, id string, begin, end time.Time, md middleware.Metadata, callErr error) {
	doc := document{Name: awsmiddleware.GetServiceID(ctx), ID: id, TraceID: h.root, ParentID: h.parent,
		Type: "subsegment", Namespace: "aws", StartTime: seconds(begin), EndTime: seconds(end)}
	doc.AWS.Operation, doc.AWS.Region = awsmiddleware.GetOperationName(ctx), awsmiddleware.GetRegion(ctx)
	doc.AWS.RequestID, _ = awsmiddleware.GetRequestIDMetadata(md)
	if raw, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok && raw != nil {
		doc.HTTP = new(struct {
			Response struct {
				Status int `json:"status"`
			} `json:"response"`
		})
		doc.HTTP.Response.Status = raw.StatusCode
		doc.Error = raw.StatusCode >= 400 && raw.StatusCode < 500
		doc.Throttle = raw.StatusCode == 429
		doc.Fault = raw.StatusCode >= 500
	}
	var respErr *smithyhttp.ResponseError
	if callErr != nil && !errors.As(callErr, &respErr) {
		doc.Fault = true // no answer at all
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return
	}
	t.once.Do(func() { t.conn, t.dialed = net.Dial("udp", t.Daemon) })
	if t.dialed != nil {
		return
	}
	if _, err := t.conn.Write(append([]byte("{\"format\": \"json\", \"version\": 1}\n"), body...)); err != nil && t.Logger != nil {
		t.Logger.DebugContext(ctx, "x-ray: send subsegment", "error", err.Error())
	}
}

func (t *Tracer) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func seconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

// newID is a subsegment id: 16 hex digits.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

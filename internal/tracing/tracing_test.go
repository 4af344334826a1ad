package tracing

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
)

// daemon is a stand-in for the X-Ray daemon: the UDP port the functions
// send segments to, as Lambda's daemon listens on one.
type daemon struct{ conn *net.UDPConn }

func newDaemon(t *testing.T) *daemon {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &daemon{conn}
}

// subsegments reads the segments sent until it has seen want of their
// subsegments (or for at most 10 s), and returns each subsegment's
// operation by name.
func (d *daemon) subsegments(t *testing.T, want int) map[string]string {
	t.Helper()
	got := map[string]string{}
	var collect func(seg map[string]any)
	collect = func(seg map[string]any) {
		if seg["type"] == "subsegment" || seg["parent_id"] != nil && seg["trace_id"] == nil {
			name, _ := seg["name"].(string)
			awsInfo, _ := seg["aws"].(map[string]any)
			got[name], _ = awsInfo["operation"].(string)
		}
		subs, _ := seg["subsegments"].([]any)
		for _, s := range subs {
			if m, ok := s.(map[string]any); ok {
				m["type"] = "subsegment"
				collect(m)
			}
		}
	}
	_ = d.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64<<10)
	for len(got) < want {
		n, err := d.conn.Read(buf)
		if err != nil {
			t.Fatalf("read segments (have %v): %v", got, err)
		}
		// A datagram is a header line, then one segment document.
		_, doc, _ := strings.Cut(string(buf[:n]), "\n")
		var seg map[string]any
		if err := json.Unmarshal([]byte(doc), &seg); err != nil {
			t.Fatalf("segment %q: %v", doc, err)
		}
		collect(seg)
	}
	return got
}

// awsStandIn answers every call with an empty JSON object, keeping the
// trace headers and the bodies of the targets it was sent.
type awsStandIn struct {
	mu      sync.Mutex
	headers map[string]string // X-Amz-Target -> X-Amzn-Trace-Id
	bodies  map[string]string
}

func (s *awsStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.headers[r.Header.Get("X-Amz-Target")] = r.Header.Get("X-Amzn-Trace-Id")
	s.bodies[r.Header.Get("X-Amz-Target")] = string(body)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_, _ = w.Write([]byte(`{}`))
}

var getItem = &dynamodb.GetItemInput{TableName: aws.String("t"), Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "i#1"}}}

func TestInstrumentTracesEachCallAndPassesTheTraceOn(t *testing.T) {
	stand := &awsStandIn{headers: map[string]string{}, bodies: map[string]string{}}
	srv := httptest.NewServer(stand)
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.AnonymousCredentials{}, HTTPClient: srv.Client()}
	d := newDaemon(t)
	t.Setenv(DaemonAddressVariable, "udp:"+d.conn.LocalAddr().String()+" tcp:127.0.0.1:1")
	if err := Instrument(&cfg, nil); err != nil {
		t.Fatal(err)
	}

	t.Run("a call outside an invocation goes through untraced", func(t *testing.T) {
		if _, err := dynamodb.NewFromConfig(cfg).GetItem(context.Background(), getItem); err != nil {
			t.Fatal(err)
		}
		stand.mu.Lock()
		defer stand.mu.Unlock()
		if h := stand.headers["DynamoDB_20120810.GetItem"]; h != "" {
			t.Errorf("an untraced call carried X-Amzn-Trace-Id %q", h)
		}
	})

	// The trace of the invocation, as aws-lambda-go hands it to the handler.
	const traceID, parent = "1-5759e988-bd862e3fe1be46a994272793", "53995c3f42cd8ad8"
	//lint:ignore SA1029 aws-lambda-go keys the trace header with this very string
	ctx := context.WithValue(context.Background(), lambdaTraceKey, "Root="+traceID+";Parent="+parent+";Sampled=1")
	if _, err := dynamodb.NewFromConfig(cfg).GetItem(ctx, getItem); err != nil {
		t.Fatal(err)
	}
	if _, err := sfn.NewFromConfig(cfg).StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: aws.String("arn:aws:states:eu-west-1:123456789012:stateMachine:m")}); err != nil {
		t.Fatal(err)
	}

	t.Run("each call is a subsegment of the invocation's segment, named after the service, with its operation", func(t *testing.T) {
		got := d.subsegments(t, 2)
		want := map[string]string{"DynamoDB": "GetItem", "SFN": "StartExecution"}
		for name, op := range want {
			if got[name] != op {
				t.Errorf("subsegments %v: want %s with operation %s", got, name, op)
			}
		}
	})
	t.Run("the trace header goes with the calls, so that the execution joins the trace", func(t *testing.T) {
		stand.mu.Lock()
		defer stand.mu.Unlock()
		for _, target := range []string{"DynamoDB_20120810.GetItem", "AWSStepFunctions.StartExecution"} {
			h := stand.headers[target]
			if !strings.Contains(h, "Root="+traceID) || !strings.Contains(h, "Sampled=1") || strings.Contains(h, "Parent="+parent) {
				t.Errorf("%s carried X-Amzn-Trace-Id %q, want the trace %s, sampled, with the call's own subsegment as parent", target, h, traceID)
			}
		}
		if body := stand.bodies["AWSStepFunctions.StartExecution"]; !strings.Contains(body, `"traceHeader":"Root=`+traceID) {
			t.Errorf("StartExecution's input has no traceHeader: %s", body)
		}
	})
}

func TestSubsegmentsSayHowACallEnded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"no table"}`))
	}))
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), Credentials: aws.AnonymousCredentials{}, HTTPClient: srv.Client()}
	d := newDaemon(t)
	(&Tracer{Daemon: d.conn.LocalAddr().String()}).Instrument(&cfg)
	//lint:ignore SA1029 aws-lambda-go keys the trace header with this very string
	ctx := context.WithValue(context.Background(), lambdaTraceKey, "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	if _, err := dynamodb.NewFromConfig(cfg).GetItem(ctx, getItem); err == nil {
		t.Fatal("no error")
	}
	_ = d.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := d.conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	_, doc, _ := strings.Cut(string(buf[:n]), "\n")
	var seg struct {
		Error, Fault bool
		HTTP         struct{ Response struct{ Status int } }
		StartTime    float64 `json:"start_time"`
		EndTime      float64 `json:"end_time"`
	}
	if err := json.Unmarshal([]byte(doc), &seg); err != nil {
		t.Fatal(err)
	}
	if !seg.Error || seg.Fault || seg.HTTP.Response.Status != 400 || seg.EndTime < seg.StartTime || seg.StartTime == 0 {
		t.Errorf("subsegment %s: want error, no fault, status 400, and its times", doc)
	}
}

func TestNoDaemonNoTracing(t *testing.T) {
	t.Setenv(DaemonAddressVariable, "")
	var cfg aws.Config
	if err := Instrument(&cfg, nil); err != nil || len(cfg.APIOptions) != 0 {
		t.Errorf("Instrument without a daemon: %v, %d API options", err, len(cfg.APIOptions))
	}
}

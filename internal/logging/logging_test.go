package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/logging"
	"github.com/serverless-osb/broker/internal/logging/logtest"
)

// TestEveryKeyOncePerLine logs with the same keys in the context, in the
// logger's With and in the record, and checks that each key appears once,
// with the most specific value.
func TestEveryKeyOncePerLine(t *testing.T) {
	ctx := logging.With(context.Background(),
		slog.String("request_identity", "req-1"), slog.String("instance_id", "from-context"),
		slog.String("operation_id", "from-context"), slog.String("binding_id", "from-context"))
	ctx = logging.With(ctx, slog.String("binding_id", "from-inner-context"), slog.String("user", "admin"))

	tests := []struct {
		name string
		log  func(l *slog.Logger)
		want map[string]any
	}{
		{
			name: "a record's attr wins over the context's",
			log:  func(l *slog.Logger) { l.InfoContext(ctx, "m", "instance_id", "from-record") },
			want: map[string]any{"instance_id": "from-record", "operation_id": "from-context", "request_identity": "req-1"},
		},
		{
			name: "a later context attr wins over an earlier one",
			log:  func(l *slog.Logger) { l.InfoContext(ctx, "m") },
			want: map[string]any{"binding_id": "from-inner-context", "user": "admin"},
		},
		{
			name: "a With attr wins over the context's, and a record's over With's",
			log: func(l *slog.Logger) {
				l.With("instance_id", "from-with", "operation_id", "from-with").
					InfoContext(ctx, "m", "operation_id", "from-record")
			},
			want: map[string]any{"instance_id": "from-with", "operation_id": "from-record"},
		},
		{
			name: "a later With wins over an earlier one",
			log: func(l *slog.Logger) {
				l.With("state", "first").With(slog.String("state", "second")).InfoContext(ctx, "m")
			},
			want: map[string]any{"state": "second"},
		},
		{
			name: "a key repeated within a record is written once, with its last value",
			log: func(l *slog.Logger) {
				l.InfoContext(ctx, "m", "error", "a", "error", "b", slog.Group("", "error", "c"))
			},
			want: map[string]any{"error": "c"},
		},
		{
			name: "a group holds each key once and leaves the context's attrs at the top level",
			log: func(l *slog.Logger) {
				l.WithGroup("g").With("k", 1).InfoContext(ctx, "m", "k", 2, slog.Group("sub", "x", 1, "x", 2))
			},
			want: map[string]any{"request_identity": "req-1", "g": map[string]any{"k": json.Number("2"),
				"sub": map[string]any{"x": json.Number("2")}}},
		},
		{
			name: "an empty group does not hide an earlier value of its key",
			log:  func(l *slog.Logger) { l.InfoContext(ctx, "m", "user", "someone", slog.Group("user")) },
			want: map[string]any{"user": "someone"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.log(logging.New(&buf, slog.LevelInfo))
			line, err := logtest.Decode(bytes.TrimSpace(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.want {
				if got := line[k]; !equal(got, want) {
					t.Errorf("%s = %v, want %v in %s", k, got, want, buf.String())
				}
			}
		})
	}
}

func equal(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestLogtestRefusesDuplicateKeys checks the checker: encoding/json alone
// would take the last value.
func TestLogtestRefusesDuplicateKeys(t *testing.T) {
	for _, line := range []string{`{"a":1,"a":2}`, `{"g":{"b":[{"c":1,"c":1}]}}`, `{"a":1} {"b":2}`} {
		if _, err := logtest.Decode([]byte(line)); err == nil {
			t.Errorf("%s was accepted", line)
		}
	}
	if _, err := logtest.Decode([]byte(`{"a":{"a":1},"b":[{"a":1},{"a":2}]}`)); err != nil {
		t.Errorf("equal keys in different objects: %v", err)
	}
}

func TestParseLevel(t *testing.T) {
	tests := []struct {
		in      string
		want    slog.Level
		wantErr bool
	}{
		{in: "debug", want: slog.LevelDebug},
		{in: "info", want: slog.LevelInfo},
		{in: "WARN", want: slog.LevelWarn},
		{in: "Error", want: slog.LevelError},
		{in: "warning", wantErr: true},
		{in: "info+2", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := logging.ParseLevel(tt.in)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "want debug, info, warn or error") {
					t.Fatalf("ParseLevel(%q) = %v, %v; want an error naming the levels", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseLevel(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestLevelFilters: a logger at warn writes no info lines.
func TestLevelFilters(t *testing.T) {
	var buf bytes.Buffer
	l := logging.New(&buf, slog.LevelWarn)
	l.Info("quiet")
	l.Warn("loud")
	if strings.Contains(buf.String(), "quiet") || !strings.Contains(buf.String(), "loud") {
		t.Fatalf("at warn: %s", buf.String())
	}
}

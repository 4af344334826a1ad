package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

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

// TestALineWithDistinctKeysIsTheJSONHandlers checks that a line whose keys
// are all distinct is, byte for byte, what slog's JSON handler writes of
// the context's attributes followed by the record's, however many the
// context gathered over how many With calls, with groups and values to
// resolve among them or not; and that a context With made still carries
// its parent's values and cancellation.
func TestALineWithDistinctKeysIsTheJSONHandlers(t *testing.T) {
	type other struct{}
	at := time.Date(2026, 11, 29, 1, 2, 3, 456789000, time.UTC)
	attr := func(i int) slog.Attr { return slog.String(fmt.Sprintf("k%02d", i), fmt.Sprintf("v\"%d\"", i)) }
	for _, c := range []struct {
		name            string
		withs, inRecord []int // attributes per With, in the record
		extra           []slog.Attr
	}{
		{name: "none"},
		{name: "a request's ids", withs: []int{2}, inRecord: []int{2}},
		{name: "a request's and an operation's", withs: []int{2, 3}, inRecord: []int{2}},
		{name: "more than a context holds", withs: []int{4, 4}, inRecord: []int{3}},
		{name: "more than a line holds on the stack", withs: []int{10, 5}, inRecord: []int{6}},
		{name: "more than are told apart by scanning", withs: []int{20, 10}, inRecord: []int{10}},
		{name: "a group", withs: []int{2}, inRecord: []int{1}, extra: []slog.Attr{slog.Group("g", "a", 1, "b", "x")}},
		{name: "a value to resolve", withs: []int{1}, extra: []slog.Attr{slog.Any("r", resolved("text"))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.WithValue(context.Background(), other{}, "kept"))
			ctx, all, n := parent, []slog.Attr(nil), 0
			for _, w := range c.withs {
				var attrs []slog.Attr
				for range w {
					attrs = append(attrs, attr(n))
					n++
				}
				ctx, all = logging.With(ctx, attrs...), append(all, attrs...)
			}
			r := slog.NewRecord(at, slog.LevelInfo, "m", 0)
			for _, w := range c.inRecord {
				for range w {
					r.AddAttrs(attr(n))
					all = append(all, attr(n))
					n++
				}
			}
			r.AddAttrs(c.extra...)
			all = append(all, c.extra...)
			want := slog.NewRecord(at, slog.LevelInfo, "m", 0)
			want.AddAttrs(all...)

			var got, std bytes.Buffer
			if err := logging.New(&got, slog.LevelInfo).Handler().Handle(ctx, r); err != nil {
				t.Fatal(err)
			}
			if err := slog.NewJSONHandler(&std, nil).Handle(ctx, want); err != nil {
				t.Fatal(err)
			}
			if got.String() != std.String() {
				t.Errorf("line\n%s want\n%s", got.String(), std.String())
			}
			if ctx.Value(other{}) != "kept" {
				t.Errorf("the context lost its parent's value")
			}
			cancel()
			if ctx.Err() == nil {
				t.Errorf("the context was not cancelled with its parent")
			}
		})
	}
}

type resolved string

func (r resolved) LogValue() slog.Value { return slog.StringValue(string(r)) }

// TestALineAndAWithAllocateOnce pins what a request's logging allocates:
// a line whose attributes fit on the stack, nothing of its own (slog's
// buffer is pooled), and a With of a request's few attributes one
// allocation (cb0ab17: 1 and 3); LogAttrs of a request's line, more
// attributes than slog.Record holds in place, nothing either.
func TestALineAndAWithAllocateOnce(t *testing.T) {
	line := 0.0
	if raceEnabled {
		line = 1 // sync.Pool keeps fewer of slog's buffers
	}
	l := logging.New(io.Discard, slog.LevelInfo)
	ctx := logging.With(context.Background(), slog.String("instance_id", "i"), slog.String("binding_id", "b"))
	op := []slog.Attr{slog.String("operation_id", "o"), slog.String("instance_id", "i"), slog.String("binding_id", "b")}
	if n := testing.AllocsPerRun(100, func() { _ = logging.With(ctx, op...) }); n != 1 {
		t.Errorf("With allocates %.0f times, want 1", n)
	}
	ctx = logging.With(ctx, op...)
	if n := testing.AllocsPerRun(100, func() {
		l.LogAttrs(ctx, slog.LevelInfo, "operation finished", slog.String("kind", "bind"), slog.String("state", "succeeded"))
	}); n > line {
		t.Errorf("a line allocates %.0f times, want at most %.0f", n, line)
	}
	request := []slog.Attr{slog.String("method", "PUT"), slog.String("route", "/v2/service_instances/{instance_id}"),
		slog.Int("status", 201), slog.Int64("duration_ms", 0), slog.String("instance_id", "i"), slog.String("binding_id", "b")}
	if n := testing.AllocsPerRun(100, func() {
		logging.LogAttrs(context.Background(), l, slog.LevelInfo, "request", request...)
	}); n > line {
		t.Errorf("LogAttrs of a request's line allocates %.0f times, want at most %.0f", n, line)
	}
}

// TestLogAttrsIsTheLoggers checks that logging.LogAttrs writes the line
// slog.Logger.LogAttrs writes, but for the time, on a logger of New and on
// another, and nothing below the logger's level.
func TestLogAttrsIsTheLoggers(t *testing.T) {
	ctx := logging.With(context.Background(), slog.String("instance_id", "i"), slog.String("binding_id", "b"))
	stamp := regexp.MustCompile(`"time":"[^"]*",`)
	for _, n := range []int{0, 1, 5, 6, 9, 20} {
		var attrs []slog.Attr
		for i := range n {
			attrs = append(attrs, slog.Int(fmt.Sprintf("k%d", i), i), slog.String("instance_id", fmt.Sprint(i)))
		}
		for name, newLogger := range map[string]func(io.Writer) *slog.Logger{
			"New":   func(w io.Writer) *slog.Logger { return logging.New(w, slog.LevelInfo) },
			"other": func(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) },
		} {
			var got, want bytes.Buffer
			logging.LogAttrs(ctx, newLogger(&got), slog.LevelInfo, "m", attrs...)
			logging.LogAttrs(ctx, newLogger(&got), slog.LevelDebug, "quiet", attrs...)
			newLogger(&want).LogAttrs(ctx, slog.LevelInfo, "m", attrs...)
			if g, w := stamp.ReplaceAllString(got.String(), ""), stamp.ReplaceAllString(want.String(), ""); g != w || !strings.Contains(got.String(), `"time":"`) {
				t.Errorf("%s, %d attributes: LogAttrs wrote\n%s want\n%s", name, len(attrs), got.String(), want.String())
			}
		}
	}
}

// FuzzLineIsTheJSONHandlers holds the lines the handler writes itself to
// slog's JSON handler, byte for byte: messages, keys and strings of any
// bytes, every kind of value it writes, times of any year and zone, any
// level (those it leaves to the JSON handler too).
func FuzzLineIsTheJSONHandlers(f *testing.F) {
	f.Add("operation finished", "k", "v", int64(-1), uint64(2), true, int64(3), int64(1764378123), int64(456789000), int8(0), false)
	f.Add("a\"b\\c\n\r\t\x01\x1f\x7f<>&\u2028\u2029\xff\xe2\x80", "é\x00", "\xed\xa0\x80 ☃", int64(0), uint64(0), false, int64(-5), int64(-62135596801), int64(0), int8(4), false)
	f.Add("a\tb", "k", "v\n", int64(7), uint64(0), false, int64(0), int64(1764378123), int64(0), int8(8), true)
	f.Add("", "", "", int64(1)<<62, ^uint64(0), true, int64(1)<<40, int64(253402300800), int64(1), int8(-3), false)
	f.Fuzz(func(t *testing.T, msg, key, value string, i int64, u uint64, b bool, d, sec, nsec int64, level int8, float bool) {
		at := time.Unix(sec, nsec).In(time.FixedZone("", int(level)*1800))
		r := slog.NewRecord(at, slog.Level(level), msg, 0)
		r.AddAttrs(slog.String(key+"s", value), slog.Int64(key+"i", i), slog.Uint64(key+"u", u), slog.Bool(key+"b", b),
			slog.Duration(key+"d", time.Duration(d)), slog.Time(key+"t", at.Add(time.Duration(d))), slog.String(key+"v", msg))
		if float {
			r.AddAttrs(slog.Float64(key+"f", float64(i)/3))
		}
		var got, want bytes.Buffer
		if err := logging.New(&got, slog.LevelDebug-8).Handler().Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if err := slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: slog.LevelDebug - 8}).Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("line\n%q want\n%q", got.String(), want.String())
		}
	})
}

// BenchmarkRequestLine is the cost of a request's log line: its six
// attributes and the two its context carries.
func BenchmarkRequestLine(b *testing.B) {
	l := logging.New(io.Discard, slog.LevelInfo)
	ctx := logging.With(context.Background(), slog.String("instance_id", "i-0123456789"), slog.String("binding_id", "b-0123456789"))
	attrs := []slog.Attr{slog.String("method", "PUT"), slog.String("route", "/v2/service_instances/{instance_id}/service_bindings/{binding_id}"),
		slog.Int("status", 201), slog.Int64("duration_ms", 0), slog.String("instance_id", "i-0123456789"), slog.String("binding_id", "b-0123456789")}
	b.ReportAllocs()
	for b.Loop() {
		logging.LogAttrs(ctx, l, slog.LevelInfo, "request", attrs...)
	}
}

package local

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// recordCases are records appendRecord writes itself and records it leaves
// to json.Marshal.
func recordCases() []record {
	at := time.Date(2026, 11, 29, 1, 2, 3, 456789000, time.UTC)
	running := record{
		Name: "0193a0b1-0000-7000-8000-000000000001", Workflow: broker.WorkflowOperation,
		Input: json.RawMessage(`{"instance_id":"i-1","kind":"provision"}`), Status: broker.ExecutionRunning,
		StartedAt: at, State: "Wait", StateEnteredAt: at.Add(time.Second),
		StateInput: json.RawMessage(`{"instance_id":"i-1","kind":"provision","progress":{"done":false,"retry_after":5}}`),
		History:    []string{"Begin", "Done?", "Wait"},
	}
	ended := running
	ended.Status, ended.StoppedAt, ended.Output = broker.ExecutionSucceeded, at.Add(time.Hour), json.RawMessage(`{"a":[1,2.5,null,true]}`)
	ended.State, ended.StateInput, ended.StateEnteredAt, ended.Caught = "", nil, time.Time{}, "PermanentError"
	failed := ended
	failed.Status, failed.Output, failed.Error, failed.Cause = broker.ExecutionFailed, nil, "States.Runtime", "the Payload cannot be encoded"
	with := func(r record, change func(r *record)) record { change(&r); return r }
	return []record{
		running, ended, failed, {},
		{Name: "n", Input: json.RawMessage(`{}`), History: []string{}},
		with(running, func(r *record) { r.Cause = `a "quoted" <cause> & more` }),
		with(running, func(r *record) { r.State = "Étape" }),
		with(running, func(r *record) { r.History = append(r.History, "a\nb") }),
		with(running, func(r *record) { r.Input = json.RawMessage(`{ "a": 1 }`) }),
		with(running, func(r *record) { r.Input = json.RawMessage(`{"b":1,"a":2}`) }),
		with(running, func(r *record) { r.StateInput = json.RawMessage(`{"a":"<b>"}`) }),
		with(running, func(r *record) { r.Output = json.RawMessage(`"\u00e9"`) }),
		with(running, func(r *record) { r.StartedAt = at.In(time.FixedZone("x", 5*3600+30*60)) }),
		with(running, func(r *record) { r.StartedAt = at.In(time.FixedZone("y", 17)) }),
		with(running, func(r *record) { r.StoppedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }),
		with(running, func(r *record) { r.Input = json.RawMessage{} }),
		with(running, func(r *record) { r.Input = nil }),
	}
}

func TestAppendRecordIsJSONMarshal(t *testing.T) {
	for _, r := range recordCases() {
		checkAppendRecord(t, r)
	}
}

func FuzzAppendRecord(f *testing.F) {
	f.Add("n", "Begin", `{"instance_id":"i-1"}`, `{"a":1}`, "", int64(1764378123456789000), 0)
	f.Add("n<", "É", `{ }`, `[1,"\n"]`, "c\"", int64(-62135596800000000), 3600)
	f.Fuzz(func(t *testing.T, name, state, input, stateInput, cause string, unixNano int64, offset int) {
		at := time.Unix(0, unixNano).In(time.FixedZone("z", offset%(48*3600)))
		checkAppendRecord(t, record{
			Name: name, Workflow: broker.WorkflowOperation, Input: json.RawMessage(input),
			Status: broker.ExecutionRunning, StartedAt: at, StoppedAt: at, State: state, StateEnteredAt: at,
			StateInput: json.RawMessage(stateInput), History: []string{state}, Cause: cause, Caught: cause,
		})
	})
}

func checkAppendRecord(t *testing.T, r record) {
	t.Helper()
	want, wantErr := json.Marshal(r)
	got, err := appendRecord([]byte("prefix"), &r)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%+v: error %v, json.Marshal's %v", r, err, wantErr)
	}
	if err == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("appendRecord wrote\n%s\njson.Marshal\n%s", got, want)
	}
}

// TestEncodingARecordAllocatesOnlyItsBuffer pins what writing a running operation's
// record costs: its buffer, which holds its name too.
func TestEncodingARecordAllocatesOnlyItsBuffer(t *testing.T) {
	r := recordCases()[0]
	n := testing.AllocsPerRun(100, func() {
		if _, err := appendRecord(make([]byte, 0, 512), &r); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 {
		t.Fatalf("encoding a record allocates %v times, want 1", n)
	}
}

// TestRecordSizeHoldsThePlainRecords checks that putRecord's buffer holds
// a record and its name without growing.
func TestRecordSizeHoldsThePlainRecords(t *testing.T) {
	for _, r := range recordCases() {
		if !plainRecord(&r) {
			continue
		}
		data, err := appendRecord(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		if n := recordSize(&r); len(data) > n {
			t.Errorf("%s: %d bytes, recordSize %d", data, len(data), n)
		}
	}
}

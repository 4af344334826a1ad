package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/engine/local"
	"github.com/serverless-osb/broker/internal/groupcommit"
	"github.com/serverless-osb/broker/internal/waittest"
)

// taskThenWait is the operation workflow's shape: a Task that records
// progress in a commit of its own, then a Wait the execution parks in.
const taskThenWait = `{
  "StartAt": "T",
  "States": {
    "T": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
          "Parameters": {"FunctionName": "f", "Payload": {"step": "t"}}, "ResultPath": null, "Next": "W"},
    "W": {"Type": "Wait", "Seconds": 3600, "Next": "Done"},
    "Done": {"Type": "Succeed"}
  }
}`

// storedState is the state an execution's record on file is in, "" when
// the file holds no record of it.
func storedState(t *testing.T, db *bbolt.DB, name string) string {
	t.Helper()
	var state string
	if err := db.View(func(tx *bbolt.Tx) error {
		data := tx.Bucket([]byte("executions")).Get([]byte(name))
		if data == nil {
			return nil
		}
		var r struct{ State string }
		if err := json.Unmarshal(data, &r); err != nil {
			return err
		}
		state = "(no state)"
		if r.State != "" {
			state = r.State
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return state
}

func TestARestartedWorkflowsExecutionIsWrittenOnceItLeavesItsFirstState(t *testing.T) {
	t.Parallel()
	// committingTask commits a write of its own through the file's
	// committer, as the broker's first Task does, and reports what the
	// file then holds of the execution.
	committingTask := func(db *bbolt.DB, c *groupcommit.Committer, seen chan<- string) local.Invoker {
		return func(context.Context, json.RawMessage) (json.RawMessage, error) {
			if err := c.Update(func(tx *bbolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("store"))
				if err != nil {
					return err
				}
				return b.Put([]byte("progress"), []byte("begun"))
			}); err != nil {
				return nil, err
			}
			seen <- storedState(t, db, "run-1")
			return json.RawMessage(`{}`), nil
		}
	}
	for _, c := range []struct {
		name      string
		restarted []broker.Workflow
		// inTask is what the first Task's own commit wrote of the execution.
		inTask string
	}{
		{"the first Task's own commit carries no record of an execution the caller starts again when missing", []broker.Workflow{"w"}, ""},
		{"the first Task's own commit carries the start of any other execution, which nothing starts again", nil, "T"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := openDB(t, filepath.Join(t.TempDir(), "engine.db"))
			commit := groupcommit.New(db)
			seen := make(chan string, 1)
			e := newEngine(t, local.Options{DB: db, Committer: commit, Restarted: c.restarted,
				Definitions: definitions(t, map[broker.Workflow]string{"w": taskThenWait}),
				Invoke:      committingTask(db, commit, seen)})
			start(t, e, "w", "run-1", `{}`)
			if got := waittest.Recv(t, seen, "the first Task's commit"); got != c.inTask {
				t.Errorf("the first Task's commit wrote the execution in state %q, want %q", got, c.inTask)
			}
			// In its Wait of an hour, it is written by the time the engine
			// closes.
			waitInState(t, e, "run-1", "W")
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if got := storedState(t, db, "run-1"); got != "W" {
				t.Errorf("the execution is stored in state %q, want W", got)
			}
		})
	}

	t.Run("one interrupted in its first state is written when the engine closes, and resumed", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "engine.db")
		defs := definitions(t, map[broker.Workflow]string{"w": taskOnly})
		db1 := openDB(t, file)
		blocked := newBlockingInvoker()
		e1 := newEngine(t, local.Options{DB: db1, Definitions: defs, Invoke: blocked.Invoke, Restarted: []broker.Workflow{"w"}})
		start(t, e1, "w", "run-1", `{}`)
		waittest.Recv(t, blocked.entered, "the first call")
		if err := e1.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
		if got := storedState(t, db1, "run-1"); got != "T" {
			t.Fatalf("after Close the execution is stored in state %q, want T", got)
		}
		_ = db1.Close()

		second := &countingInvoker{}
		e2 := newEngine(t, local.Options{DB: openDB(t, file), Definitions: defs, Invoke: second.Invoke, Restarted: []broker.Workflow{"w"}})
		if err := e2.Resume(context.Background()); err != nil {
			t.Fatalf("Resume = %v", err)
		}
		if x := waitEnded(t, e2, "run-1"); x.Status != broker.ExecutionSucceeded {
			t.Fatalf("status %s (%s: %s), want SUCCEEDED", x.Status, x.Error, x.Cause)
		}
	})

	t.Run("one that parks in its first state is written by a later commit, without another change", func(t *testing.T) {
		t.Parallel()
		db := openDB(t, filepath.Join(t.TempDir(), "engine.db"))
		commit := groupcommit.New(db)
		clock := &movingClock{}
		e := newEngine(t, local.Options{DB: db, Committer: commit, Restarted: []broker.Workflow{"w"}, Now: clock.Now,
			Definitions: definitions(t, map[broker.Workflow]string{"w": waitThenTask}), Invoke: (&countingInvoker{}).Invoke})
		start(t, e, "w", "run-1", `{"wait":3600}`)
		waittest.Until(t, func() error {
			clock.Move(local.BatchAge) // it waits alone to be written
			if err := commit.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := storedState(t, db, "run-1"); got != "W" {
				return fmt.Errorf("the execution is stored in state %q, want W once it parks", got)
			}
			return nil
		})
	})
}

// movingClock is a clock that stands still until moved.
type movingClock struct{ at atomic.Int64 }

func (c *movingClock) Now() time.Time       { return time.Unix(0, c.at.Load()) }
func (c *movingClock) Move(d time.Duration) { c.at.Add(int64(d)) }

func TestRestartedWorkflowsRecordsAreWrittenTogether(t *testing.T) {
	t.Parallel()
	db := openDB(t, filepath.Join(t.TempDir(), "engine.db"))
	commit := groupcommit.New(db)
	clock := &movingClock{}
	clock.Move(time.Hour)
	e := newEngine(t, local.Options{DB: db, Committer: commit, Restarted: []broker.Workflow{"w"}, Now: clock.Now,
		Definitions: definitions(t, map[broker.Workflow]string{"w": taskThenWait}), Invoke: (&countingInvoker{}).Invoke})
	// inWait starts the executions named and waits for each to be in its
	// Wait of an hour, then commits.
	inWait := func(names ...string) {
		t.Helper()
		for _, name := range names {
			start(t, e, "w", name, `{}`)
			waitInState(t, e, name, "W")
		}
		if err := commit.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	stored := func(names ...string) (n int) {
		for _, name := range names {
			if storedState(t, db, name) != "" {
				n++
			}
		}
		return n
	}
	var first []string
	for i := range local.BatchRecords - 1 {
		first = append(first, fmt.Sprint("run-", i))
	}
	last := fmt.Sprint("run-", local.BatchRecords-1)

	inWait(first...)
	if n := stored(first...); n != 0 {
		t.Fatalf("%d of %d records written before there were %d to write together", n, len(first), local.BatchRecords)
	}
	inWait(last)
	if n := stored(append(first, last)...); n != local.BatchRecords {
		t.Fatalf("%d of %d records written with the %dth", n, local.BatchRecords, local.BatchRecords)
	}

	t.Run("a record that waits alone is written by the first commit once it has waited BatchAge", func(t *testing.T) {
		inWait("alone")
		if stored("alone") != 0 {
			t.Fatal("a record alone was written at once")
		}
		clock.Move(local.BatchAge)
		if err := commit.Flush(); err != nil {
			t.Fatal(err)
		}
		if stored("alone") != 1 {
			t.Fatalf("a record that waited %s is not written", local.BatchAge)
		}
	})

	t.Run("the records that wait are written when the engine closes", func(t *testing.T) {
		inWait("at-close")
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if got := storedState(t, db, "at-close"); got != "W" {
			t.Fatalf("after Close the execution is stored in state %q, want W", got)
		}
	})
}

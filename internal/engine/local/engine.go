package local

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"go.etcd.io/bbolt"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/groupcommit"
)

// Invoker is the worker: it is called for every Task state with the
// resolved Parameters.Payload, and its result becomes the Task's
// {"Payload": ...}. An error fails the Task; Retry and Catch match on its
// name (see errorName). It must return soon after ctx is done: ctx is
// cancelled when the Task times out, the execution is stopped or the engine
// closes, and Close waits for every call to return.
type Invoker func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error)

// Options configure an Engine.
type Options struct {
	// Dir holds the workflows, one <workflow>.asl.json file each. Every
	// file is loaded and checked by New.
	Dir string
	// Definitions adds workflows already parsed (see Parse), for tests.
	Definitions map[broker.Workflow]*Definition
	// DB keeps executions, in bucket "executions". The engine does not
	// close it.
	DB *bbolt.DB
	// Committer, when set, is DB's committer shared with the file's other
	// writers (the bolt store): the engine's writes then ride their
	// commits. Default: the engine's own.
	Committer *groupcommit.Committer
	// Invoke is the worker called by Task states.
	Invoke Invoker
	// MaxTasks bounds the worker calls in flight; a Task waits for a slot,
	// and the wait counts against its TimeoutSeconds, as a throttled
	// Lambda's would. It keeps a burst of new executions from taking the
	// processors from the requests that start them: their first Tasks
	// queue and run as slots free. Default: DefaultMaxTasks.
	MaxTasks int
	// Logger receives one line per execution event; never a payload.
	// Default: discard.
	Logger *slog.Logger
	// Now is the clock for recorded times and for Wait states. Default:
	// time.Now.
	Now func() time.Time
	// Sleep waits for d or until ctx is done, for Wait states and between
	// retries. Default: a timer. Tests may replace it to record delays.
	Sleep func(ctx context.Context, d time.Duration)
	// Restarted names the workflows whose missing executions the caller
	// starts again under the same name (the broker's operations and
	// cleanups: Broker.Recover, the reaper). A new execution of one is
	// written only once it leaves its first state, parks, ends or the
	// engine closes, not while that state runs: its first Task's own
	// commit then carries no record that the next commit rewrites. And
	// their records are written together, batchRecords at a time or once
	// the first has waited batchAge (holdLocked), not each with the next
	// commit: a crash meanwhile loses what the caller starts again, and
	// Resume runs an execution again from an earlier state.
	Restarted []broker.Workflow
}

// DefaultMaxTasks is Options.MaxTasks when zero: 4 × GOMAXPROCS.
func DefaultMaxTasks() int { return 4 * runtime.GOMAXPROCS(0) }

// Errors of Start and Resume.
var (
	ErrClosed          = errors.New("engine closed")
	ErrInvalidName     = errors.New("invalid execution name")
	ErrUnknownWorkflow = errors.New("unknown workflow")
)

// Causes of the cancellation of an execution's context.
var (
	errClosing          = errors.New("engine closing")
	errExecutionTimeout = errors.New("execution timed out")
	errTaskTimeout      = errors.New("task timed out")
)

var bucketExecutions = []byte("executions")

// executions is the bucket of executions in tx, to write. Its pages split
// 90% full, not half: most executions are named by UUIDv7 operation ids,
// so new records go to the end of the bucket, and a page split half full
// is split again by the next few (one leaf and branch more to write).
func executions(tx *bbolt.Tx) *bbolt.Bucket {
	b := tx.Bucket(bucketExecutions)
	b.FillPercent = 0.9
	return b
}

// Engine runs executions, each in its own goroutine but while it waits in a
// long Wait: then it parks, with only a timer (see parkFor). It is safe for
// concurrent use.
//
// What it stores is a cache of what the broker's durable records imply: an
// execution's record (its state, the input of that state, its history) is
// kept in memory while this process runs it (not while it is parked), and
// written to bbolt with the
// next commit of the file, whoever makes it (groupcommit.Later), or a later
// one for a restarted workflow's (Options.Restarted), so the engine adds no
// fsync of its own. A crash may lose the last transitions,
// or an execution whose start was never written: Resume then runs an
// execution again from an earlier state (every Task is idempotent), and the
// broker starts again, under the same name, an operation's execution that
// is missing (Broker.Recover, the reaper). Close writes everything.
type Engine struct {
	defs   map[broker.Workflow]*Definition
	db     *bbolt.DB
	commit *groupcommit.Committer
	invoke Invoker
	tasks  chan struct{} // a slot per worker call in flight
	// jobs hands a job (an execution, a worker call) to an idle runner
	// (run).
	jobs  chan func()
	log   *slog.Logger
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration)
	// parks says long Waits park their execution (parkFor): when the
	// engine's own timers wait, not a test's Sleep.
	parks bool
	// restarted are Options.Restarted.
	restarted map[broker.Workflow]bool

	base   context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	runs   map[string]context.CancelFunc // running executions by name
	// parked are the executions waiting without a goroutine, by name: the
	// timer that runs each again.
	parked map[string]*time.Timer
	// live are the records of the executions this process runs, and of
	// those that ended or parked here and are not written yet, by name.
	live map[string]*record
	// dirty are the names whose live record is newer than the stored one,
	// with the generation of their last change; flushing says a write of
	// them waits for the next commit.
	dirty    map[string]uint64
	gen      uint64
	flushing bool
	// flushFn and flushedFn are flush and flushed, made once; records and
	// batch are the flush's, kept for the next.
	flushFn   func(*bbolt.Tx) error
	flushedFn func(error)
	records   []record
	batch     []written
	// heldSince is when the records of restarted workflows that wait to
	// be written together (holdLocked) began to wait; zero when none do.
	heldSince time.Time
	// forgets counts the live records dropped (forgetLocked): Start reads
	// the file before it takes mu, and again if one was dropped meanwhile.
	forgets atomic.Uint64
	// greatest holds, by its first byte, the greatest name that may be on
	// file: every name the file held when New opened it, and every name
	// started since. Start reads the file only for a name at or below it:
	// an operation's, named by a new UUIDv7 id, is above.
	greatest [256]string
}

var _ broker.Engine = (*Engine)(nil)

// New loads and checks every workflow and prepares the bucket. It starts
// nothing: call Resume to continue the executions of a previous process.
func New(opts Options) (*Engine, error) {
	if opts.DB == nil || opts.Invoke == nil {
		return nil, errors.New("local engine: DB and Invoke are required")
	}
	defs := map[broker.Workflow]*Definition{}
	if opts.Dir != "" {
		loaded, err := LoadDir(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("local engine: %w", err)
		}
		defs = loaded
	}
	for w, d := range opts.Definitions {
		if _, ok := defs[w]; ok {
			return nil, fmt.Errorf("local engine: workflow %q is defined twice", w)
		}
		defs[w] = d
	}
	if len(defs) == 0 {
		return nil, errors.New("local engine: no workflow (set Dir or Definitions)")
	}
	var greatest [256]string
	if err := opts.DB.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketExecutions)
		if err != nil {
			return err
		}
		greatest = greatestNames(b)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("local engine: create bucket: %w", err)
	}
	commit := opts.Committer
	if commit == nil {
		commit = groupcommit.New(opts.DB)
	}
	e := &Engine{
		defs:   defs,
		db:     opts.DB,
		commit: commit,
		live:   map[string]*record{},
		dirty:  map[string]uint64{},
		invoke: opts.Invoke,
		tasks:  make(chan struct{}, cmp.Or(opts.MaxTasks, DefaultMaxTasks())),
		jobs:   make(chan func()),
		log:    opts.Logger,
		now:    opts.Now,
		sleep:  opts.Sleep,
		runs:   map[string]context.CancelFunc{},
		parked: map[string]*time.Timer{},
		parks:  opts.Sleep == nil,
	}
	e.greatest = greatest
	e.flushFn, e.flushedFn = e.flush, e.flushed
	for _, w := range opts.Restarted {
		if e.restarted == nil {
			e.restarted = map[broker.Workflow]bool{}
		}
		e.restarted[w] = true
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.sleep == nil {
		e.sleep = sleep
	}
	e.base, e.cancel = context.WithCancelCause(context.Background())
	return e, nil
}

// greatestNames is the greatest name in b of each first byte: one seek per
// first byte there is.
func greatestNames(b *bbolt.Bucket) (greatest [256]string) {
	c := b.Cursor()
	for k, _ := c.First(); k != nil; {
		first := k[0]
		var next []byte
		if first < 0xff {
			next, _ = c.Seek([]byte{first + 1})
		}
		var last []byte
		if next == nil {
			last, _ = c.Last()
		} else {
			last, _ = c.Prev()
		}
		greatest[first] = string(last)
		if next == nil {
			break
		}
		k, _ = c.Seek(next)
	}
	return greatest
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// record is an execution as stored, rewritten on every transition.
type record struct {
	Name      string                 `json:"name"`
	Workflow  broker.Workflow        `json:"workflow"`
	Input     json.RawMessage        `json:"input"`
	Status    broker.ExecutionStatus `json:"status"`
	StartedAt time.Time              `json:"started_at"`
	StoppedAt time.Time              `json:"stopped_at,omitzero"`
	Output    json.RawMessage        `json:"output,omitempty"`
	Error     string                 `json:"error,omitempty"`
	Cause     string                 `json:"cause,omitempty"`
	// While running: the state the execution is in, since when, and the
	// raw input it received; Resume runs that state again from there.
	State          string          `json:"state,omitempty"`
	StateEnteredAt time.Time       `json:"state_entered_at,omitzero"`
	StateInput     json.RawMessage `json:"state_input,omitempty"`
	// History lists the states entered, in order.
	History []string `json:"history"`
	// Caught is the name of the last error a Catch handled: an execution
	// that ends SUCCEEDED after one did so by handling a failure.
	Caught string `json:"caught,omitempty"`
}

func (r *record) execution() broker.Execution {
	return broker.Execution{
		Name:      r.Name,
		Workflow:  r.Workflow,
		Status:    r.Status,
		Input:     r.Input,
		Output:    r.Output,
		Error:     r.Error,
		Cause:     r.Cause,
		StartedAt: r.StartedAt,
		StoppedAt: r.StoppedAt,
	}
}

// errEnded makes an update give up: the execution is no longer running.
var errEnded = errors.New("execution has ended")

// update applies change to a stored execution that this process does not
// run, in one durable transaction; change may return an error to write
// nothing.
func (e *Engine) update(name string, change func(r *record) error) error {
	return e.commit.Update(func(tx *bbolt.Tx) error {
		b := executions(tx)
		r, err := getRecord(b, name)
		if err == nil {
			err = change(&r)
		}
		if err != nil {
			return groupcommit.Reject(err)
		}
		return putRecord(b, &r)
	})
}

// change applies fn to the live record of an execution this process runs,
// to be written with the next commit; fn may return an error, before it
// changes anything, to change nothing.
//
// The record is changed in place, under e.mu, as every reader copies it
// under e.mu (get, flush); its Name, Workflow and Input never change, which
// Start reads after. A transition appends to its History in place: the
// copies' Histories are shorter, and what they hold is never written again
// (History hands out a clipped slice).
func (e *Engine) change(name string, fn func(r *record) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.live[name]
	if r == nil {
		return broker.ErrExecutionNotFound
	}
	if err := fn(r); err != nil {
		return err
	}
	e.setLocked(r)
	return nil
}

// setLocked makes r the live record of its execution and schedules its
// write with the next commit; e.mu is held.
func (e *Engine) setLocked(r *record) {
	e.live[r.Name] = r
	e.gen++
	e.dirty[r.Name] = e.gen
	e.scheduleLocked()
}

// scheduleLocked has the dirty records written with the next commit, once;
// e.mu is held.
func (e *Engine) scheduleLocked() {
	if e.flushing {
		return
	}
	e.flushing = true
	e.commit.Later(e.flushFn, e.flushedFn)
}

// written is a record a flush writes: its name and the generation of its
// change it writes.
type written struct {
	name string
	gen  uint64
}

// flush writes the dirty records in tx, the next commit's (scheduleLocked).
// One flush is under way at a time, and the commit tells its outcome
// (flushed) before the next commit runs the next, so the two share the
// engine's batch.
func (e *Engine) flush(tx *bbolt.Tx) error {
	e.mu.Lock()
	clear(e.records)
	records, batch := e.records[:0], e.batch[:0]
	hold := e.holdLocked()
	for name, gen := range e.dirty {
		if r := e.live[name]; r != nil {
			if e.unwrittenStartLocked(r) {
				continue // written once it moves on (spawnLocked's exit schedules it)
			}
			if hold && e.restarted[r.Workflow] {
				continue
			}
			records = append(records, *r)
			batch = append(batch, written{name, gen})
		}
	}
	e.records, e.batch = records, batch
	e.flushing = false
	if hold {
		e.scheduleLocked() // the next commit looks again
	}
	e.mu.Unlock()
	if len(records) == 0 {
		return nil
	}
	b := executions(tx)
	for i := range records {
		if err := putRecord(b, &records[i]); err != nil {
			return err
		}
	}
	return nil
}

// flushed takes the outcome of a flush: the records it wrote are clean, and
// those of executions no goroutine runs leave memory.
func (e *Engine) flushed(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.log.Error("cannot record executions; they are written with the next commit", "error", err.Error())
		e.scheduleLocked()
		return
	}
	for _, w := range e.batch {
		if e.dirty[w.name] == w.gen {
			delete(e.dirty, w.name)
			e.forgetLocked(w.name)
		}
	}
}

// Records of restarted workflows (Options.Restarted) wait to be written
// together: until batchRecords are to write, or the first of them has
// waited batchAge, or the engine closes. Adjacent (UUIDv7 names), they
// share the leaf and branches each commit of the executions' tree writes.
const (
	batchRecords = 16
	batchAge     = time.Second
)

// holdLocked says this commit leaves the dirty records of restarted
// workflows for a later one, and notes since when they wait; e.mu is held.
func (e *Engine) holdLocked() bool {
	n := 0
	for name := range e.dirty {
		if r := e.live[name]; r != nil && e.restarted[r.Workflow] && !e.unwrittenStartLocked(r) {
			n++
		}
	}
	now := e.now()
	if n == 0 || n >= batchRecords || e.closed || (!e.heldSince.IsZero() && now.Sub(e.heldSince) >= batchAge) {
		e.heldSince = time.Time{}
		return false
	}
	if e.heldSince.IsZero() {
		e.heldSince = now
	}
	return true
}

// unwrittenStartLocked says r is a new execution of a restarted workflow
// (Options.Restarted) still in its first state in this process's goroutine:
// its record is not written yet; e.mu is held.
func (e *Engine) unwrittenStartLocked(r *record) bool {
	if !e.restarted[r.Workflow] || e.closed || len(r.History) != 1 || r.Status != broker.ExecutionRunning {
		return false
	}
	_, running := e.runs[r.Name]
	return running
}

// forgetLocked drops the live record of an execution that no goroutine
// runs (it ended, parked, or the engine closes) once it is written: the
// stored record is then the same; e.mu is held.
func (e *Engine) forgetLocked(name string) {
	_, dirty := e.dirty[name]
	_, running := e.runs[name]
	if _, live := e.live[name]; live && !dirty && !running {
		delete(e.live, name)
		e.forgets.Add(1)
	}
}

func getRecord(b *bbolt.Bucket, name string) (record, error) {
	data := b.Get([]byte(name))
	if data == nil {
		return record{}, broker.ErrExecutionNotFound
	}
	return decodeRecord(name, data)
}

// decodeRecord is getRecord's decoding, apart so that a name not found
// (every new execution's Start) allocates no record.
func decodeRecord(name string, data []byte) (record, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("decode execution %s: %w", name, err)
	}
	return r, nil
}

// putRecord writes r under its name: record and name in one buffer (bbolt
// copies the key, and keeps the value until the commit).
func putRecord(b *bbolt.Bucket, r *record) error {
	buf, err := appendRecord(make([]byte, 0, recordSize(r)+len(r.Name)), r)
	if err != nil {
		return err
	}
	n := len(buf)
	buf = append(buf, r.Name...)
	return b.Put(buf[n:], buf[:n:n])
}

// Start starts an execution of workflow, unless one with that name exists:
// then it returns nil if that one has the same input (compared as JSON),
// whether it still runs or not, and broker.ErrExecutionExists otherwise.
// The execution does not depend on ctx.
func (e *Engine) Start(ctx context.Context, workflow broker.Workflow, name string, input json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	def := e.defs[workflow]
	if def == nil {
		return fmt.Errorf("start %s: %w: %q", name, ErrUnknownWorkflow, workflow)
	}
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	canonical, err := canonicalJSON(input)
	if err != nil {
		return fmt.Errorf("start %s: input is not JSON: %w", name, err)
	}
	now := e.now()
	// The live record and its History's first room in one allocation: the
	// states an operation's execution enters before it parks (Begin, Done?,
	// Wait), which transitions append in place.
	live := &struct {
		record
		history [4]string
	}{}
	live.history[0] = def.startAt
	live.record = record{
		Name:           name,
		Workflow:       workflow,
		Input:          canonical,
		Status:         broker.ExecutionRunning,
		StartedAt:      now,
		State:          def.startAt,
		StateEnteredAt: now,
		StateInput:     canonical,
		History:        live.history[:1],
	}
	rec := &live.record

	// The stored record is read before e.mu is taken: a burst of Starts
	// queued on e.mu behind each other's reads of the file. A record that
	// left memory for the file since (forgets moved) is read again. A name
	// that cannot be on file (greatest) is not read.
	forgets := e.forgets.Load()
	e.mu.Lock()
	mayBeStored := name <= e.greatest[name[0]]
	e.mu.Unlock()
	stored, storedErr := record{}, error(broker.ErrExecutionNotFound)
	if mayBeStored {
		stored, storedErr = e.stored(name)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	old, ok := e.live[name]
	if !ok {
		if e.forgets.Load() != forgets {
			stored, storedErr = e.stored(name)
		}
		switch {
		case errors.Is(storedErr, broker.ErrExecutionNotFound):
		case storedErr != nil:
			e.mu.Unlock()
			return fmt.Errorf("start %s: %w", name, storedErr)
		default:
			old, ok = &stored, true
		}
	}
	if ok {
		e.mu.Unlock()
		if old.Workflow != workflow || !bytes.Equal(old.Input, canonical) {
			return fmt.Errorf("start %s: %w", name, broker.ErrExecutionExists)
		}
		return nil
	}
	if name > e.greatest[name[0]] {
		e.greatest[name[0]] = name
	}
	e.setLocked(rec)
	e.spawnLocked(def, *rec)
	e.mu.Unlock()
	e.log.LogAttrs(ctx, slog.LevelInfo, "execution started", slog.String("execution", name), slog.String("workflow", string(workflow)))
	return nil
}

// checkName applies Step Functions' rules for execution names.
func checkName(name string) error {
	if n := utf8.RuneCountInString(name); n < 1 || n > 80 || !utf8.ValidString(name) {
		return fmt.Errorf("%w %q: 1 to 80 characters", ErrInvalidName, name)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("<>{}[]?*\"#%\\^|~`$&,;:/", r) {
			return fmt.Errorf("%w %q: no whitespace, brackets, wildcards, control or special characters", ErrInvalidName, name)
		}
	}
	return nil
}

// Describe returns an execution as stored.
func (e *Engine) Describe(ctx context.Context, name string) (broker.Execution, error) {
	if err := ctx.Err(); err != nil {
		return broker.Execution{}, err
	}
	r, err := e.get(name)
	if err != nil {
		return broker.Execution{}, err
	}
	return r.execution(), nil
}

// History returns the names of the states an execution entered, in order. A
// state retried, or run again by Resume, appears once.
func (e *Engine) History(ctx context.Context, name string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := e.get(name)
	if err != nil {
		return nil, err
	}
	// Clipped: an append of the caller's must not write where the live
	// record's next transition does.
	return slices.Clip(r.History), nil
}

// get returns the live record of an execution, or else the stored one.
func (e *Engine) get(name string) (record, error) {
	e.mu.Lock()
	if r, ok := e.live[name]; ok {
		live := *r // under e.mu: change writes the record in place
		e.mu.Unlock()
		return live, nil
	}
	e.mu.Unlock()
	return e.stored(name)
}

// stored returns the stored record of an execution.
func (e *Engine) stored(name string) (record, error) {
	var r record
	err := e.db.View(func(tx *bbolt.Tx) error {
		var err error
		r, err = getRecord(tx.Bucket(bucketExecutions), name)
		return err
	})
	if err != nil && !errors.Is(err, broker.ErrExecutionNotFound) {
		err = fmt.Errorf("describe %s: %w", name, err)
	}
	return r, err
}

// Stop aborts a running execution: it is recorded ABORTED (Error
// ErrorAborted, the cause given) before its goroutine is told to stop, so
// the goroutine records nothing more. Stopping an ended execution is nil.
func (e *Engine) Stop(ctx context.Context, name, cause string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	stopped := false
	abort := func(r *record) error {
		if r.Status != broker.ExecutionRunning {
			return errEnded
		}
		r.Status, r.Error, r.Cause, r.StoppedAt = broker.ExecutionAborted, ErrorAborted, cause, e.now()
		r.State, r.StateInput, r.StateEnteredAt = "", nil, time.Time{}
		stopped = true
		return nil
	}
	// A parked execution is stopped as a live one: its timer first, so that
	// it cannot wake from the stored record while that is rewritten.
	e.mu.Lock()
	if t := e.parked[name]; t != nil {
		t.Stop()
		delete(e.parked, name)
		if _, ok := e.live[name]; !ok {
			if r, err := e.stored(name); err == nil {
				e.live[name] = &r
			}
		}
	}
	e.mu.Unlock()
	// A live execution is stopped in memory (written with the next commit);
	// one stored by an earlier process, at once.
	err := e.change(name, abort)
	if errors.Is(err, broker.ErrExecutionNotFound) {
		err = e.update(name, abort)
	}
	switch {
	case errors.Is(err, errEnded):
		return nil
	case errors.Is(err, broker.ErrExecutionNotFound):
		return err
	case err != nil:
		return fmt.Errorf("stop %s: %w", name, err)
	}
	if stopped {
		e.log.InfoContext(ctx, "execution stopped", "execution", name)
	}
	e.mu.Lock()
	if cancel := e.runs[name]; cancel != nil {
		cancel()
	}
	e.mu.Unlock()
	return nil
}

// Resume continues every execution stored as RUNNING that this engine does
// not run yet, from the state it was in: that state runs again from its
// start (Task steps are idempotent), except that a Wait only waits for what
// is left. An execution whose workflow is unknown is left as it is and
// reported in the error.
func (e *Engine) Resume(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var running []record
	err := e.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketExecutions).ForEach(func(k, v []byte) error {
			var r record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode execution %s: %w", k, err)
			}
			if r.Status == broker.ExecutionRunning {
				running = append(running, r)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	var errs []error
	for _, r := range running {
		def := e.defs[r.Workflow]
		if def == nil {
			errs = append(errs, fmt.Errorf("resume %s: %w: %q", r.Name, ErrUnknownWorkflow, r.Workflow))
			continue
		}
		if _, ok := e.live[r.Name]; ok {
			continue
		}
		if _, ok := e.parked[r.Name]; ok {
			continue
		}
		e.log.InfoContext(ctx, "execution resumed", "execution", r.Name, "workflow", string(r.Workflow), "state", r.State)
		e.live[r.Name] = &r
		e.spawnLocked(def, r)
	}
	return errors.Join(errs...)
}

// deleteBatch bounds the records one commit of DeleteEnded removes, so that
// the commits it makes stay as short as the broker's own.
const deleteBatch = 256

// DeleteEnded removes the stored records of the executions that ended
// before before, and returns how many it removed: the file keeps what the
// broker may still read (an operation's execution while the operation is
// kept, a campaign's for `ops upgrade status`), not every execution it
// ever ran. It reads the whole bucket, so callers run it seldom (the local
// broker's reaper: hourly). An execution this process runs, or holds in
// memory, is never removed, nor one stored as running (Resume's); a name
// removed may be started again.
func (e *Engine) DeleteEnded(ctx context.Context, before time.Time) (int, error) {
	var names [][]byte
	err := e.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketExecutions).ForEach(func(k, v []byte) error {
			if ended(v, before) {
				names = append(names, bytes.Clone(k))
			}
			return ctx.Err()
		})
	})
	if err != nil {
		return 0, fmt.Errorf("delete ended executions: %w", err)
	}
	deleted := 0
	for len(names) > 0 {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		batch := names[:min(deleteBatch, len(names))]
		names = names[len(batch):]
		n := 0
		err := e.commit.Update(func(tx *bbolt.Tx) error {
			n = 0
			b := executions(tx)
			e.mu.Lock()
			defer e.mu.Unlock()
			for _, name := range batch {
				if e.heldLocked(string(name)) {
					continue
				}
				// Read again in this transaction: only a record that is
				// still ended, and before, goes.
				if v := b.Get(name); v == nil || !ended(v, before) {
					continue
				}
				if err := b.Delete(name); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return deleted, fmt.Errorf("delete ended executions: %w", err)
		}
		deleted += n
	}
	return deleted, nil
}

// heldLocked says this process runs, parks or holds in memory the
// execution name; e.mu is held.
func (e *Engine) heldLocked(name string) bool {
	_, live := e.live[name]
	_, running := e.runs[name]
	_, parked := e.parked[name]
	return live || running || parked
}

// ended says the stored record data is of an execution that ended before
// before. A record it cannot read is kept (Resume reports it).
func ended(data []byte, before time.Time) bool {
	var r struct {
		Status    broker.ExecutionStatus `json:"status"`
		StoppedAt time.Time              `json:"stopped_at"`
	}
	if json.Unmarshal(data, &r) != nil {
		return false
	}
	return r.Status != broker.ExecutionRunning && !r.StoppedAt.IsZero() && r.StoppedAt.Before(before)
}

// Close stops every execution goroutine and waits for them, and for the
// worker calls they made, to return, then writes every execution as it is.
// Running executions stay RUNNING in the database, for Resume in the next
// process.
func (e *Engine) Close() error {
	e.mu.Lock()
	e.closed = true
	e.cancel(errClosing)
	for name, t := range e.parked {
		t.Stop() // the execution stays RUNNING in its Wait, for Resume
		delete(e.parked, name)
	}
	e.mu.Unlock()
	e.wg.Wait()
	if err := e.commit.Flush(); err != nil {
		return fmt.Errorf("local engine: write executions: %w", err)
	}
	return nil
}

// runnerIdle is how long a runner waits for another job before it ends: a
// broker under load keeps its runners, an idle one holds none.
const runnerIdle = time.Second

// run runs job, an execution (spawnLocked) or a worker call (invoke), on
// a runner: a goroutine kept for them, idle while it waits for the next.
// A worker call runs deep (the steps, the broker, sealing, the store,
// bbolt), and a new goroutine grew its stack there from the start through
// every doubling, each a copy of the frames so far: about 19 µs of every
// Task, as much as the rest of a Task's own work, and 3 µs more of every
// execution's start (docs/performance.md, session 43). A runner's stack
// has grown once. There are as many runners as jobs ran at once within
// the last runnerIdle; Close ends them.
func (e *Engine) run(job func()) {
	select {
	case e.jobs <- job:
		return
	default:
	}
	e.wg.Add(1)
	go e.runner(job)
}

// runner runs job, then the jobs handed to it, until none comes for
// runnerIdle or the engine closes.
func (e *Engine) runner(job func()) {
	defer e.wg.Done()
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		job()
		job = nil // let the job's closure go while the runner waits
		idle.Reset(runnerIdle)
		select {
		case job = <-e.jobs:
		case <-idle.C:
			return
		case <-e.base.Done():
			return
		}
	}
}

// spawnLocked starts the goroutine of an execution; e.mu is held.
func (e *Engine) spawnLocked(def *Definition, r record) {
	// One context: the execution's deadline, when it has one, and its
	// cancel (Stop), not one for each. The timeout counts from the start of
	// the execution, across restarts.
	var ctx context.Context
	var cancel context.CancelFunc
	if def.timeout > 0 {
		deadline := time.Now().Add(def.timeout - e.now().Sub(r.StartedAt))
		ctx, cancel = context.WithDeadlineCause(e.base, deadline, errExecutionTimeout)
	} else {
		ctx, cancel = context.WithCancel(e.base)
	}
	e.runs[r.Name] = cancel
	e.run(func() {
		var parkFor time.Duration
		defer func() {
			e.mu.Lock()
			delete(e.runs, r.Name)
			if live := e.live[r.Name]; parkFor > 0 && !e.closed && live != nil && live.Status == broker.ExecutionRunning {
				// The timer holds the name alone, not the record.
				name := r.Name
				e.parked[name] = time.AfterFunc(parkFor, func() { e.wake(name) })
			}
			if _, dirty := e.dirty[r.Name]; dirty {
				// A start left unwritten while it ran (unwrittenStartLocked)
				// goes with the next commit now.
				e.scheduleLocked()
			}
			e.forgetLocked(r.Name)
			e.mu.Unlock()
			cancel()
		}()
		parkFor = e.execute(ctx, def, r)
	})
}

// wake runs a parked execution again from its record, which says it is in
// its Wait; runWait then waits for what is left, if anything.
func (e *Engine) wake(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.parked[name]; !ok || e.closed {
		return // stopped, or the engine closed
	}
	delete(e.parked, name)
	r := e.live[name]
	if r == nil {
		stored, err := e.stored(name)
		if err != nil {
			// It stays RUNNING in its Wait: the next start resumes it.
			e.log.Error("cannot read a parked execution; it waits until resumed", "execution", name, "error", err.Error())
			return
		}
		r = &stored
	}
	def := e.defs[r.Workflow]
	if r.Status != broker.ExecutionRunning || def == nil {
		return
	}
	e.live[name] = r
	e.spawnLocked(def, *r)
}

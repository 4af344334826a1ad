package broker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// An outage is a driver's backend that does not answer: connection
// refused, a timeout, HTTP 5xx or 429, throttling, a cloud API's service
// error; every error of a driver that is not a *Failure. A workflow's Task
// does not fail on one: the broker records it on the operation (when it
// began, how many calls failed), says so in last_operation, and hands the
// workflow a wait (its Wait state, which costs a state transition, not a
// Lambda's time) before the next try, with backoff, until the plan's
// outage budget (catalog.Settings.OutageBudget) runs out; then the
// operation fails saying since when the backend was unreachable.
//
// A cleanup waits out an outage the same way (its Delete Task, on its
// workflow's Wait state), with the outage on the detached record, for
// longer (CleanupOutageBudget: nobody waits for a cleanup); then it gives
// up saying since when, and the reaper starts it again later.

// Unreachable is a transient error of a driver that says, in a few words fit
// for the user, why its backend did not answer ("HTTP 503", "CloudFormation:
// Throttling"). Reason must hold no credentials, parameters, account ids or
// addresses: last_operation shows it. A driver's other transient errors are
// outages too, shown without a reason.
type Unreachable struct {
	Reason string
	Err    error
}

func (e *Unreachable) Error() string { return e.Err.Error() }
func (e *Unreachable) Unwrap() error { return e.Err }

// TransientReason is Reason (TransientReason).
func (e *Unreachable) TransientReason() string { return e.Reason }

// OutageReason is the user's reason of a transient driver error: the
// reason of a TransientReason it wraps (an *Unreachable, or a driver's own
// type, such as the function driver's), or "".
func OutageReason(err error) string {
	var r TransientReason
	if errors.As(err, &r) {
		return CleanLine(r.TransientReason())
	}
	return ""
}

// The backoff between the tries of an operation's change during an outage:
// the first wait, doubled after each failed call up to the last.
const (
	OutageFirstWait = 15 * time.Second
	OutageMaxWait   = 5 * time.Minute
)

// The backoff and budget of a cleanup's outage: as long as the hours of
// retries the cleanup workflow gave a backend before, with fewer calls.
const (
	CleanupOutageFirstWait = time.Minute
	CleanupOutageMaxWait   = 30 * time.Minute
	CleanupOutageBudget    = 4 * time.Hour
)

// backoff is how an outage is waited out: the first wait, doubled after
// each failed call up to most, until budget has passed since it began.
type backoff struct{ first, most, budget time.Duration }

// next is the wait after the n-th failed call (n ≥ 1) of an outage that
// began at since; false once the budget has run out. The last wait ends
// when the budget does, so that the failure comes when it says.
func (b backoff) next(since, now time.Time, n int) (time.Duration, bool) {
	left := since.Add(b.budget).Sub(now)
	if left <= 0 {
		return 0, false
	}
	wait := b.most
	if n <= 10 {
		wait = min(b.most, b.first<<(n-1))
	}
	return min(wait, left.Round(time.Second)+time.Second), true
}

// waitOut records a transient error of f's driver as an outage the
// operation waits out: the record says so (and when it began, and how many
// calls failed), in the one write a Task makes; the workflow waits as the
// returned progress says before it tries again. When the outage has lasted
// the plan's budget, it returns the *Failure that fails the operation.
// begin says the call was Begin: the next Task then begins again, since the
// change may not have started.
func (b *Broker) waitOut(ctx context.Context, f *flight, begin bool, cause error) (TaskProgress, error) {
	now := b.Now()
	op := f.op
	if op.OutageSince.IsZero() {
		op.OutageSince, op.OutageAttempts, op.OutageInBegin = now, 0, begin
	}
	op.OutageAttempts++
	reason := OutageReason(cause)
	budget := f.plan.Settings.OutageBudget
	b.Logger.WarnContext(ctx, "the driver's backend is unreachable; the operation waits it out",
		"outage_attempts", op.OutageAttempts, "outage_since", op.OutageSince)
	wait, ok := backoff{OutageFirstWait, OutageMaxWait, budget}.next(op.OutageSince, now, op.OutageAttempts)
	if !ok {
		return TaskProgress{}, &Failure{Description: outageFailure(op, reason, budget), Detail: cause.Error()}
	}
	f.op = op
	p := Progress{RetryAfter: wait, Description: outageProgress(op, reason, wait)}
	if err := b.recordProgress(ctx, f, p); err != nil {
		if errors.Is(err, ErrTakenOver) {
			return TaskProgress{Done: true}, nil
		}
		return TaskProgress{}, err
	}
	return waitFor(wait), nil
}

// endOutage clears the outage of an operation whose driver answered, so
// that its next write says so: the outage's description gives way to the
// driver's, or to the generic one.
func (f *flight) endOutage() {
	// The driver answered the call: the next Task need not begin again (a
	// Task that waited for a slot set this without an outage).
	f.op.OutageInBegin = false
	if f.op.OutageSince.IsZero() {
		return
	}
	f.op.OutageSince, f.op.OutageAttempts, f.op.OutageInBegin = time.Time{}, 0, false
	f.op.Description = ""
}

// outageProgress is last_operation's description during an outage.
func outageProgress(op Operation, reason string, wait time.Duration) string {
	return fmt.Sprintf("The service's backend is unreachable%s; retrying, attempt %d, next in %s.",
		parenthesised(reason), op.OutageAttempts, humanDuration(wait))
}

// outageFailure is the description of an operation that an outage failed.
func outageFailure(op Operation, reason string, budget time.Duration) string {
	return fmt.Sprintf("The %s failed: %s, the plan's limit); try again later.",
		op.Kind, unreachableSince(reason, op.OutageSince, op.OutageAttempts, budget))
}

// unreachableSince says how long an outage lasted, to the limit it hit,
// for the failure it ends in: "the service's backend has been unreachable
// (HTTP 503) since 2025-03-01 12:00:00 UTC (9 attempts over 30 minutes"
// (the caller closes the parenthesis, after the limit's name).
func unreachableSince(reason string, since time.Time, attempts int, budget time.Duration) string {
	return fmt.Sprintf("the service's backend has been unreachable%s since %s (%d attempts over %s",
		parenthesised(reason), since.UTC().Format("2006-01-02 15:04:05 UTC"), attempts, humanDuration(budget))
}

// waitOutCleanup records a transient error of d's driver as an outage its
// cleanup waits out: the detached record says so (since when, the
// attempts, why, the next try), in one write; the workflow waits as the
// returned progress says before it calls again. When the outage has
// lasted CleanupOutageBudget, it returns the *Failure with which the
// cleanup gives up.
func (b *Broker) waitOutCleanup(ctx context.Context, d Detached, cause error) (TaskProgress, error) {
	now := b.Now()
	next := d
	if !next.InOutage() {
		next.OutageSince, next.OutageAttempts = now, 0
	}
	next.OutageAttempts++
	next.OutageReason = OutageReason(cause)
	b.Logger.WarnContext(ctx, "the driver's backend is unreachable; the cleanup waits it out",
		"outage_attempts", next.OutageAttempts, "outage_since", next.OutageSince, "error", cause.Error())
	wait, ok := backoff{CleanupOutageFirstWait, CleanupOutageMaxWait, CleanupOutageBudget}.next(next.OutageSince, now, next.OutageAttempts)
	if !ok {
		then := "it stays listed for an operator, who may retry it (ops cleanup)."
		if d.Attempts < CleanupMaxAttempts {
			then = fmt.Sprintf("the broker tries again %s later.", humanDuration(CleanupRetryAfter))
		}
		return TaskProgress{}, &Failure{Detail: cause.Error(),
			Description: fmt.Sprintf("The cleanup gave up: %s, the cleanup's limit); %s",
				unreachableSince(next.OutageReason, next.OutageSince, next.OutageAttempts, CleanupOutageBudget), then)}
	}
	next.NextTryAt, next.UpdatedAt = now.Add(wait), now
	err := b.Detached.UpdateDetached(ctx, next, d.Attempts)
	if _, ok := conflictOf(err); ok || errors.Is(err, ErrNotFound) {
		// Another cleanup started meanwhile, or deleted the resource: its
		// record is that cleanup's to write; this one waits as it would.
		err = nil
	}
	if err != nil {
		return TaskProgress{}, fmt.Errorf("record the outage of cleanup %s: %w", d.ID, err)
	}
	return waitFor(wait), nil
}

func parenthesised(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// humanDuration says d in words: "45 seconds", "2 minutes", "1 hour 30
// minutes".
func humanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	unit := func(n int64, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %ss", n, one)
	}
	switch {
	case d < time.Minute:
		return unit(int64(d/time.Second), "second")
	case d < time.Hour:
		m, s := int64(d/time.Minute), int64(d%time.Minute/time.Second)
		if s == 0 {
			return unit(m, "minute")
		}
		return unit(m, "minute") + " " + unit(s, "second")
	}
	h, m := int64(d/time.Hour), int64(d%time.Hour/time.Minute)
	if m == 0 {
		return unit(h, "hour")
	}
	return unit(h, "hour") + " " + unit(m, "minute")
}

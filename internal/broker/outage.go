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
		return r.TransientReason()
	}
	return ""
}

// The backoff between the tries of an operation's change during an outage:
// the first wait, doubled after each failed call up to the last.
const (
	OutageFirstWait = 15 * time.Second
	OutageMaxWait   = 5 * time.Minute
)

// outageWait is the wait after the n-th failed call of an outage (n ≥ 1).
func outageWait(n int) time.Duration {
	if n > 10 {
		return OutageMaxWait
	}
	return min(OutageMaxWait, OutageFirstWait<<(n-1))
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
	left := op.OutageSince.Add(budget).Sub(now)
	b.Logger.WarnContext(ctx, "the driver's backend is unreachable; the operation waits it out",
		"outage_attempts", op.OutageAttempts, "outage_since", op.OutageSince)
	if left <= 0 {
		return TaskProgress{}, &Failure{Description: outageFailure(op, reason, budget), Detail: cause.Error()}
	}
	// The last wait ends when the budget does, so that the failure comes
	// when the plan says.
	wait := min(outageWait(op.OutageAttempts), left.Round(time.Second)+time.Second)
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
	return fmt.Sprintf("The %s failed: the service's backend has been unreachable%s since %s (%d attempts over %s, the plan's limit); try again later.",
		op.Kind, parenthesised(reason), op.OutageSince.UTC().Format("2006-01-02 15:04:05 UTC"), op.OutageAttempts, humanDuration(budget))
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

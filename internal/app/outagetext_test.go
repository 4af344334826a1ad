package app

import (
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/broker"
)

// TestAnOutageShowsTheDateOfAnotherDay: ops shows an outage's times as
// hour and minute (UTC), with the date when it is not the broker's today:
// a next try after midnight, a start the day before.
func TestAnOutageShowsTheDateOfAnotherDay(t *testing.T) {
	now := time.Date(2026, 11, 29, 23, 59, 30, 0, time.UTC)
	for _, c := range []struct {
		since, next time.Time
		want        string
	}{
		{now.Add(-2 * time.Minute), now.Add(20 * time.Second),
			"backend unreachable (HTTP 503) since 23:57, attempt 2, next try 23:59 (UTC)"},
		{now.Add(-2 * time.Minute), now.Add(time.Minute),
			"backend unreachable (HTTP 503) since 23:57, attempt 2, next try 2026-11-30 00:00 (UTC)"},
		{now.Add(-24 * time.Hour), now.Add(20 * time.Second),
			"backend unreachable (HTTP 503) since 2026-11-28 23:59, attempt 2, next try 23:59 (UTC)"},
	} {
		d := broker.Detached{OutageSince: c.since, OutageAttempts: 2, OutageReason: "HTTP 503", NextTryAt: c.next}
		if got := outageText(d, now); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

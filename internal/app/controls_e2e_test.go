package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function"
	"github.com/serverless-osb/broker/internal/waittest"
)

// hostile is a target's description with what a terminal acts on: a CSI
// that clears the line, an OSC 0 window title, an OSC 52 clipboard write,
// a C1 CSI and bidi overrides.
const hostile = "The quota\x1b[2K\x1b]0;owned\x07 is\x1b]52;c;cm0gLXJmIH4=\x07 \u009b31mexhausted\u202e.\u2066\u200f"

// controlIn names the first control character in s that a terminal acts
// on, or "" when there is none. For JSON, an escaped one counts too.
func controlIn(s string) string {
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) || r == 0x061c || r == 0x200e || r == 0x200f ||
			(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return fmt.Sprintf("%U", r)
		}
	}
	for _, esc := range []string{`\u001b`, `\u0007`, `\u009b`, `\u202e`} {
		if strings.Contains(s, esc) {
			return esc
		}
	}
	return ""
}

// TestATargetsWordsReachNoTerminalWithTheirControls: a target whose
// failure (and cleanup failure) descriptions hold escape sequences fails
// a provision; last_operation, the synchronous answer, `ops operation` and
// `ops detached` (text and JSON) show the words without a control
// character.
func TestATargetsWordsReachNoTerminalWithTheirControls(t *testing.T) {
	dt := startTarget(t, func(req function.Request, n int) (function.Answer, bool) {
		return function.Answer{Version: req.Version,
			Error: &function.AnswerError{Kind: function.ErrorPermanent, Description: hostile}}, true
	})
	b, e := startOutageBroker(t, dt, newOutageClock(), nil)

	_, err := e.c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "ctl-sync", ServiceID: e.service, PlanID: e.sync,
		OrganizationGUID: "org", SpaceGUID: "space"})
	h, ok := osb.IsHTTPError(err)
	if !ok || h.Description == nil || !strings.Contains(*h.Description, "exhausted") || controlIn(*h.Description) != "" {
		t.Errorf("synchronous provision: %v, want a 422 with the target's words and no control character", err)
	}

	r := e.provision("ctl-1", e.asyncOnly, true, nil)
	state, desc := e.poll("ctl-1", r.OperationKey)
	if state != osb.StateFailed || !strings.Contains(desc, "exhausted") || controlIn(desc) != "" {
		t.Errorf("last_operation: %s %q, want failed, the target's words, no control character", state, desc)
	}
	// The cleanups of what the provisions made fail for good, with the
	// same words: the detached records stay, failed.
	waittest.Until(t, func() error {
		ds, err := b.Local.Broker.Detached.ListDetached(t.Context())
		if err != nil || len(ds) != 2 || ds[0].State != broker.DetachedFailed || ds[1].State != broker.DetachedFailed {
			return fmt.Errorf("%d detached (%v), want two, failed", len(ds), err)
		}
		return nil
	})

	for _, args := range [][]string{{"operation", "ctl-1"}, {"detached"}} {
		var text, js bytes.Buffer
		if err := app.Ops(t.Context(), b.Local.Broker, args, &text); err != nil {
			t.Fatal(err)
		}
		if err := app.OpsJSON(t.Context(), b.Local.Broker, args, &js); err != nil {
			t.Fatal(err)
		}
		var decoded any
		if err := json.Unmarshal(js.Bytes(), &decoded); err != nil {
			t.Fatalf("ops --json %v: %v", args, err)
		}
		again, _ := json.Marshal(decoded)
		for what, out := range map[string]string{"text": text.String(), "JSON": js.String(), "JSON decoded": string(again)} {
			if !strings.Contains(out, "exhausted") {
				t.Errorf("ops %v (%s) does not show the target's words:\n%s", args, what, out)
			}
			if c := controlIn(out); c != "" {
				t.Errorf("ops %v (%s) holds %s:\n%q", args, what, c, out)
			}
		}
	}
}

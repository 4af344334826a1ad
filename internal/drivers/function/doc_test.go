package function_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function"
)

// TestTheGuideAndTheSchemaAgree reads the protocol's guide,
// docs/functions.md (what a target's author reads), and the protocol's
// schema: every field the schema names is in the guide, and the limits and
// timings the guide states are the code's.
func TestTheGuideAndTheSchemaAgree(t *testing.T) {
	raw, err := os.ReadFile("../../../docs/functions.md")
	if err != nil {
		t.Fatal(err)
	}
	guide := string(raw)
	start := strings.Index(guide, "# Services in any language")
	if start < 0 {
		t.Fatal("docs/functions.md has no section \"Services in any language\"")
	}
	section := strings.Join(strings.Fields(guide[start:]), " ")

	var schema map[string]any
	if err := json.Unmarshal(function.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	var fields []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				for name := range props {
					fields = append(fields, name)
				}
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(schema["$defs"])
	slices.Sort(fields)
	for _, name := range slices.Compact(fields) {
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("the schema's field %s is not in the guide's protocol section", name)
		}
	}
	for _, kind := range []string{function.ErrorPermanent, function.ErrorTransient, function.CallBegin, function.CallCheck, function.CallCleanup} {
		if !strings.Contains(section, "`"+kind+"`") {
			t.Errorf("%s is not in the guide's protocol section", kind)
		}
	}
	for _, stated := range []string{
		fmt.Sprintf("over %d KiB", function.MaxAnswerBytes>>10),
		fmt.Sprintf("`state` over %d KiB", function.MaxStateBytes>>10),
		fmt.Sprintf("within %d s of the request's start (`broker.SyncWait`)", int(broker.SyncWait.Seconds())),
		fmt.Sprintf("past %d s: 503", int(broker.SyncWait.Seconds())),
		fmt.Sprintf("tried 4 times, %g, %g and %g s apart (`broker.Backoff`)", broker.Backoff.Seconds(), 2*broker.Backoff.Seconds(), 4*broker.Backoff.Seconds()),
		fmt.Sprintf("(1-%d, default %d)", int(function.MaxTimeout.Seconds()), int(function.DefaultTimeout.Seconds())),
	} {
		if !strings.Contains(section, stated) {
			t.Errorf("the guide's protocol section does not say %q", stated)
		}
	}
	// What the section says users see is what Classify says.
	for _, desc := range []string{"breaks the function protocol (", "without an answer of the function protocol", "is unavailable (HTTP 503)"} {
		if !strings.Contains(section, desc) {
			t.Errorf("the guide's table lacks %q", desc)
		}
	}
}

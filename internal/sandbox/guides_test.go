package sandbox_test

import (
	"path/filepath"
	"testing"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/serverless-osb/broker/internal/guidetest"
	"github.com/serverless-osb/broker/internal/osbtest"
)

// TestTheGuidesRunInTheSandbox runs, against the suite's sandbox, the shell
// blocks docs/sandbox.md says work there as they are, as internal/guidetest
// runs them, the `make run` line standing for the sandbox and its password
// for the guide's: the README's curl tour (the demo service), and the
// example services' commands (docs/aws-services.md), the `moto_server` line
// standing for the sandbox's moto, whose IAM is enforced: the last command
// lists the bucket with aws-cli and the binding's keys.
func TestTheGuidesRunInTheSandbox(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	all := guidetest.Blocks(t, root)
	for _, file := range []string{"README.md", "docs/aws-services.md"} {
		t.Run(file, func(t *testing.T) {
			s := &guidetest.Session{T: t, Root: root, Moto: shared.Moto, MakeRun: func([]string) guidetest.Broker {
				return guidetest.Broker{URL: shared.URL, Username: shared.Username, Password: shared.Password}
			}}
			ran := 0
			for _, b := range all[file] {
				if b.NotRun == "" {
					s.Run(b)
					ran++
				}
			}
			if ran == 0 {
				t.Fatalf("%s has no block to run", file)
			}
		})
	}
	// The example services' commands leave their bucket and binding, which
	// the suite's other tests must not find.
	removeExampleBucket(t)
}

// removeExampleBucket unbinds and deprovisions what docs/aws-services.md's
// commands made (b-1, bound as k-1), if they made it.
func removeExampleBucket(t *testing.T) {
	const service, plan = "319021a7-ff81-4506-bf4c-07545d1bfc47", "66facbde-e025-420b-99d7-41ac8c6f0db8"
	c := client(t, shared)
	unbind, err := c.Unbind(&osb.UnbindRequest{InstanceID: "b-1", BindingID: "k-1", ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
	switch {
	case osbtest.IsStatus(err, 410):
	case err != nil:
		t.Fatalf("unbind k-1: %v", err)
	case unbind.Async:
		if state, _ := osbtest.PollBinding(t, c, "b-1", "k-1", unbind.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
			t.Fatalf("unbind k-1 ended %s", state)
		}
	}
	deprovision, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "b-1", ServiceID: service, PlanID: plan, AcceptsIncomplete: true})
	switch {
	case osbtest.IsStatus(err, 410):
	case err != nil:
		t.Fatalf("deprovision b-1: %v", err)
	case deprovision.Async:
		if state, desc := osbtest.Poll(t, c, "b-1", service, deprovision.OperationKey); state != osbtest.Gone && state != osb.StateSucceeded {
			t.Fatalf("deprovision b-1 ended %s: %s", state, desc)
		}
	}
}

package app_test

import (
	"context"
	"slices"
	"testing"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/drivers/function/functiontest"
)

// The fault-injection suite (faults_test.go) with the function driver: the
// same lifecycles, crashed at every call through the ports, on plans whose
// work an HTTP target does. Besides the broker's three promises, the
// target must hold nothing that the broker does not: every instance and
// binding it holds belongs to a live instance or binding, and every ready
// one is there.
func TestNothingStuckNothingOrphanedWithTheFunctionDriver(t *testing.T) {
	t.Parallel()
	target := functiontest.Start(t, functionSecret)
	base := functionOptions(t, target, functionSecret)
	check := func(t *testing.T, b *apptest.Broker, f *faultFixture) {
		t.Helper()
		checkTargetHoldsWhatTheBrokerHas(t, b, f, target)
	}
	runFaultSuiteWith(t, faultRun{base: base, check: check}, []bool{false, true})
}

// checkTargetHoldsWhatTheBrokerHas compares the target's instance and
// binding of the fixture with the broker's. A deprovision or unbind that
// failed (crashed) after the target deleted leaves the instance or binding
// usable in the broker's eyes, for the platform to delete again: it need
// not be held.
func checkTargetHoldsWhatTheBrokerHas(t *testing.T, b *apptest.Broker, f *faultFixture, target *functiontest.Target) {
	t.Helper()
	ctx := context.Background()
	ops, err := b.Local.Store.ListOperations(ctx, f.instance)
	if err != nil {
		t.Fatal(err)
	}
	deletionFailed := map[broker.OperationKind]bool{}
	for _, op := range ops {
		if op.State == broker.OperationFailed {
			deletionFailed[op.Kind] = true
		}
	}
	inst, err := b.Local.Store.GetInstance(ctx, f.instance)
	instanceExists := err == nil
	held := slices.Contains(target.Instances(), f.instance)
	switch {
	case held && !instanceExists:
		t.Errorf("the target holds instance %s, which the broker does not have", f.instance)
	case !held && instanceExists && inst.State == broker.InstanceReady && !deletionFailed[broker.KindDeprovision]:
		t.Errorf("instance %s is ready but the target does not hold it", f.instance)
	}
	binding, err := b.Local.Store.GetBinding(ctx, f.instance, f.binding)
	bindingExists := err == nil
	for _, id := range target.Bindings(f.instance) {
		if id != f.binding || !bindingExists {
			t.Errorf("the target holds binding %s of %s, which the broker does not have", id, f.instance)
		}
	}
	if bindingExists && binding.State == broker.BindingReady && !deletionFailed[broker.KindUnbind] && !slices.Contains(target.Bindings(f.instance), f.binding) {
		t.Errorf("binding %s is ready but the target does not hold it", f.binding)
	}
}

package dynamo

import (
	"errors"
	"fmt"
	"strings"

	"github.com/serverless-osb/broker/internal/broker"
)

// The checks below are the bolt store's: they reject calls that no caller
// following the port makes, and fail before any write.

// checkIDs rejects ids that the bolt store cannot key (empty, or holding
// NUL), so that both stores accept the same ids.
func checkIDs(ids ...string) error {
	for _, id := range ids {
		if id == "" || strings.Contains(id, "\x00") {
			return fmt.Errorf("invalid id %q: ids must be non-empty and must not contain NUL", id)
		}
	}
	return nil
}

func sameInstance(op broker.Operation, instanceID string) error {
	if op.InstanceID != instanceID {
		return fmt.Errorf("operation %s is recorded under instance %q, not %q", op.ID, op.InstanceID, instanceID)
	}
	return nil
}

// checkHalted also refuses a halted operation that is the new one: a
// transaction cannot write one item twice.
func checkHalted(halted *broker.Operation, holder string, op broker.Operation, instanceID string) error {
	switch {
	case halted == nil:
		return nil
	case holder == "" || halted.ID != holder:
		return fmt.Errorf("halted operation %s is not the holder %q", halted.ID, holder)
	case !halted.Finished():
		return fmt.Errorf("halted operation %s is still %s", halted.ID, halted.State)
	case halted.ID == op.ID:
		return fmt.Errorf("operation %s cannot halt itself", op.ID)
	}
	return sameInstance(*halted, instanceID)
}

func checkFinish(f broker.Finish, holdsInstance, holdsBinding bool) error {
	op := f.Op
	if err := checkIDs(op.InstanceID, op.ID); err != nil {
		return err
	}
	switch {
	case !op.Finished():
		return errors.New("the operation to record is still in progress")
	case f.Instance != nil && f.DeleteInstance:
		return errors.New("both Instance and DeleteInstance are set")
	case f.Binding != nil && f.DeleteBinding:
		return errors.New("both Binding and DeleteBinding are set")
	case holdsInstance && (holdsBinding || f.ReleaseBinding):
		return errors.New("an operation holds its instance or a binding, not both")
	case f.Instance != nil && f.Instance.ID != op.InstanceID:
		return fmt.Errorf("instance %s is not the operation's instance %s", f.Instance.ID, op.InstanceID)
	case f.Binding != nil && f.Binding.InstanceID != op.InstanceID:
		return fmt.Errorf("binding %s/%s is not under the operation's instance %s",
			f.Binding.InstanceID, f.Binding.ID, op.InstanceID)
	case f.DeleteBinding && op.BindingID == "":
		return errors.New("DeleteBinding is set but the operation names no binding")
	}
	if f.Binding != nil {
		return checkIDs(f.Binding.ID)
	}
	return nil
}

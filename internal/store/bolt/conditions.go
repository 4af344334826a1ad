package bolt

import (
	"fmt"

	"github.com/serverless-osb/broker/internal/broker"
)

// stored is what the conditions read of a stored item; nil when the item
// is not stored.
type stored struct {
	op, state string
	// service and plan are an instance's ids.
	service, plan string
	version       int64
	bindingOps    int
	attempts      int
}

func storedInstance(i *broker.Instance) *stored {
	if i == nil {
		return nil
	}
	return &stored{op: i.Op, state: string(i.State), version: i.Version, bindingOps: i.BindingOps,
		service: i.ServiceID, plan: i.PlanID}
}

func storedBinding(b *broker.Binding) *stored {
	if b == nil {
		return nil
	}
	return &stored{op: b.Op, state: string(b.State), version: b.Version}
}

func storedOperation(op *broker.Operation) *stored {
	if op == nil {
		return nil
	}
	return &stored{state: string(op.State)}
}

func storedDetached(d *broker.Detached) *stored {
	if d == nil {
		return nil
	}
	return &stored{attempts: d.Attempts}
}

// meets reports whether item meets every condition of conds: the
// translation of broker.Condition for this store, which every write uses.
func meets(item *stored, conds []broker.Condition) (bool, error) {
	for _, c := range conds {
		var ok bool
		switch c.Kind {
		case broker.CondMissing:
			ok = item == nil
		case broker.CondHeldBy:
			ok = item != nil && item.op == c.Text
		case broker.CondVersion:
			ok = item != nil && item.version == c.N
		case broker.CondState:
			ok = item != nil && item.state == c.Text
		case broker.CondNoBindingOps:
			ok = item != nil && item.bindingOps == 0
		case broker.CondBindingOps:
			ok = item != nil && item.bindingOps > 0
		case broker.CondAttempts:
			ok = item != nil && int64(item.attempts) == c.N
		case broker.CondService:
			ok = item != nil && item.service == c.Text
		case broker.CondPlan:
			ok = item != nil && item.plan == c.Text
		default:
			return false, fmt.Errorf("unknown condition %v", c)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// expect returns *broker.ConflictError with every item e names, as stored
// (nil when missing), unless each of them meets its conditions.
func expect(e broker.Expect, inst *broker.Instance, b *broker.Binding, op *broker.Operation) error {
	held := true
	for _, check := range []struct {
		item  *stored
		conds []broker.Condition
	}{
		{storedInstance(inst), e.Instance},
		{storedBinding(b), e.Binding},
		{storedOperation(op), e.Operation},
	} {
		ok, err := meets(check.item, check.conds)
		if err != nil {
			return err
		}
		held = held && ok
	}
	if held {
		return nil
	}
	c := &broker.ConflictError{}
	if e.Instance != nil {
		c.Instance = inst
	}
	if e.Binding != nil {
		c.Binding = b
	}
	if e.Operation != nil {
		c.Operation = op
	}
	return c
}

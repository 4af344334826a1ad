package dynamo

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/serverless-osb/broker/internal/broker"
)

// Attribute names that conditions use: the storage types' (item.go).
var (
	namePK         = expression.Name(attrPK)
	nameOp         = expression.Name(attrOp)
	nameState      = expression.Name(attrState)
	nameVersion    = expression.Name(attrVersion)
	nameBindingOps = expression.Name(attrBindingOps)
	nameAttempts   = expression.Name(attrAttempts)
	nameServiceID  = expression.Name(attrServiceID)
	namePlanID     = expression.Name(attrPlanID)
)

// condition translates conds into one condition expression that holds when
// every one of them does: the translation of broker.Condition for this
// store, which every conditional write uses. No conditions give an unset
// builder (no condition). A comparison of an attribute fails on a missing
// item, as every kind but CondMissing must.
func condition(conds []broker.Condition) (expression.ConditionBuilder, error) {
	var all expression.ConditionBuilder
	for _, c := range conds {
		var one expression.ConditionBuilder
		switch c.Kind {
		case broker.CondMissing:
			one = expression.AttributeNotExists(namePK)
		case broker.CondHeldBy:
			one = nameOp.Equal(expression.Value(c.Text))
			if c.Text == "" {
				// op is omitted from an idle item ("" is accepted too), and
				// a missing item has no op either.
				one = expression.AttributeExists(namePK).
					And(expression.Or(expression.AttributeNotExists(nameOp), one))
			}
		case broker.CondVersion:
			one = nameVersion.Equal(expression.Value(c.N))
		case broker.CondState:
			one = nameState.Equal(expression.Value(c.Text))
		case broker.CondNoBindingOps:
			one = nameBindingOps.Equal(expression.Value(0))
		case broker.CondBindingOps:
			one = nameBindingOps.GreaterThan(expression.Value(0))
		case broker.CondAttempts:
			one = nameAttempts.Equal(expression.Value(c.N))
		case broker.CondService:
			one = nameServiceID.Equal(expression.Value(c.Text))
		case broker.CondPlan:
			one = namePlanID.Equal(expression.Value(c.Text))
		default:
			return expression.ConditionBuilder{}, fmt.Errorf("unknown condition %v", c)
		}
		if all.IsSet() {
			all = all.And(one)
		} else {
			all = one
		}
	}
	return all, nil
}

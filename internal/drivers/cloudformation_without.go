//go:build osb_without_cloudformation

package drivers

import (
	"context"

	"github.com/serverless-osb/broker/internal/broker"
)

func cloudformationKind() Kind { return omitted("cloudformation") }

// RunStacks: this bootstrap has no CloudFormation driver.
func RunStacks(context.Context, Env) (broker.Driver, error) {
	return nil, errOmitted("cloudformation")
}

// AdmitStacks: this bootstrap has no CloudFormation driver.
func AdmitStacks(context.Context, Env) (broker.Driver, error) {
	return nil, errOmitted("cloudformation")
}

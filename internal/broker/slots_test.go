package broker_test

import (
	"testing"

	"github.com/serverless-osb/broker/internal/broker"
	"github.com/serverless-osb/broker/internal/store/storetest"
)

func TestMemorySlotsContract(t *testing.T) {
	storetest.RunSlots(t, func(t *testing.T, perPlan int) broker.Slots { return broker.NewMemorySlots(perPlan) })
}

package storetest

import "github.com/serverless-osb/broker/internal/broker"

// ConditionCase is one list of conditions and whether it holds of each
// stored item of ConditionInstances and ConditionDetached, by name. A
// store's test of its one translation of broker.Condition runs every case
// against those items as it stores them (bolt's TestMeets, dynamo's
// TestCondition).
type ConditionCase struct {
	Name  string
	Conds []broker.Condition
	Holds map[string]bool
}

// ConditionInstances are the instances the cases name, by name, which is
// also their id; nil is an instance not stored.
var ConditionInstances = map[string]*broker.Instance{
	"idle": {ID: "idle", State: broker.InstanceReady, Version: 3,
		InstanceRequest: broker.InstanceRequest{ServiceID: "svc-1", PlanID: "plan-1"}},
	"held": {ID: "held", State: broker.InstanceUpdating, Op: "op-1", Version: 4, BindingOps: 1,
		InstanceRequest: broker.InstanceRequest{ServiceID: "svc-1", PlanID: "plan-2"}},
	"missing": nil,
}

// ConditionDetached are the detached records the cases name, by name,
// which is also their id; nil is a record not stored.
var ConditionDetached = map[string]*broker.Detached{
	"detached":         {ID: "detached", InstanceID: "i", Name: "n", Attempts: 2},
	"missing detached": nil,
}

// ConditionCases: each kind of condition, alone and combined, and the
// items it holds of.
var ConditionCases = []ConditionCase{
	{"missing", []broker.Condition{broker.Missing},
		map[string]bool{"idle": false, "held": false, "missing": true, "missing detached": true}},
	{"idle", []broker.Condition{broker.HeldBy("")}, map[string]bool{"idle": true, "held": false, "missing": false}},
	{"held by op-1", []broker.Condition{broker.HeldBy("op-1")}, map[string]bool{"idle": false, "held": true, "missing": false}},
	{"at version 3", []broker.Condition{broker.AtVersion(3)}, map[string]bool{"idle": true, "held": false, "missing": false}},
	{"ready", []broker.Condition{broker.InState(broker.InstanceReady)}, map[string]bool{"idle": true, "held": false, "missing": false}},
	{"no binding operations", []broker.Condition{broker.NoBindingOps}, map[string]bool{"idle": true, "held": false, "missing": false}},
	{"binding operations", []broker.Condition{broker.HasBindingOps}, map[string]bool{"idle": false, "held": true, "missing": false}},
	{"idle at version 3", []broker.Condition{broker.HeldBy(""), broker.AtVersion(3)}, map[string]bool{"idle": true, "held": false}},
	{"idle at version 4", []broker.Condition{broker.HeldBy(""), broker.AtVersion(4)}, map[string]bool{"idle": false, "held": false}},
	{"of service svc-1", []broker.Condition{broker.OfService("svc-1")}, map[string]bool{"idle": true, "held": true, "missing": false}},
	{"of service svc-2", []broker.Condition{broker.OfService("svc-2")}, map[string]bool{"idle": false, "held": false}},
	{"of plan plan-1", []broker.Condition{broker.OfPlan("plan-1")}, map[string]bool{"idle": true, "held": false, "missing": false}},
	{"of service svc-1 and plan plan-2", []broker.Condition{broker.OfService("svc-1"), broker.OfPlan("plan-2")},
		map[string]bool{"idle": false, "held": true, "missing": false}},
	{"idle of plan plan-2", []broker.Condition{broker.HeldBy(""), broker.OfPlan("plan-2")}, map[string]bool{"idle": false, "held": false}},
	{"attempts 2", []broker.Condition{broker.AttemptsAre(2)}, map[string]bool{"detached": true, "missing detached": false}},
	{"attempts 1", []broker.Condition{broker.AttemptsAre(1)}, map[string]bool{"detached": false}},
}

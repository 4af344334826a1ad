// Package broker owns the domain of the service broker: service instances,
// bindings and the operations that change them, their states, the OSB error
// codes, and the ports the broker needs from the outside world (Store, Engine,
// Driver). It knows nothing of HTTP or AWS; adapters live in packages named
// after what they adapt to.
//
// Its tests are its rules: each endpoint's and Task's file has a table of
// cases named as the OSB spec or docs/DESIGN.md states them ("a deprovision
// during a provision halts the provision and deletes the instance"), run on
// the bbolt store with the fakes of fakes_test.go (a driver the test
// scripts, a workflow engine that records, a clock the test moves). A new
// rule gets a case there.
//
// The Broker has one method per OSB endpoint: a details type in (the
// request's fields, decoded by internal/api), a domain value out (the
// Instance or Binding a fetch reads, or a result type such as
// ProvisionResult); none of them is an HTTP body, and none carries JSON
// tags for one: the bodies are internal/api's. A request's fields reach
// the domain in one place each: a provision's are an InstanceRequest, which
// ProvisionDetails and Instance both embed; a bind's a BindingRequest, which
// BindDetails and Binding both embed; an update's are copied in
// UpdateDetails.target. Which of them make two
// requests "identical" is said once, in the requestFingerprint of
// Instance, Target and Binding; fingerprint_test.go fails for a details
// field that is neither hashed nor listed as left out.
//
// The Store port's rules are the domain's too, each said once: the checks
// of a call's arguments (guards.go) and the conditions of its conditional
// write, as data (conditions.go: a broker.Condition list per stored item,
// which each adapter translates in one function; conditions_test.go
// states them as the design does).
package broker

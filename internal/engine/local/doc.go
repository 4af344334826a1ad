// Package local runs the workflows of statemachines/ in process: an
// interpreter of the Amazon States Language (JSONPath flavour) implementing
// broker.Engine, with executions persisted in bbolt so that they survive a
// restart. It runs what our definitions use (Task with lambda:invoke, Pass,
// Choice, Wait, Succeed, Fail, and the inline Map, with Retry, Catch and the
// input and output paths) the way Step Functions does, and refuses anything
// else when a definition is loaded, so a definition that loads here means
// the same on AWS. An execution resumed in a Map runs the Map again from its
// input (map.go).
//
// Load definitions with New (Options.Dir, every *.asl.json file) or Parse;
// either reports every problem as a *LoadError naming file, state and
// field. The enginetest package holds the contract this engine shares with
// the Step Functions adapter.
package local

// Package catalog owns the broker's catalog: the service offerings and plans
// it serves on GET /v2/catalog (OSB API v2.17), the broker settings each plan
// carries but never serves (its driver and whether its changes run
// synchronously or asynchronously), and the JSON Schemas its parameters must
// satisfy.
//
// A catalog is read once, at start-up, from a YAML file (see catalog.yaml at
// the root of the module) and checked against the rules Cloud Foundry's Cloud
// Controller applies when it registers a broker, plus the ones v2.17 adds, so
// that a mistake stops the broker from starting instead of surfacing when a
// platform registers it. A loaded *Catalog never changes and is safe for
// concurrent use.
//
// The package is a leaf but for internal/jsonenc, the one JSON encoder
// (itself a leaf), which writes the catalog document served on GET
// /v2/catalog: it imports nothing else from this module.
package catalog

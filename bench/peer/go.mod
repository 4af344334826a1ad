module github.com/serverless-osb/broker/bench/peer

go 1.26

require (
	code.cloudfoundry.org/brokerapi/v13 v13.0.16
	github.com/google/uuid v1.6.0
	github.com/serverless-osb/broker v0.0.0
	go.etcd.io/bbolt v1.5.0
)

require (
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.2 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

// The catalog and its validator are the broker's own, from this checkout.
replace github.com/serverless-osb/broker => ../..

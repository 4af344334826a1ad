# serverless-osb: an Open Service Broker on AWS Lambda, DynamoDB and Step Functions.
GO ?= go
# Where `make run` keeps its data (a bolt file); it survives restarts.
BROKER_DATA_DIR ?= .data
export BROKER_DATA_DIR

.DEFAULT_GOAL := help
.PHONY: help run test unit lint bench

help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

run: ## Run the broker on 127.0.0.1:8080 with the embedded store (BROKER_USERNAME/BROKER_PASSWORD set the credentials).
	$(GO) run ./functions/api

test: lint unit ## Everything CI runs: lint, then every test with the race detector.

unit: ## Every Go test with the race detector, with a moto_server (DynamoDB, Step Functions) started for them.
	$(GO) run ./internal/mototest/withmoto -- $(GO) test -race -count=1 ./...

# asl-validator (npm) catches dangling Next and unreachable states in the workflows.
ASL_VALIDATOR ?= npx --yes asl-validator@4.0.0

lint: ## gofmt, go vet, staticcheck, and asl-validator on statemachines/.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	@for f in statemachines/*.asl.json; do $(ASL_VALIDATOR) --json-path "$$f" || exit 1; done

bench: ## Benchmarks of the HTTP handler on the bolt store: ns/op, allocs/op, and an async provision's 202-to-succeeded time.
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./internal/api/

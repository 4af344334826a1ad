# serverless-osb: an Open Service Broker on AWS Lambda, DynamoDB and Step Functions.
GO ?= go
# Where `make run` keeps its data (a bolt file); it survives restarts.
BROKER_DATA_DIR ?= .data
export BROKER_DATA_DIR
# The catalog that `make build` bundles with the functions (with the templates it
# names) and that synth and deploy check: the deployed broker's. `make run` serves
# BROKER_CATALOG (default catalog.yaml, the demo) instead.
CATALOG ?= services/catalog.yaml
# The CDK CLI, pinned in infra/_cli/package.json (aws-cdk 2.x: 3.x refuses this library).
CDK := infra/_cli/node_modules/.bin/cdk
# How long `make fuzz` runs (go test -fuzztime: a duration, or Nx for N inputs).
FUZZTIME ?= 10m
# Each fuzz input is real HTTP requests: minimizing one is capped at 500 runs (a time cap
# kills the workers that overrun it, and each restart starts a new broker).
FUZZ := $(GO) test -run '^$$' -fuzz '^FuzzHTTP$$' -fuzzminimizetime 500x
# asl-validator (npm) catches dangling Next and unreachable states in the workflows; pinned,
# with everything it pulls in, by infra/_cli/package-lock.json beside the CDK CLI.
ASL_VALIDATOR := infra/_cli/node_modules/.bin/asl-validator
export CDK_DISABLE_CLI_TELEMETRY := true

# make bench compares these of ours with the peer's (bench/peer), round after round, each
# round ours then the peer's with as many requests: the files are then the same size. The
# first two are the machine's floors in that round (a bbolt commit of one page: as the broker
# commits, one fdatasync, and as bbolt as released and the peer commit, two), beside them.
BENCH_COMPARED := ^Benchmark(CommitFloor|CommitFloorTwoSyncs|SyncProvision|AsyncProvision|Bind)$$
BENCH_ROUNDS ?= 5
BENCH_REQUESTS ?= 3000

.DEFAULT_GOAL := help
.PHONY: help run ops test lint unit fuzz-short fuzz infra bench build synth deploy sandbox sandbox-deploy target-assets dbservers rds-ca-bundle

help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# make run and make sandbox build their command and exec it, rather than `go run` it: go run exits 1
# when Ctrl-C reaches it too, however its program ended, and make then says "Error 1".
run: ## Run the broker on 127.0.0.1:8080 with the embedded store (BROKER_USERNAME/BROKER_PASSWORD set the credentials).
	$(GO) build -o bin/api ./functions/api && exec bin/api

# The operator command's arguments, for example ARGS='--stack ServerlessOsb detached'.
ARGS ?= help
ops: ## The operator command: make ops ARGS='operations' (or detached, reap, cleanup ID, reseal, rotate-key; --data DIR or --stack NAME, --catalog FILE, --json, --verbose).
	$(GO) run ./functions/api ops $(ARGS)

test: lint unit fuzz-short infra ## Everything CI runs: lint, every test (race detector, moto started for them), a short fuzz, cdk synth + cfn-lint.

# -timeout 30m is a safety net for a hung test: on a busy machine a package is slower (internal/app
# crashes ~1,000 brokers), which go test's default 10 minutes would fail.
# The sandbox's tests (internal/sandbox) synthesize the stack with the CDK CLI.
unit: $(CDK) dbservers ## Every Go test with the race detector, with a moto_server (DynamoDB, Step Functions) started for them.
	$(GO) run ./internal/mototest/withmoto -- $(GO) test -race -count=1 -timeout 30m ./...

fuzz-short: ## Fuzz the whole HTTP surface (FuzzHTTP) for 20 s; its seed corpus runs in `unit` too.
	$(FUZZ) -fuzztime 20s ./internal/api/

fuzz: ## Fuzz the whole HTTP surface for FUZZTIME; a failing input is saved to internal/api/testdata/fuzz/FuzzHTTP/.
	$(FUZZ) -fuzztime $(FUZZTIME) ./internal/api/

lint: $(CDK) ## gofmt, go vet, staticcheck, and asl-validator on statemachines/ and the engine contract's workflows.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path '*/node_modules/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	@for f in statemachines/*.asl.json internal/engine/enginetest/testdata/*.asl.json; do $(ASL_VALIDATOR) --json-path "$$f" || exit 1; done

infra: synth ## cfn-lint (zero errors) on the synthesized template and on every service template in services/.
	@cfn-lint --version 2>/dev/null | grep -q 1.51.0 || python3 -m pip install --quiet cfn-lint==1.51.0
	cfn-lint cdk.out/*.template.json
	cfn-lint services/*/*.yaml

bench: ## Benchmarks: the handler on bolt (ns/op, allocs/op beside the allocation target, commits/op, page writes/op, 202-to-succeeded, a bind on 10 and on 10,000 bindings) and the peer's handler in process (ns/op, allocs/op, page writes/op: the targets), the two in rounds (ours, then the peer's, with as many requests: BENCH_ROUNDS, BENCH_REQUESTS) and side by side with the targets (medians, and the range of the rounds' ratios), beside the machine's floor in each round (a bbolt commit of one page) and each side's time above it, DynamoDB calls, items read and read units per request and per Task and items read listing a plan (moto), a load phase against the `make run` binary and the peer (bench/peer: brokerapi v13 with bbolt), and the Lambda cold start (package init, exec to first answer, bundle sizes), each figure beside its target.
	@$(GO) test -run '^$$' -bench . -skip '$(BENCH_COMPARED)' -benchmem -benchtime 2s ./internal/api/
	@dir=$$(mktemp -d); rc=0; \
	$(GO) test -c -o $$dir/ours.test ./internal/api/ && (cd bench/peer && $(GO) test -c -o $$dir/peer.test ./) || rc=1; \
	i=0; while [ $$rc = 0 ] && [ $$i -lt $(BENCH_ROUNDS) ]; do i=$$((i+1)); echo "round $$i of $(BENCH_ROUNDS): ours, then the peer's, $(BENCH_REQUESTS) requests each"; \
		(cd internal/api && $$dir/ours.test -test.run '^$$' -test.bench '$(BENCH_COMPARED)' -test.benchmem -test.benchtime $(BENCH_REQUESTS)x) >$$dir/round 2>&1 || rc=1; \
		cat $$dir/round; cat $$dir/round >>$$dir/ours; [ $$rc = 0 ] || break; \
		(cd bench/peer && $$dir/peer.test -test.run '^$$' -test.bench . -test.benchmem -test.benchtime $(BENCH_REQUESTS)x) >$$dir/round 2>&1 || rc=1; \
		cat $$dir/round; cat $$dir/round >>$$dir/peer; \
	done; \
	[ $$rc = 0 ] && { $(GO) run ./internal/tools/benchcmp $$dir/ours $$dir/peer || rc=1; }; \
	rm -rf $$dir; exit $$rc
	@out=$$(mktemp); $(GO) run ./internal/mototest/withmoto -- $(GO) test -count=1 -v \
		-run '^(TestAPICallsPerEndpoint|TestAPICallsPerTask|TestCommitsPerOperation|TestItemsReadDoNotGrowWithHistory|TestPlanListingsReadOnlyThePlansInstances)$$' ./internal/app/ >$$out 2>&1; \
	rc=$$?; grep -E '^ +(\||commits_test|itemsread_test|planreads_test)|^(---|ok|FAIL)' $$out; rm -f $$out; exit $$rc
	$(GO) run ./internal/tools/load
	$(GO) run ./internal/tools/coldstart

build: ## The Lambda bundles: dist/api.zip, dist/worker.zip, dist/dbuser.zip and dist/cacheuser.zip (linux/arm64, with the catalog CATALOG, default services/catalog.yaml, and its templates).
	$(GO) run ./internal/tools/build -catalog $(CATALOG)

$(CDK): infra/_cli/package.json infra/_cli/package-lock.json
	npm ci --prefix infra/_cli --no-audit --no-fund
	@touch $@

synth: build $(CDK) ## The CloudFormation template in cdk.out/: offline, no AWS credentials, cdk-nag enforced.
	$(CDK) synth -c catalog=$(CATALOG) -q -o cdk.out

# The bundles of the broker's custom resource functions, where the target stack's HandlerCodeBucket
# parameter finds them: under the SHA-256 digest of each zip (deploy.HandlerCodeKey), as the target
# template synthesized from the same dist/ names them. AWS is the aws CLI (its credentials, its Region).
AWS ?= aws
target-assets: ## Upload dist/dbuser.zip and dist/cacheuser.zip (make build's) to BUCKET, the bucket the target stacks' HandlerCodeBucket parameter names (in their Region; every target account may read it).
	@test -n "$(BUCKET)" || { echo 'make target-assets: BUCKET=... names the bucket'; exit 2; }
	@for f in dbuser cacheuser; do \
	  test -f dist/$$f.zip || { echo "make target-assets: dist/$$f.zip is missing: run make build first"; exit 2; }; \
	  $(AWS) s3 cp dist/$$f.zip "s3://$(BUCKET)/serverless-osb/$$(sha256sum dist/$$f.zip | cut -c1-64)/$$f.zip" || exit 1; \
	done

# A template `make sandbox` runs as it is (with the assets beside it) instead of synthesizing one.
TEMPLATE ?=
# Where `make sandbox` keeps its logs, the bootstraps it builds and the state KEEP=1 keeps.
SANDBOX_DIR ?= .sandbox
# KEEP=1: take up the state the last `make sandbox KEEP=1` kept (its moto runs on), and keep it.
KEEP ?=
# ENVIRONMENTS=N: execution environments each function may run at once (default 4), as Lambda's concurrency.
ENVIRONMENTS ?=
# TARGET_ACCOUNT=222222222222 (with TARGET_REGION, TARGET_EXTERNAL_ID): the account of the catalog's placement,
# where `make sandbox` deploys the target stack (cdk synth -c target=true) as a platform team does.
TARGET_ACCOUNT ?=
TARGET_REGION ?=
TARGET_EXTERNAL_ID ?=
sandbox: $(if $(TEMPLATE),,synth) ## The stack `make deploy` deploys, on 127.0.0.1 (BROKER_ADDR): moto, the functions under the Lambda emulator, IAM enforced; CATALOG=..., TEMPLATE=cdk.out/X.template.json, KEEP=1 keeps its state across runs, TARGET_ACCOUNT=... deploys the target stack there.
	$(if $(TARGET_ACCOUNT),$(CDK) synth -c target=true -q -o cdk.out.target &&) \
	$(GO) build -o bin/sandbox ./internal/tools/sandbox && exec bin/sandbox -template $(or $(TEMPLATE),cdk.out) -dir $(SANDBOX_DIR) $(if $(KEEP),-keep) $(if $(ENVIRONMENTS),-environments $(ENVIRONMENTS)) \
	  $(if $(TARGET_ACCOUNT),-target-template cdk.out.target -target-account $(TARGET_ACCOUNT) -target-region "$(TARGET_REGION)" -target-external-id "$(TARGET_EXTERNAL_ID)")

sandbox-deploy: $(if $(TEMPLATE),,synth) ## Deploy a new bundle (CATALOG=... or TEMPLATE=...) into the running sandbox, as `make deploy` updates the stack: the functions' code and configuration replaced, the table and the stacks kept.
	$(GO) run ./internal/tools/sandbox -deploy -template $(or $(TEMPLATE),cdk.out) -dir $(SANDBOX_DIR)

# The RDS certificate bundle the dbuser function verifies databases with: fetched by the first
# deploy (a function without it refuses every database), kept after; make rds-ca-bundle renews it.
RDS_CA_BUNDLE := functions/dbuser/rds-ca-bundle.pem
$(RDS_CA_BUNDLE):
	$(MAKE) rds-ca-bundle

deploy: $(RDS_CA_BUNDLE) build $(CDK) ## Deploy to your credentials' account and region (run infra/_cli/node_modules/.bin/cdk bootstrap once first; the first deploy fetches the RDS certificate bundle).
	$(CDK) deploy -c catalog=$(CATALOG)

# The database servers internal/dbtest starts for the tests (Debian's packages, which their
# tests name): installed with apt-get where missing, with sudo unless root. Nothing is started
# here, and apt's own service start is not needed: each test starts its own server.
dbservers: ## Install the servers the tests start (postgresql 15, mariadb-server 10.11, redis-server 7.0) where missing.
	@missing=""; \
	{ command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } || missing="$$missing postgresql"; \
	command -v mariadb-install-db >/dev/null || missing="$$missing mariadb-server"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	if [ -n "$$missing" ]; then \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		echo "installing$$missing with apt-get"; \
		$$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends $$missing; \
	fi


# The RDS certificate bundle the dbuser function verifies databases with (AWS's global bundle,
# every Region's CAs), which make build puts beside its bootstrap; without it the function
# refuses every database. Fetched over HTTPS from AWS's trust store; commit it to pin it.
rds-ca-bundle: ## Fetch the RDS certificate bundle into functions/dbuser/rds-ca-bundle.pem (make build bundles it with the dbuser function).
	curl -fsSL --proto '=https' --tlsv1.2 -o functions/dbuser/rds-ca-bundle.pem https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem
	@grep -c 'BEGIN CERTIFICATE' functions/dbuser/rds-ca-bundle.pem | sed 's/$$/ certificates in functions\/dbuser\/rds-ca-bundle.pem/'

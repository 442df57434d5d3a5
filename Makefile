# AI Flock. `make deploy` deploys the dev stack; `make check` runs every test.
SHELL := /bin/bash
GO ?= go
STACK ?= dev
BIN := agent/bin
# The images' binaries, one directory per CPU architecture (agent/Dockerfile
# copies bin/linux-$TARGETARCH/): the Docker host's (GOARCH, this machine's
# unless set: GOARCH=arm64 for an Apple-silicon VM deployed from an amd64
# host) and amd64, the aws stack's default (flock:aws.cpuArchitecture
# X86_64; ARCHS="amd64 arm64" for ARM64 tasks).
GOARCH ?= $(shell $(GO) env GOARCH)
ARCHS ?= $(sort $(GOARCH) amd64)
OPERATOR_KEY ?= $(HOME)/.config/ai-flock/operator.nk
# Resource operations pulumi up runs at once (its default is 4 per core). The
# engine serialises most container work, but waiting providers hold slots.
PARALLEL ?= 16

.PHONY: help all bin program deploy destroy preview operator-key test check deps vet e2e e2e-cluster e2e-fargate e2e-gvisor provision-check actionlint bench bench-replay bench-deploy layer3 \
        vm-up vm-down vm-ssh vm-provision vm-verify vm-deploy vm-shared vm-destroy vm-test flock-test flock-logs flock-watch flock-top flock-budget flock-plan flock-board

## help: every target and what it does
help:
	@awk '/^## /{sub(/^## /,""); if (match($$0, /^[a-z0-9-]+: /)) printf "\n"; print}' $(MAKEFILE_LIST) | sed 1d

## all: the binaries, then the unit and mock-engine tests
all: bin test

## bin: the static agent, bus, services and gateway binaries the images are built from,
## for each of ARCHS, the aws stack's rollout check for this machine, and the directories the images declare as volumes
bin:
	@for arch in $(ARCHS); do \
	  for b in flock-agent flock-bus flock-services flock-gateway; do \
	    echo "go build $$b (linux/$$arch)"; \
	    CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/linux-$$arch/$$b ./agent/cmd/$$b || exit 1; \
	  done; \
	done
	@echo "go build flock-aws-verify (this machine: the aws stack's rollout check)"
	@$(GO) build -trimpath -o $(BIN)/flock-aws-verify ./infra/awsverify/cmd/flock-aws-verify
	@mkdir -p $(BIN)/rootfs/tmp $(BIN)/rootfs/run && chmod 1777 $(BIN)/rootfs/tmp $(BIN)/rootfs/run

## deploy: pulumi up of the dev stack (creates the stack and its bus secret on first use).
## It applies without a preview of its own: `make preview` shows the plan.
deploy: bin program
	@pulumi whoami >/dev/null 2>&1 || pulumi login --local
	@pulumi stack select $(STACK) 2>/dev/null || pulumi stack init $(STACK)
	@pulumi config get flock:busSecret -s $(STACK) >/dev/null 2>&1 || \
	  pulumi config set --secret flock:busSecret "$$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" -s $(STACK)
	pulumi up --yes --skip-preview --parallel $(PARALLEL) -s $(STACK)
	@$(MAKE) --no-print-directory operator-key

## program: compile the Pulumi program once, saying so, with the flags Pulumi's
## Go language host uses (so its own silent build on every run finds it all in
## the build cache): the first build of the SDKs takes minutes
program:
	@echo "Compiling the Pulumi program (the first build of the Pulumi SDKs takes about 5 minutes on 2 cores; later ones seconds)..."
	@start=$$(date +%s); $(GO) build -buildvcs=false -trimpath -ldflags '-w -s' -o .build/pulumi-program . && echo "Compiled in $$(( $$(date +%s) - start ))s."

## preview: what a deploy would change, with the policy pack
preview: bin program
	pulumi preview --diff -s $(STACK) --policy-pack infra/policy

## destroy: remove the flock, its credentials on the host and the operator's key; data stays
destroy:
	pulumi destroy --yes -s $(STACK)
	@rm -f $(OPERATOR_KEY) && echo "removed the operator key $(OPERATOR_KEY)"

## operator-key: the operator's bus credential, for the operator CLI
operator-key:
	@mkdir -p $(dir $(OPERATOR_KEY)) && umask 077 && \
	  pulumi stack output operatorSeed --show-secrets -s $(STACK) > $(OPERATOR_KEY) && \
	  echo "operator key written to $(OPERATOR_KEY)"

## test: unit and mock-engine tests, no Docker needed: -short leaves the slowest
## real-server tests (three-node buses, the policy pack's server) to check, and
## the Docker suites (tests/e2e, e2e/cluster, e2e/fargate), which run nothing
## without an engine, are not built; go vet runs once over everything; the test
## binaries are kept between runs (tests/unitrun), so only those a change
## reaches are linked again, and up to 8 run at once
test:
	$(GO) vet ./...
	GO=$(GO) $(GO) run ./tests/unitrun

## vet: go vet over every package
vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$unformatted" ] || { echo "not gofmt-formatted: $$unformatted"; exit 1; }

## check: every test: vet, unit + mock, e2e on the real Docker engine (and its
## isolation probes again under gVisor), provisioning, workflows, and the VM
## booted for real with the flock deployed into it (tests/check.sh: each step timed)
check: deps vet
	@GO=$(GO) MAKE=$(MAKE) bash tests/check.sh

## deps: install what the tests need on this machine (Debian packages, gVisor, debootstrap): run by the targets that need it
deps:
	@bash tests/setup.sh

## e2e: the end-to-end suite on the real Docker engine: a 10-agent flock deployed by the stack's captured resources, every isolation and hostile-agent probe
e2e: deps
	FLOCK_E2E=1 $(GO) test -count=1 -timeout 30m -v ./tests/e2e/

## e2e-cluster: the three-node bus on the real engine: a node lost, a rolling
## restart, no quorum (not beside e2e: both publish the bus's host ports)
e2e-cluster: deps
	FLOCK_E2E_CLUSTER=1 $(GO) test -count=1 -timeout 20m -v ./tests/e2e/cluster/

## e2e-fargate: the aws stack run as Fargate would run it, on the real engine
## (tests/fargate): tasks, the operator's run-task, isolation, a bus outage
e2e-fargate: deps
	FLOCK_E2E_FARGATE=1 $(GO) test -count=1 -timeout 25m -v ./tests/fargate/ ./tests/e2e/fargate/

## e2e-gvisor: the isolation probes on a flock under runsc (flock:runtime: runsc)
# The e2e suite itself chooses: under FLOCK_E2E_RUNTIME=runsc a test that is
# not one of the probes that must hold under gVisor (isolation, limits,
# hostile agents) skips, saying why (skipUnderGVisor in tests/e2e). Without
# runsc on the engine the suite skips; FLOCK_REQUIRE_GVISOR=1 (CI) fails it.
e2e-gvisor: deps
	FLOCK_E2E=1 FLOCK_E2E_RUNTIME=runsc $(GO) test -count=1 -timeout 20m -v ./tests/e2e/

## provision-check: shellcheck over the scripts, the Vagrantfile checked, and provision/provision.sh run twice in a Debian container and verified
provision-check:
	bash tests/provision/run.sh

## actionlint: lint the CI workflows
actionlint:
	bash tests/policy/actionlint.sh

## aws-check: the real AWS provider's own checks (terraform-provider-aws, planned offline) over the aws stack your Pulumi.aws.yaml declares, before a first deploy
aws-check:
	FLOCK_REQUIRE_TERRAFORM=1 $(GO) test -count=1 -v -run 'TestTheProviderAcceptsTheAWSStack/default' ./tests/tfcheck/

## layer3: the real Pulumi CLI and provider plugins on a clean clone of HEAD:
## deploy as the README says, probes, no churn, add an agent, policy pack, destroy
## (FLOCK_LAYER3_AGENTS=50 for the large run). Needs the toolchain: see the README.
layer3:
	bash tests/layer3/run.sh

## bench-replay: how long each stack's replay on this engine takes to every agent healthy (3 agents; CI prints it, so a change that slows a deploy shows)
bench-replay: deps
	$(GO) run ./tests/bench/replay-up -agents 3 -runs 1

## bench-deploy: the real dev deploy (pulumi up) to every agent healthy beside two floors, 3/20/50 agents, median of 3 (root, the real toolchain; about 20 minutes)
bench-deploy: deps
	$(GO) run ./tests/bench/deploy-up -agents 3,20,50 -runs 3

## bench: every benchmark, with the figures the README quotes
bench:
	bash tests/bench.sh

# The VM (see Vagrantfile and provision/).
## vm-up: boot the VM (vagrant up)
vm-up:
	vagrant up
## vm-down: halt the VM
vm-down:
	vagrant halt
## vm-ssh: a shell in the VM
vm-ssh:
	vagrant ssh
## vm-provision: provision the VM again
vm-provision:
	vagrant provision
## vm-verify: check the VM's hardening (provision/verify-vm.sh)
vm-verify:
	vagrant ssh -c 'sudo /vagrant/provision/verify-vm.sh'
## vm-deploy: deploy the dev stack inside the VM
vm-deploy:
	vagrant ssh -c 'cd /vagrant && make deploy'
## vm-shared: copy the VM's shared directory to the host
vm-shared:
	provision/pull-shared.sh
## vm-destroy: destroy the VM
vm-destroy:
	vagrant destroy -f
## vm-test: boot the VM for real (libvirt, offline box), provision it twice, verify,
## deploy the dev flock into it from the host over SSH and probe it, destroy (root)
vm-test:
	bash tests/vm/run.sh

## flock-test: send a task to every agent and wait for the results. The agent
## image holds one static binary and no shell: the task runs a tool built into it.
flock-test:
	$(GO) run ./agent/cmd/flock-agent task --nkey $(OPERATOR_KEY) --all -- /flock-agent tool echo hello from the operator
## flock-watch: follow the flock's heartbeats, events and results
flock-watch:
	$(GO) run ./agent/cmd/flock-agent watch --nkey $(OPERATOR_KEY)
## flock-top: the live dashboard (every agent's task, heartbeat, tokens; the
## board; the bus): s sorts, / filters, enter shows an agent's log lines, q quits
flock-top:
	$(GO) run ./agent/cmd/flock-agent top --nkey $(OPERATOR_KEY)
## flock-budget: every agent's model spending against its budget
flock-budget:
	$(GO) run ./agent/cmd/flock-agent budget --nkey $(OPERATOR_KEY)
## flock-plan: put a plan file on the board and wait until it is done (exit 0)
## or failed (1): PLAN=examples/plans/hello.yaml by default
PLAN ?= examples/plans/hello.yaml
flock-plan:
	$(GO) run ./agent/cmd/flock-agent plan apply --nkey $(OPERATOR_KEY) $(PLAN)
	$(GO) run ./agent/cmd/flock-agent plan wait --nkey $(OPERATOR_KEY) --timeout 10m $(PLAN)
## flock-board: the board's tasks, their holders and what blocks them
flock-board:
	$(GO) run ./agent/cmd/flock-agent board list --nkey $(OPERATOR_KEY)
## flock-logs: the agents' and the bus's logs
flock-logs:
	@for c in $$(docker ps --filter label=ai-flock.flock --format '{{.Names}}'); do echo "== $$c"; docker logs --tail 20 $$c; done

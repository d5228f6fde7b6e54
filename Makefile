# agentsh: the two commands of the README are `make run` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
STATE_DIR ?= $(CURDIR)/.state
POLICY ?= $(CURDIR)/policies/default.yaml

# CI builds once from a clean clone: incremental state (1.6 GB of target/) would only take disk.
ifeq ($(CI),true)
export CARGO_INCREMENTAL := 0
endif

.PHONY: setup build run test lint unit fuzz fuzz-smoke bench detector-score model packages clean

setup:
	@bash scripts/setup.sh

build: setup
	$(CARGO) build --release

# Start agentshd in the foreground with the shipped default policy and a state dir in the repo.
run: build
	@mkdir -p $(STATE_DIR)
	./target/release/agentshd --config agentsh.dev.yaml --foreground

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

# The end-to-end tests run the built binaries (agentsh-shim, agentshctl): build them first.
unit:
	@bash scripts/setup.sh --tests
	$(CARGO) build
	$(CARGO) test --all-targets
	bash scripts/fuzz.sh smoke

# Every fuzz target for a few seconds (run by `make unit` too); `make fuzz` for ten minutes
# each. See docs/fuzzing.md.
fuzz-smoke:
	@bash scripts/setup.sh --tests
	bash scripts/fuzz.sh smoke

fuzz:
	@bash scripts/setup.sh --tests
	bash scripts/fuzz.sh long

# Everything CI runs: formatting, lints, unit and end-to-end tests.
test: lint unit

# Benchmarks: one command, numbers against a direct path in the same run.
bench: build
	bash scripts/bench.sh

# The deb and rpm packages (target/debian/, target/generate-rpm/); the eBPF object is inside agentshd.
packages: build
	bash scripts/packages.sh

# Detection and false-positive rates of the detector on ../shared/corpus.
detector-score: setup
	$(CARGO) run --release -p agentsh --example detector_score
	$(CARGO) run --release -p agentsh --example corpus_score

# Retrains the learned second opinion on tool results (agent/src/inspect/learned/model.bin) from
# the tune split of tests/corpus; needed after any change to the intent layer's word classes.
model: setup
	$(CARGO) run --release -p agentsh --example train_injection_model

clean:
	$(CARGO) clean

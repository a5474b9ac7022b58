# Spindle's developer entry points. `make demo` and `make test` work on a fresh machine:
# they create .venv, install pinned dependencies and build/cache whatever the tests need.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | sha256sum | cut -c1-12)
export SPINDLE_CACHE ?= $(HOME)/.cache/spindle

.PHONY: venv test lint unit harness host-packages demo crds bench soak dev-cluster dev-cluster-down clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@echo "==> creating $(VENV) and installing pinned dependencies"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install -q --upgrade "pip==26.3" "setuptools==84.2.1" "wheel==0.48.0"
	@$(BIN)/pip install -q -c constraints.txt -e ".[runtime,operator,dev]"
	@rm -f $(VENV)/.installed-*; touch $@

lint: venv
	@echo "==> ruff"; $(BIN)/ruff check operator tests bench
	@echo "==> mypy"; $(BIN)/mypy
	@echo "==> import-linter"; $(BIN)/lint-imports

# The node's parts from Debian: containerd, runc, CNI plugins, podman/buildah, debootstrap.
HOST_PACKAGES := containerd runc containernetworking-plugins podman buildah debootstrap \
	iptables conntrack socat iproute2 util-linux ethtool
host-packages:
	@if ! dpkg-query -W $(HOST_PACKAGES) >/dev/null 2>&1; then \
	  echo "==> installing the test node's packages from Debian: $(HOST_PACKAGES)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends $(HOST_PACKAGES) >/dev/null; fi

harness: venv host-packages
	@echo "==> harness: building or reusing the cluster's binaries, Spark jars and images"
	@$(BIN)/python -m tests.harness build

dev-cluster: harness
	@$(BIN)/python -m tests.harness up

dev-cluster-down: venv
	@$(BIN)/python -m tests.harness down

# Two pytest processes at once: the tests of the cluster (marker `kube`: the control plane,
# node, operator and driver pods, whose tests spend much of their time waiting on them) with
# the few longest others (`slow`: the crash loops, bounded storage, the incremental oracle),
# and the rest, which use the CPU meanwhile. The first's output is printed when both ended (it
# is in $(CLUSTER_LOG) meanwhile); exit code 5 is "no test of that kind was selected".
CLUSTER_LOG := $(VENV)/pytest-cluster.log
test: venv lint harness
	@echo "==> pytest: the cluster's and the slow tests in the background (log: $(CLUSTER_LOG)), the rest here"
	@$(BIN)/python -m pytest -m "kube or slow" --durations=25 $(PYTEST_ARGS) > $(CLUSTER_LOG) 2>&1 & \
	  cluster=$$!; \
	  $(BIN)/python -m pytest -m "not kube and not slow" --durations=25 $(PYTEST_ARGS); rest=$$?; \
	  wait $$cluster; kube=$$?; \
	  echo "==> pytest: the cluster's and the slow tests"; cat $(CLUSTER_LOG); \
	  for code in $$rest $$kube; do [ $$code = 0 ] || [ $$code = 5 ] || exit $$code; done

# The full crash loops (20 kills during run and bootstrap, 50 kills of a committing process),
# 200 steps of bounded storage on both backends, and 1,000 mutated manifests through the CLI
# and through kubectl to the operator (CI runs fewer of each).
soak: venv harness
	@SPINDLE_SOAK=1 $(BIN)/python -m pytest -s --durations=10 $(PYTEST_ARGS) \
	  tests/integration/test_runtime_crash.py tests/fuzz/test_manifests.py \
	  tests/integration/test_storage_bounded.py \
	  "tests/e2e/test_bad_input.py::test_a_storm_of_mutated_manifests_ends_in_refusals_and_reasons_and_others_are_served" \
	  "tests/integration/test_checkpoints.py::test_kill_9_at_random_points_never_leaves_a_partial_checkpoint"

unit: venv
	@$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

demo: venv
	@$(BIN)/python examples/grades/demo.py

crds: venv
	@$(BIN)/python -m spindle.api.crd > crds/pipeline.yaml
	@cp crds/pipeline.yaml charts/spindle/crds/pipeline.yaml
	@echo "==> wrote crds/pipeline.yaml and charts/spindle/crds/pipeline.yaml"

.PHONY: fuzz
fuzz: venv  # make fuzz N=10000 [SEED=0]: mutated programs through parse + plan, counts by outcome
	@$(BIN)/python -m tests.fuzz --count $(or $(N),1000) --seed $(or $(SEED),0)

bench: venv
	@$(BIN)/python bench/plan.py
	@$(BIN)/python bench/bootstrap.py
	@$(BIN)/python bench/operator_load.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

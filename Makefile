# Spindle's developer entry points. `make demo` and `make test` work on a fresh machine:
# they create .venv, install pinned dependencies and build/cache whatever the tests need.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | sha256sum | cut -c1-12)
export SPINDLE_CACHE ?= $(HOME)/.cache/spindle

.PHONY: venv test lint unit harness demo crds bench dev-cluster clean

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

harness: venv
	@echo "==> harness: building or reusing etcd, kube-apiserver, versitygw, helm, Spark jars"
	@$(BIN)/python -m tests.harness build

dev-cluster: venv
	@$(BIN)/python -m tests.harness up

test: venv lint harness
	@echo "==> pytest"
	@$(BIN)/python -m pytest $(PYTEST_ARGS)

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

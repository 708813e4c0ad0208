# gradient-attest: `make demo` and `make test` each work on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO   := build/demo

.PHONY: all env demo test lint typecheck unit schemas clean report-screenshot bench certify-examples pg-test

all: test

$(STAMP): pyproject.toml requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt -e .
	touch $(STAMP)

env: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m attest._demo $(DEMO)

# Every example model under the shipped policies (also part of make test).
certify-examples: $(STAMP)
	$(BIN)/python -m pytest -q tests/cli/test_examples_certify.py tests/unit/pipeline/test_amp_seg.py

# The ledger service against a throwaway PostgreSQL cluster (initdb into a temporary folder,
# a unix socket, stopped at the end; binaries from /usr/lib/postgresql/15/bin or $$ATTEST_PG_BIN).
# Also part of make test. CI=true turns a missing PostgreSQL into a failure instead of a skip.
pg-test: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit/ledger/service tests/cli/test_cli_ledger_service.py

lint: $(STAMP)
	$(BIN)/ruff check attest tests benchmarks examples
	$(BIN)/ruff format --check attest tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -q

test: $(STAMP)
	$(BIN)/ruff check attest tests benchmarks examples
	$(BIN)/ruff format --check attest tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

schemas: $(STAMP)
	$(BIN)/python -m attest.certificate.schemas write

report-screenshot: demo
	$(BIN)/python -m attest.report._screenshot $(DEMO)/report.html $(DEMO)/report.png

bench: $(STAMP)
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf build .mypy_cache .pytest_cache .ruff_cache

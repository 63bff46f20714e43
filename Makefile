# Landfall: `make demo` runs the whole flow locally, `make test` runs the tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
TOOLS  := .venv-tools
TOOLS_STAMP := $(TOOLS)/.installed-stamp
REF    := .venv-ref
REF_STAMP := $(REF)/.installed-stamp

.PHONY: venv tools ref test lint demo bench clean

# Re-installs only when pyproject.toml changed (or the venv is missing): quick when nothing changed.
venv: $(STAMP)
tools: $(TOOLS_STAMP)
ref: $(REF_STAMP)
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -U pip
	$(BIN)/pip install -q --disable-pip-version-check -e '.[cpu,local,dev]'
	# tf-keras's metadata asks for `tensorflow`; here we run tensorflow-cpu of the same minor.
	$(BIN)/pip install -q --disable-pip-version-check --no-deps 'tf-keras>=2.21,<2.22'
	# The google provider's schema, as HashiCorp's generated bindings (read by tests/infra/test_provider_schema.py,
	# never imported): pinned with the provider in infra/**/versions.tf.
	$(BIN)/pip install -q --disable-pip-version-check --no-deps 'cdktf-cdktf-provider-google==16.12.1'
	touch $(STAMP)

# Offline IaC checker in a venv of its own, so its pins never fight the project's.
$(TOOLS_STAMP): Makefile
	test -x $(TOOLS)/bin/python || $(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install -q --disable-pip-version-check 'checkov>=3.2,<4'
	touch $(TOOLS_STAMP)

# The reference implementations our metrics are checked against (tests/landfall/core/test_vus.py): aeon's VUS-PR.
# A venv of its own: aeon 1.6 needs numba, which pins numpy below the version TensorFlow runs on here.
$(REF_STAMP): Makefile
	test -x $(REF)/bin/python || $(PYTHON) -m venv $(REF)
	$(REF)/bin/pip install -q --disable-pip-version-check 'aeon==1.6.0'
	touch $(REF_STAMP)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# The suite on TEST_WORKERS processes (pytest-xdist; each starts its own emulators on free ports), the slowest tests
# listed at the end. 2 on the 2-core development machine: 741.9 s against 1,050 s in one process; 3 was slower
# (793.2 s: more emulators, more contention; docs/benchmarks.md). `TEST_WORKERS=0 make test` runs it in one process.
TEST_WORKERS ?= 2
test: venv tools ref lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=30

demo: venv
	$(BIN)/landfall demo

bench: venv
	$(BIN)/landfall bench convert
	$(BIN)/landfall bench train

clean:
	rm -rf $(VENV) $(TOOLS) $(REF) .pytest_cache .ruff_cache landfall-demo

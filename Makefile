# Landfall: `make demo` runs the whole flow locally, `make test` runs the tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
TOOLS  := .venv-tools
TOOLS_STAMP := $(TOOLS)/.installed-stamp
REF    := .venv-ref
REF_STAMP := $(REF)/.installed-stamp

.PHONY: system venv tools ref test check lint demo bench clean requirements mutants

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
	touch $(STAMP)

# Offline IaC checker in a venv of its own, so its pins never fight the project's.
$(TOOLS_STAMP): Makefile
	test -x $(TOOLS)/bin/python || $(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install -q --disable-pip-version-check 'checkov>=3.2,<4'
	touch $(TOOLS_STAMP)

# The reference implementations our metrics are checked against (tests/landfall/core/test_vus.py): aeon's VUS-PR,
# and TSB-AD's (its get_metrics and find_length_rank; the wheel without its deep-learning dependencies, as its
# README says its evaluation code needs none of them). A venv of its own: aeon 1.6 needs numba, which pins numpy
# below the version TensorFlow runs on here.
$(REF_STAMP): Makefile
	test -x $(REF)/bin/python || $(PYTHON) -m venv $(REF)
	$(REF)/bin/pip install -q --disable-pip-version-check 'aeon==1.6.0' 'statsmodels==0.15.0'
	$(REF)/bin/pip install -q --disable-pip-version-check --no-deps 'TSB_AD==1.5'
	touch $(REF_STAMP)

# System tools the suite needs that pip cannot bring, checked first so a missing one stops `make test` within
# seconds: Debian's chromium (the report's browser test) is installed with apt-get when running as root (as CI does);
# anything else missing, or chromium without root, is one line naming the tool and the command that installs it.
system:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: installing Debian's chromium (the report's browser test)"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) \
	      >/dev/null || { echo "make: apt-get could not install chromium" >&2; exit 1; }; \
	  else echo "make: chromium is missing (the report's browser test): sudo apt-get install chromium" >&2; exit 1; fi; }
	@for t in "java:sudo apt-get install default-jre-headless" "terraform:see https://developer.hashicorp.com/terraform/install" \
	          "kubectl:sudo apt-get install kubectl (Google Cloud's apt repository)"; do \
	  command -v "$${t%%:*}" >/dev/null 2>&1 || { echo "make: $${t%%:*} is missing: $${t#*:}" >&2; exit 1; }; done
	@[ -n "$$LANDFALL_PUBSUB_EMULATOR" ] && exit 0; g="$$(command -v gcloud)"; \
	  for r in "$${g:+$$(dirname "$$(readlink -f "$$g")")/..}" /usr/lib/google-cloud-sdk /usr/share/google-cloud-sdk; do \
	    [ -f "$$r/platform/pubsub-emulator/bin/cloud-pubsub-emulator" ] && exit 0; done; \
	  { echo "make: Google's Pub/Sub emulator is missing: sudo apt-get install google-cloud-cli-pubsub-emulator" \
	       "(or set LANDFALL_PUBSUB_EMULATOR)" >&2; exit 1; }

# functions/requirements.txt (what the Cloud Functions deploy) from pyproject.toml's base dependencies; the suite
# fails while the two differ (tests/functions/test_requirements.py).
requirements:
	$(PYTHON) tests/functions/requirements.py

lint: venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# The suite on TEST_WORKERS processes (pytest-xdist; each starts its own emulators on free ports), the slowest tests
# listed at the end. 2 on the 2-core development machine: 741.9 s against 1,050 s in one process; 3 was slower
# (793.2 s: more emulators, more contention; docs/benchmarks.md). `TEST_WORKERS=0 make test` runs it in one process.
TEST_WORKERS ?= 2
test: system venv tools ref lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=30

# The edit loop's quicker subset: lint, then the suite without its heaviest modules (tests/conftest.py, --quick). An
# addition only: CI and the README's quickstart run `make test`, the whole suite.
check: system venv tools ref lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --quick

demo: venv
	$(BIN)/landfall demo

# The fault list of issue #67 (tests/mutants.toml): each deliberate fault applied alone to this working tree (in place,
# restored after; it refuses a tree with changed tracked files), the test modules of its area run, and a table of the
# test that caught each. Exits 1 when a fault is missed or stale. Not part of `make test` (docs/benchmarks.md). `ref`:
# the VUS-PR fault's tests compare with aeon's in .venv-ref.
mutants: venv ref
	$(BIN)/python tests/mutants.py

bench: venv
	$(BIN)/landfall bench convert
	$(BIN)/landfall bench train

clean:
	rm -rf $(VENV) $(TOOLS) $(REF) .pytest_cache .ruff_cache landfall-demo

# The two commands a newcomer needs are `make run` and `make test`; both install first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# The versions the suite was last run with, each with its files' sha256 hashes: `make install`
# takes exactly these (LOCK); the image takes the runtime ones (RUNTIME_LOCK, a subset).
LOCK := requirements.lock
RUNTIME_LOCK := requirements-runtime.lock
PIP_TOOLS := pip-tools==7.6.2
# pip-compile's options for both files: hashes of every file PyPI has for each pin (sdists and
# wheels), setuptools and wheel too (the build needs them: the project is installed without
# build isolation, so nothing unhashed is fetched), no index or find-links options. Extras
# stay on their pins (uvicorn[standard]==...): the pip of python:3.11.7 (23.2) otherwise takes
# a dependency's `uvicorn[standard]` for an unpinned requirement and refuses the lock.
COMPILE := CUSTOM_COMPILE_COMMAND="make lock" .lock-venv/bin/pip-compile \
	--quiet --generate-hashes --allow-unsafe --no-strip-extras --all-build-deps \
	--no-emit-find-links --no-emit-index-url
LOCK_ARGS ?=
SETTLE := $(BIN)/settle
PYTEST_ARGS ?=
# Test files spread over this many worker processes (pytest-xdist); most of a test's time is
# spent waiting on PostgreSQL, Kafka or a child process, so more workers than cores pays.
WORKERS ?= 4
MONEY_RULES := -m "money or not (integration or e2e or browser)" tests/unit tests/integration
RUN_ARGS ?=
SEED ?= 1
CHAOS_ARGS ?=

.PHONY: install lock stripe-mock run test check unit integration lint format infra-up infra-down bench chaos clean

install: $(STAMP)

# Every package from $(LOCK), each file checked against its hash, then settle itself (editable,
# without dependencies: they are all in the lock), then pip check that nothing is missing.
$(STAMP): pyproject.toml $(LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps \
		--no-build-isolation -e '.[dev]'
	$(BIN)/python -m pip check --disable-pip-version-check
	@touch $(STAMP)

# Re-resolve $(LOCK) (with the dev extra) and $(RUNTIME_LOCK) (without; at $(LOCK)'s versions)
# with pip-tools' pip-compile, in a scratch virtualenv. Pins already in a file are kept (new
# dependencies are added, unused ones dropped, hashes refreshed); LOCK_ARGS=--upgrade moves
# every pin to the newest version pyproject.toml allows, LOCK_ARGS="--upgrade-package NAME"
# one. Run `make test` on the result before committing it.
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet --disable-pip-version-check '$(PIP_TOOLS)'
	$(COMPILE) --extra dev $(LOCK_ARGS) -o $(LOCK) pyproject.toml
	$(COMPILE) --upgrade -c $(LOCK) -o $(RUNTIME_LOCK) pyproject.toml
	rm -rf .lock-venv

# settle run: PostgreSQL and Kafka up, migrations, every service supervised, a demo batch,
# then serving until Ctrl-C (RUN_ARGS="--no-demo", "--count 5000", "--ports-from 23000" ...).
run: install
	$(SETTLE) run $(RUN_ARGS)

# The Stripe adapter's conformance tests run against stripe-mock (Stripe's API mock, built
# once from the Go module proxy into $(go env GOPATH)/bin; a no-op afterwards).
stripe-mock:
	@deploy/stripe-mock/install.sh >/dev/null || { echo "stripe-mock could not be built (needs Go and the Go module proxy); the Stripe conformance tests need it" >&2; exit 1; }

# The whole suite: everything but the tests marked `alone` in parallel, then those one by one.
test: install stripe-mock
	@status=0; \
	$(BIN)/pytest -n $(WORKERS) --dist loadfile -m "not alone" $(PYTEST_ARGS) || status=1; \
	$(BIN)/pytest -m alone $(PYTEST_ARGS) || status=1; \
	exit $$status

# The fast tier for a developer's loop: lint, types (incremental), import floors, the unit
# tests and the money rules' integration tests (on `settle infra up`, started if it is not).
check: install
	$(BIN)/ruff format --check services railsim banksim tools tests deploy/observability
	$(BIN)/ruff check services railsim banksim tools tests deploy/observability
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -n 2 --dist loadfile $(MONEY_RULES) $(PYTEST_ARGS)

unit: install
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

integration: install stripe-mock
	$(BIN)/pytest tests/integration tests/e2e $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff format --check services railsim banksim tools tests deploy/observability
	$(BIN)/ruff check services railsim banksim tools tests deploy/observability
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir .site

format: install
	$(BIN)/ruff format services railsim banksim tools tests deploy/observability
	$(BIN)/ruff check --fix services railsim banksim tools tests deploy/observability

infra-up: install
	$(SETTLE) infra up

infra-down: install
	$(SETTLE) infra down

bench: install
	$(SETTLE) bench --scenario baseline

# A long chaos run on private PostgreSQL and Kafka (the shared ones are not touched); the
# short runs are part of `make test` (tests/e2e/test_chaos.py). CHAOS_ARGS="--rail-ignores-keys".
chaos: install
	$(SETTLE) chaos --count 5000 --seconds 180 --seed $(SEED) $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .lock-venv build *.egg-info .site

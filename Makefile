# The two commands a newcomer needs are `make run` and `make test`; both install first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# The versions the suite was last run with; `make install` takes exactly these.
LOCK := requirements.lock
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

$(STAMP): pyproject.toml $(LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c $(LOCK) -e '.[dev]'
	@touch $(STAMP)

# Resolve the newest versions pyproject.toml allows into $(LOCK), in a scratch virtualenv;
# run `make test` on the result before committing it.
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@echo "# make lock: every package make install takes, at the version last tested" > $(LOCK)
	.lock-venv/bin/python -m pip freeze --exclude-editable >> $(LOCK)
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
	rm -rf $(VENV) .lock-venv build *.egg-info

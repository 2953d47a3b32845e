# Parley: `make run` serves the app, `make test` runs the whole suite. Both bootstrap first.
SHELL := /bin/bash
PYTHON := .venv/bin/python
# The pinned uv that scripts/bootstrap.sh installs; Python comes from .venv, never a download.
UV := .tools/uv/bin/uv
export UV_PYTHON_DOWNLOADS := never
HOST ?= 127.0.0.1
PORT ?= 8000
PO := $(wildcard locale/*/LC_MESSAGES/django.po)
MO := $(PO:.po=.mo)
# The PostgreSQL run of the suite (the tests marked `postgres`: behaviour that depends on the
# backend); the `test` database on 127.0.0.1 is there on our machines and in CI.
TEST_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/test
# Test processes: two suit the 2-core machines the suite is sized for. The live tests spend
# much of their time waiting on servers, deadlines and idle timeouts, so they take one more.
WORKERS ?= 2
LIVE_WORKERS ?= 3
PYTEST := $(PYTHON) -m pytest

.PHONY: run test test-fast test-live test-postgres check lock-check lock upgrade bench bootstrap \
	messages makemessages lint format docs dev-database token user chat agents

bootstrap:
	@scripts/bootstrap.sh

locale/%/LC_MESSAGES/django.mo: locale/%/LC_MESSAGES/django.po
	@msgfmt --check-format -o $@ $<

messages: bootstrap $(MO)

run: export DEBUG ?= true
# The example MCP server (examples/notes_server.py), its notes kept beside the database.
run: export MCP_CONFIG ?= examples/mcp.json
run: export PARLEY_PYTHON ?= $(abspath $(PYTHON))
run: export NOTES_DIR ?= $(abspath data/notes)
# Mail (questions by e-mail, address confirmations) as files in data/mail, one per message,
# until EMAIL_BACKEND names a real one (docs/operators/email-and-push.md).
run: export EMAIL_BACKEND ?= django.core.mail.backends.filebased.EmailBackend
run: export EMAIL_FILE_PATH ?= $(abspath data/mail)
run: messages
	@$(PYTHON) manage.py migrate --no-input -v 0
	@$(PYTHON) manage.py ensure_demo_user
	@echo "Parley: http://$(HOST):$(PORT)/  (log in as demo / demo; mail goes to $(EMAIL_FILE_PATH))"
	@$(PYTHON) -m config.serve -b $(HOST) -p $(PORT)

# Commands on `make run`'s development database (DEBUG=true: no SECRET_KEY needed), migrated
# and with the demo account first: an API token for NAME (printed alone, for $(...)), a new
# account NAME (asks for its password), the terminal client (ARGS, e.g. --token "$TOKEN").
dev-database token user chat: export DEBUG ?= true
dev-database: messages
	@$(PYTHON) manage.py migrate --no-input -v 0
	@$(PYTHON) manage.py ensure_demo_user >/dev/null
token: dev-database
	@$(PYTHON) manage.py create_api_token "$(NAME)"
user: dev-database
	@$(PYTHON) manage.py add_user "$(NAME)"
chat: dev-database
	@$(PYTHON) manage.py chat $(ARGS)

# Everything CI runs: static checks, the in-process tests (SQLite), the tests that run real
# servers and Chromium, and the backend-dependent tests again on PostgreSQL.
test: check test-fast test-live test-postgres

# uv.lock must hold what pyproject.toml asks for. Offline first: a lock that still matches
# needs no index; only a mismatch goes on to ask the index, whose answer names the problem.
lock-check: bootstrap
	@$(UV) lock --check --offline --quiet 2>/dev/null || $(UV) lock --check --quiet || \
	    { echo "make: uv.lock does not match pyproject.toml: run 'make lock' and commit uv.lock" >&2; exit 1; }

# After editing pyproject.toml: resolve again (other locked versions stay), then install.
lock: bootstrap
	$(UV) lock
	@scripts/bootstrap.sh

# One dependency to its newest release that fits the others (a pin in pyproject.toml moves too).
upgrade: bootstrap
	@$(PYTHON) scripts/upgrade.py "$(PACKAGE)"
	@scripts/bootstrap.sh

# Static checks: lint, formatting, import layers, migrations in step with the models (under
# DEBUG, which needs no SECRET_KEY: comparing migrations signs nothing).
check: lock-check lint
	@DEBUG=true $(PYTHON) manage.py makemigrations --check --dry-run -v 0

# The tests need no SECRET_KEY: the suite signs with keys of its own (tests/settings.py,
# tests/live_server.py).

# The in-process tests: seconds each, on the suite's own SQLite database.
test-fast: messages
	$(PYTEST) -n $(WORKERS) -m "not live"

# The agent CLIs the live tests drive (Claude Code, Codex), pinned in tools/agents and
# installed with `npm ci` into .tools/agents; a no-op while the lock file is unchanged.
AGENTS := .tools/agents
agents: $(AGENTS)/.installed

$(AGENTS)/.installed: tools/agents/package.json tools/agents/package-lock.json
	@mkdir -p $(AGENTS)
	@cp tools/agents/package.json tools/agents/package-lock.json $(AGENTS)/
	@cd $(AGENTS) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# Real daphne and worker processes, Chromium, nginx, the agent CLIs: each test file on one
# test process.
test-live: messages agents
	$(PYTEST) -n $(LIVE_WORKERS) -m live --dist loadfile --durations=10

test-postgres: messages
	DATABASE_URL=$(TEST_POSTGRES_URL) $(PYTEST) -n $(WORKERS) -m "postgres and not live"

# The benchmark suite (bench/, under 5 minutes): results and a plot in docs/bench/.
# Needs PostgreSQL and Redis on 127.0.0.1 and Chromium at /usr/bin/chromium, like the tests.
bench: $(MO)
	@PARLEY_EXTRAS="dev bench" scripts/bootstrap.sh
	$(PYTHON) -m bench

# Reads the sources only; the settings load under DEBUG (no SECRET_KEY needed).
makemessages: export DEBUG ?= true
makemessages: bootstrap
	$(PYTHON) manage.py makemessages --no-wrap --no-obsolete --no-location -l en -l zh_Hans -l pt_BR -i ".venv/*" -i "tests/*" -i "scripts/*"

# The parts of docs/developers/architecture.md made from the code: the diagram of which app
# imports which, and the import contracts (scripts/architecture.py; tests/test_docs.py fails
# while the committed page differs).
docs: bootstrap
	@$(PYTHON) scripts/architecture.py

lint: bootstrap
	@$(PYTHON) -m ruff check .
	@$(PYTHON) -m ruff format --check .
	@.venv/bin/lint-imports --no-cache

format: bootstrap
	$(PYTHON) -m ruff check --fix . && $(PYTHON) -m ruff format .

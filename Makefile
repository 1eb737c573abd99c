# Every target creates what it needs from the project's own files (a virtual environment,
# npm ci for client-shim/); nothing has to be installed by hand.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BASE := $(VENV)/.installed-base
DEV := $(VENV)/.installed-dev
NODE := client-shim/node_modules/.installed
PANEL := examples/chat-panel
PANEL_NODE := $(PANEL)/node_modules/.installed

.PHONY: demo test lint pytest shim-test panel-test e2e shim-build bench clean postgresql

demo: $(BASE)
	$(PY) -m chat_history.demo

test: lint pytest shim-test panel-test e2e

lint: $(DEV)
	$(VENV)/bin/ruff check server tests bench
	$(VENV)/bin/ruff format --check server tests bench
	$(VENV)/bin/mypy

pytest: $(DEV) postgresql
	$(PY) -m pytest -q

# The storage suites run on SQLite and on a throwaway PostgreSQL cluster (tests/pgcluster.py):
# Debian's server and pg_trgm, installed with apt on first use.
postgresql:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && \
	    ls /usr/share/postgresql/*/extension/pg_trgm.control >/dev/null 2>&1; then :; else \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q postgresql postgresql-contrib; fi

shim-test: $(DEV) $(NODE)
	cd client-shim && CHAT_HISTORY_PYTHON="$(CURDIR)/$(PY)" npm test

# The sample chat panel (examples/chat-panel): unit tests of its pure modules, then the
# end-to-end test in code-server + headless Chromium (installs chromium, ripgrep, libkrb5-dev
# with apt and code-server 4.100.3 into $(PANEL)/.e2e-cache on first use).
shim-build: $(NODE)
	cd client-shim && npm run --silent build

panel-test: $(BASE) $(PANEL_NODE) shim-build
	cd $(PANEL) && CHAT_HISTORY_PYTHON="$(CURDIR)/$(PY)" npm test

e2e: $(BASE) $(PANEL_NODE) shim-build
	cd $(PANEL) && CHAT_HISTORY_PYTHON="$(CURDIR)/$(PY)" bash e2e/run.sh

bench: $(VENV)/.installed-bench
	$(PY) bench/run.py
	$(PY) bench/compaction.py
	$(PY) bench/search.py
	$(PY) bench/engines.py

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(BASE): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e .
	touch $@

$(DEV): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e ".[dev,sdk]"
	touch $(BASE) $@

$(VENV)/.installed-bench: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e ".[bench]"
	touch $(BASE) $@

$(NODE): client-shim/package-lock.json
	cd client-shim && npm ci --no-audit --no-fund
	touch $@

$(PANEL_NODE): $(PANEL)/package-lock.json $(NODE)
	cd $(PANEL) && npm ci --no-audit --no-fund
	touch $@

clean:
	rm -rf $(VENV) client-shim/node_modules client-shim/dist $(PANEL)/node_modules $(PANEL)/dist $(PANEL)/dist-test

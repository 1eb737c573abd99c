# Every target creates what it needs from the project's own files (a virtual environment,
# npm ci for client-shim/); nothing has to be installed by hand.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BASE := $(VENV)/.installed-base
DEV := $(VENV)/.installed-dev
NODE := client-shim/node_modules/.installed

.PHONY: demo test lint pytest shim-test bench clean

demo: $(BASE)
	$(PY) -m chat_history.demo

test: lint pytest shim-test

lint: $(DEV)
	$(VENV)/bin/ruff check server tests bench
	$(VENV)/bin/ruff format --check server tests bench
	$(VENV)/bin/mypy

pytest: $(DEV)
	$(PY) -m pytest -q

shim-test: $(DEV) $(NODE)
	cd client-shim && CHAT_HISTORY_PYTHON="$(CURDIR)/$(PY)" npm test

bench: $(VENV)/.installed-bench
	$(PY) bench/run.py

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

clean:
	rm -rf $(VENV) client-shim/node_modules client-shim/dist

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
# Native npm modules (the e2e's code-server, the panel's vsce) build against the system Node's
# headers, never a download from nodejs.org, whatever the user's ~/.npmrc says (issue 26 item 7).
NODE_HEADERS := $(firstword $(wildcard /usr/include/node/node.h /usr/local/include/node/node.h))
ifneq ($(NODE_HEADERS),)
export npm_config_nodedir := $(patsubst %/include/node/node.h,%,$(NODE_HEADERS))
endif

.PHONY: demo test check bytecode lint node-suites e2e-tools pytest shim-test mcp-inspector mcp-conformance panel-test e2e e2e-install shim-build bench clean wheels-check vsix vsix-all dist dist-check postgresql

demo: $(BASE)
	$(PY) -m chat_history.demo

# Every suite, in four steps; within a step the suites run side by side (-j2, each one's output
# shown whole when it ends): the set-up first, then the checks that mostly wait on the network
# beside lint, then pytest (CPU-bound on both cores) beside the short node suites and the
# packaging check, then the two editor suites alone, since they time what a person sees.
test:
	$(MAKE) --no-print-directory $(DEV) $(NODE) $(PANEL_NODE) $(ACP_AGENTS) $(MCP_INSPECTOR) $(MCP_CONFORMANCE) postgresql bytecode
	$(MAKE) --no-print-directory -j2 --output-sync=target lint wheels-check
	$(MAKE) --no-print-directory -j2 --output-sync=recurse pytest node-suites
	$(MAKE) --no-print-directory e2e
	$(MAKE) --no-print-directory e2e-install

# The shim's, the MCP Inspector's, the MCP conformance and the panel's suites, the packages' check and the editor
# suites' tools (chromium with apt, code-server into $(PANEL)/.e2e-cache), one by one.
# A make of its own with -j1: they share client-shim/dist (its tests rebuild it), so they must not
# run at once with each other, only beside pytest.
node-suites:
	$(MAKE) --no-print-directory -j1 shim-test mcp-inspector mcp-conformance panel-test dist-check e2e-tools

e2e-tools:
	cd $(PANEL) && bash e2e/install-code-server.sh .e2e-cache

# Every runtime dependency resolves to wheels for every .vsix target and Python 3.11-3.14
# (pip download --only-binary=:all: --platform P --python-version V; needs PyPI).
wheels-check: $(BASE)
	$(PY) packaging/wheels_check.py

lint: $(DEV)
	$(VENV)/bin/ruff check server tests bench packaging docs
	$(VENV)/bin/ruff format --check server tests bench packaging docs
	$(VENV)/bin/mypy

# The fast inner loop (under 3 minutes here): lint, types, and the unit and property tests on
# SQLite only; no PostgreSQL, no end-to-end suite, no node. `make test` is still the whole thing.
check: lint
	CHAT_HISTORY_TEST_ENGINES=sqlite $(PY) -m pytest -q -n 2 --dist loadfile -p no:cacheprovider tests/unit

# A real ACP agent (Codex's ACP adapter, a binary inside its npm package) for
# tests/e2e/test_acp_codex.py, run offline against a fake model in the test.
ACP_AGENTS := tests/acp-agents/node_modules/.installed
$(ACP_AGENTS): tests/acp-agents/package-lock.json
	cd tests/acp-agents && npm ci --no-audit --no-fund
	touch $@

# The server's bytecode, written once: most tests start server processes of their own, and
# where PYTHONDONTWRITEBYTECODE is set (as on this machine) each would compile the package again
# (~0.15 s of CPU a start). Python still checks each file's date, so an edit is never missed.
bytecode: $(BASE)
	$(PY) -m compileall -q server

# Five workers on two cores: most tests wait on a server process, a lease or a bound (at -n 3 the
# suite kept 1.2 of the 2 cores busy); -n 5 took it from 24 to 19.7 min with other work running.
pytest: $(DEV) postgresql $(ACP_AGENTS) $(PANEL_NODE) bytecode
	$(PY) -m pytest -q -n 5 --dist loadfile

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

# `chat-history mcp` checked with the MCP Inspector's command-line mode (tests/mcp-inspector).
MCP_INSPECTOR := tests/mcp-inspector/node_modules/.installed
mcp-inspector: $(DEV) $(MCP_INSPECTOR)
	cd tests/mcp-inspector && CHAT_HISTORY_PYTHON="$(CURDIR)/$(PY)" npm test

$(MCP_INSPECTOR): tests/mcp-inspector/package-lock.json
	cd tests/mcp-inspector && npm ci --no-audit --no-fund
	touch $@

# `chat-history mcp --http` checked by the MCP project's conformance suite
# (tests/mcp-conformance), at 2025-11-25 and at 2026-07-28: every server scenario the suite's
# frozen requirements list for each revision. The suite needs Node 22: npm installs it from the
# registry (the node-<platform> package of the host, an optional dependency), never from
# nodejs.org; `npm test` runs with it first on the PATH. A scenario with a failed check fails
# the target, except what is excluded below, by scenario or by scenario/check, each for its
# reason: they test the suite's own fixture server (its tools, prompts and resources by name,
# or protocol features a read-only history server does not offer), and our own tests cover the
# feature they stand for where we have it (tests/e2e/test_mcp*.py).
# logging (deprecated at 2026-07-28): the server offers no logging capability.
MCP_CONFORMANCE_EXCLUDE := logging-set-level tools-call-with-logging
# the fixture's tools returning images, audio and embedded resources; ours answer text and
# resource links.
MCP_CONFORMANCE_EXCLUDE += tools-call-image tools-call-audio tools-call-embedded-resource
MCP_CONFORMANCE_EXCLUDE += tools-call-mixed-content
# the fixture's tools that report progress, reconnect an SSE stream mid-call (needs an event
# store for resumption, which this server does not keep), or take x-mcp-header parameters.
MCP_CONFORMANCE_EXCLUDE += tools-call-with-progress server-sse-polling
MCP_CONFORMANCE_EXCLUDE += http-custom-header-server-validation
# the fixture's tools that ask the client for sampling, elicitation or roots (2025 requests,
# 2026 input_required results): a recall server asks its client for nothing.
MCP_CONFORMANCE_EXCLUDE += tools-call-sampling tools-call-elicitation
MCP_CONFORMANCE_EXCLUDE += elicitation-sep1034-defaults elicitation-sep1330-enums
MCP_CONFORMANCE_EXCLUDE += input-required-result-basic-elicitation
MCP_CONFORMANCE_EXCLUDE += input-required-result-basic-sampling
MCP_CONFORMANCE_EXCLUDE += input-required-result-basic-list-roots
MCP_CONFORMANCE_EXCLUDE += input-required-result-request-state
MCP_CONFORMANCE_EXCLUDE += input-required-result-multiple-input-requests
MCP_CONFORMANCE_EXCLUDE += input-required-result-multi-round
MCP_CONFORMANCE_EXCLUDE += input-required-result-non-tool-request
MCP_CONFORMANCE_EXCLUDE += input-required-result-result-type
MCP_CONFORMANCE_EXCLUDE += input-required-result-tampered-state
MCP_CONFORMANCE_EXCLUDE += input-required-result-capability-check
# ... and the 2026 stateless scenario's two checks that call the fixture's diagnostic tool
# test_missing_capability (its 26 other checks count).
MCP_CONFORMANCE_EXCLUDE += server-stateless/sep-2575-server-rejects-undeclared-capability
MCP_CONFORMANCE_EXCLUDE += server-stateless/sep-2575-missing-capability-http-400
# the fixture's resources by URI (test://static-text, test://static-binary,
# test://template/{id}/data) and its JSON Schema 2020-12 tool; ours are read by name in
# tests/e2e/test_mcp_resources.py.
MCP_CONFORMANCE_EXCLUDE += resources-read-text resources-read-binary resources-templates-read
MCP_CONFORMANCE_EXCLUDE += json-schema-2020-12
# prompts: the server offers none (so neither their completion, which it refuses as an
# invalid prompt name, -32602, nor the caching check of prompts/list; the other caching
# checks count).
MCP_CONFORMANCE_EXCLUDE += prompts-list prompts-get-simple prompts-get-with-args
MCP_CONFORMANCE_EXCLUDE += prompts-get-embedded-resource prompts-get-with-image
MCP_CONFORMANCE_EXCLUDE += completion-complete caching/sep-2549-prompts-list-caching-hints
MCP_CONFORMANCE := tests/mcp-conformance/node_modules/.installed
mcp-conformance: $(DEV) $(MCP_CONFORMANCE)
	cd tests/mcp-conformance && CHAT_HISTORY_PYTHON="$(CURDIR)/$(PY)" \
	  MCP_CONFORMANCE_EXCLUDE="$(MCP_CONFORMANCE_EXCLUDE)" npm test

$(MCP_CONFORMANCE): tests/mcp-conformance/package-lock.json
	cd tests/mcp-conformance && npm ci --no-audit --no-fund
	touch $@

# The sample chat panel (examples/chat-panel): unit tests of its pure modules, then the
# end-to-end test in code-server + headless Chromium (installs chromium, ripgrep, libkrb5-dev
# with apt and code-server 4.100.3 into $(PANEL)/.e2e-cache on first use).
shim-build: $(NODE)
	cd client-shim && npm run --silent build

panel-test: $(BASE) $(PANEL_NODE) shim-build
	cd $(PANEL) && CHAT_HISTORY_PYTHON="$(CURDIR)/$(PY)" npm test

e2e: $(BASE) $(PANEL_NODE) shim-build
	cd $(PANEL) && CHAT_HISTORY_PYTHON="$(CURDIR)/$(PY)" bash e2e/run.sh

# The sample panel with the server inside, for one VS Code target (packaging/vsix.py):
#   make vsix TARGET=linux-x64 [PAYLOAD=frozen,libs|frozen|libs]  → dist/chat-panel-<target>.vsix
TARGET ?= linux-x64
vsix: $(BASE) $(PANEL_NODE) shim-build
	$(PY) packaging/vsix.py --target $(TARGET) $(if $(PAYLOAD),--payload $(PAYLOAD))

# Every target this host can assemble (bundled libraries for all; a frozen server for its own).
vsix-all: $(BASE) $(PANEL_NODE) shim-build
	for t in win32-x64 win32-arm64 darwin-x64 darwin-arm64 linux-x64 linux-arm64 alpine-x64 alpine-arm64; do \
	  $(PY) packaging/vsix.py --target $$t || exit 1; done

# The server's wheel and sdist (the wheel built from the sdist) and the shim's npm tarball in dist/;
# dist-check installs each into a clean environment and runs it (packaging/dist_check.py).
dist: $(DEV) $(NODE)
	rm -f dist/chat_history_server-* dist/chat-history-client-*
	$(PY) -m build --outdir dist .
	cd client-shim && npm pack --silent --pack-destination ../dist
	ls -l dist

dist-check: dist
	$(PY) packaging/dist_check.py

# The linux-x64 .vsix installed in code-server with nothing else (no pip install of the server):
# no Python on PATH, then only a Python 3.10, then with a PostgreSQL database named
# (examples/chat-panel/e2e/install-run.sh); and the linux-arm64 .vsix run with Debian's arm64
# Python under qemu-user (packaging/arm64_run.py; qemu-user-static with apt on first use, the
# Python downloaded with apt into $(PANEL)/.e2e-cache, the host's own packages untouched).
e2e-install: $(DEV) $(PANEL_NODE) shim-build postgresql $(ACP_AGENTS)
	cd $(PANEL) && CHAT_HISTORY_PYTHON="$(CURDIR)/$(PY)" bash e2e/install-run.sh

bench: $(VENV)/.installed-bench
	$(PY) bench/run.py
	$(PY) bench/compaction.py
	$(PY) bench/search.py
	$(PY) bench/economy.py
	$(PY) bench/engines.py
	$(PY) bench/pg_writers.py
	$(PY) bench/pg_deletes.py
	$(PY) bench/recall.py
	$(PY) bench/memory.py
	$(PY) bench/replies.py
	$(PY) bench/watch.py
	$(PY) bench/watch.py --engine postgres
	$(PY) bench/acp.py
	$(PY) bench/imports.py
	$(PY) bench/roundtrip.py
	$(PY) bench/replay.py
	$(PY) bench/trees.py
	$(PY) bench/startup.py

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
	rm -rf build dist $(VENV) client-shim/node_modules tests/mcp-inspector/node_modules tests/mcp-conformance/node_modules tests/acp-agents/node_modules client-shim/dist $(PANEL)/node_modules $(PANEL)/dist $(PANEL)/dist-test

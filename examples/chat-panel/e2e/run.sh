#!/usr/bin/env bash
# The sample panel's end-to-end test, from nothing but the project's files and the package
# registries: installs chromium/ripgrep/libkrb5-dev (apt) and code-server 4.100.3 (npm, with the
# offline fixes) into .e2e-cache/ once, builds the .vsix, and runs e2e/scenario.mjs.
#   CHAT_HISTORY_PYTHON  Python with chat-history-server installed (default: the repo's .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${CHAT_HISTORY_PYTHON:-$(cd ../.. && pwd)/.venv/bin/python}
CACHE=.e2e-cache
start=$(date +%s)
bash e2e/install-code-server.sh "$CACHE"
echo "e2e: tools ready after $(( $(date +%s) - start ))s"
npm run --silent build
npx vsce package --no-dependencies --out dist/chat-panel.vsix >/dev/null
node e2e/scenario.mjs --code-server "$CACHE/code-server-4.100.3/bin/code-server" \
  --vsix dist/chat-panel.vsix --python "$PYTHON"

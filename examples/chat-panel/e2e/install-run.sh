#!/usr/bin/env bash
# Issue 26 item 5: the panel installed from its linux-x64 .vsix with nothing else, in code-server.
#   1. the .vsix with the frozen server (make vsix TARGET=linux-x64), no Python on PATH at all;
#   2. the same, with only a Python 3.10 on PATH;
#   3. a .vsix with bundled libraries only, only a Python 3.10 on PATH: one "too old" notification;
#   4. (issue 24) 1. with chatPanel.database naming a throwaway PostgreSQL cluster (tests/pgcluster.py,
#      Debian's postgresql: `make postgresql`): the frozen server's own psycopg and libpq store the
#      turn there, and it survives the restart;
#   5. a frozen .vsix built --without-postgres (as win32-arm64's, which has no psycopg wheel) and a
#      database named: one notification says there is no driver here and what to do;
#   6. (issue 44) the linux-arm64 .vsix (bundled libraries only), built beside them and run with
#      Debian's arm64 Python under qemu-user (packaging/arm64_run.py: the launch check, the server,
#      cli mcp, cli acp, the PostgreSQL driver; qemu-user-static and the Python from apt on
#      first use, the Python into $CACHE/debian-arm64-python).
# Builds the .vsix files into ../../dist/ (PyInstaller: a few minutes the first time).
#   CHAT_HISTORY_PYTHON     the repo's venv Python that builds them (default ../../.venv/bin/python)
#   CHAT_HISTORY_PYTHON310  a Python 3.10 (default: pyenv's, else python3.10 on PATH)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(cd ../.. && pwd)
PYTHON=${CHAT_HISTORY_PYTHON:-$REPO/.venv/bin/python}
CACHE=.e2e-cache
PY310=${CHAT_HISTORY_PYTHON310:-}
if [ -z "$PY310" ]; then
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10.*/bin/python3.10 /root/.pyenv/versions/3.10.*/bin/python3.10 $(command -v python3.10 || true); do
    if [ -x "$candidate" ] && [[ "$candidate" != */shims/* ]]; then PY310=$candidate; break; fi
  done
fi
[ -n "$PY310" ] || { echo "e2e-install: needs a Python 3.10 (set CHAT_HISTORY_PYTHON310)" >&2; exit 1; }
bash e2e/install-code-server.sh "$CACHE"
# The four .vsix files are built at once (each mostly waits on pip's index or runs one core),
# from one build of the panel; each job's output is shown when it ends. The linux-arm64 one is
# run under qemu as soon as it is built, while the frozen servers are still being made.
npm run --silent build
logged() {
  local log=$1; shift
  if (cd "$REPO" && "$@") >"$log" 2>&1; then
    cat "$log"
  else
    cat "$log"; echo "e2e-install: failed: $*" >&2; return 1
  fi
}
build() {
  local log=$1; shift
  logged "$log" "$PYTHON" packaging/vsix.py --panel-built "$@"
}
mkdir -p "$CACHE"
build "$CACHE/vsix-frozen.log" --target linux-x64 --payload frozen,libs & full=$!
build "$CACHE/vsix-libs.log" --target linux-x64 --payload libs --out dist/chat-panel-linux-x64-libs.vsix & libs=$!
build "$CACHE/vsix-nopg.log" --target linux-x64 --payload frozen --without-postgres --out dist/chat-panel-linux-x64-nopg.vsix & nopg=$!
{
  build "$CACHE/vsix-arm64.log" --target linux-arm64 &&
    logged "$CACHE/arm64-run.log" "$PYTHON" packaging/arm64_run.py \
      --vsix dist/chat-panel-linux-arm64.vsix --cache "$PWD/$CACHE"
} & arm64=$!
failed=0
for pid in $full $libs $nopg $arm64; do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || exit 1
ROOT="$CACHE/code-server-4.100.3"
node e2e/install.mjs --code-server-root "$ROOT" --vsix "$REPO/dist/chat-panel-linux-x64.vsix" --python none --expect works
node e2e/install.mjs --code-server-root "$ROOT" --vsix "$REPO/dist/chat-panel-linux-x64.vsix" --python "$PY310" --expect works
node e2e/install.mjs --code-server-root "$ROOT" --vsix "$REPO/dist/chat-panel-linux-x64-libs.vsix" --python "$PY310" --expect too-old
node e2e/install.mjs --code-server-root "$ROOT" --vsix "$REPO/dist/chat-panel-linux-x64.vsix" --python none --expect works --postgres "$PYTHON"
node e2e/install.mjs --code-server-root "$ROOT" --vsix "$REPO/dist/chat-panel-linux-x64-nopg.vsix" --python none --expect no-driver --postgres "$PYTHON"

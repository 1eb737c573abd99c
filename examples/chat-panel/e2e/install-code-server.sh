#!/usr/bin/env bash
# Installs what the e2e needs on a fresh Debian machine, from package registries only:
#   apt: chromium, ripgrep, libkrb5-dev (skipped when already installed);
#   npm: code-server 4.100.3 into $CACHE (reused when present), with the five offline fixes of
#        shared/guides/editor-e2e.md (no download from GitHub or nodejs.org).
# Usage: install-code-server.sh CACHE_DIR   → CACHE_DIR/code-server/bin/code-server
set -euo pipefail
CACHE=${1:?usage: install-code-server.sh CACHE_DIR}
VERSION=4.100.3
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

need=()
for pkg in chromium ripgrep libkrb5-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "e2e: apt-get install ${need[*]}"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

ROOT="$CACHE/code-server-$VERSION"
if [ -f "$ROOT/.installed" ]; then
  exit 0
fi
echo "e2e: installing code-server $VERSION into $ROOT (about 2-3 minutes)"
rm -rf "$ROOT"
mkdir -p "$ROOT"
cd "$ROOT"
echo '{"name":"e2e-code-server","private":true}' > package.json
# Fix 1: pin 4.100.3 (later releases need Node 22+). Fix 2: --ignore-scripts (its postinstall
# downloads ripgrep from GitHub); the postinstall is redone by hand below.
npm install --no-audit --no-fund --ignore-scripts "code-server@$VERSION" >/dev/null
CS="$ROOT/node_modules/code-server"
export npm_config_yes=true   # Fix 4: node-pty's rebuild runs `npx node-gyp`, which would prompt.
# Native modules build against the system Node's headers (Debian's nodejs ships them in
# /usr/include/node), never a download from nodejs.org, whatever the user's ~/.npmrc says.
if [ -z "${npm_config_nodedir:-}" ]; then
  for dir in /usr /usr/local; do
    if [ -f "$dir/include/node/node.h" ]; then export npm_config_nodedir=$dir; break; fi
  done
fi
(
  cd "$CS/lib/vscode"
  npm install --no-audit --no-fund --omit=dev --ignore-scripts >/dev/null
  # Fix 2 (cont.): Debian's rg instead of the download.
  mkdir -p node_modules/@vscode/ripgrep/bin
  ln -sf /usr/bin/rg node_modules/@vscode/ripgrep/bin/rg
  # Fix 3: native kerberos builds against libkrb5-dev (apt, above).
  npm rebuild >/dev/null 2>&1 || npm rebuild
  ln -sfn node_modules node_modules.asar
  if [ -f bin/remote-cli/code-linux.sh ]; then cp bin/remote-cli/code-linux.sh bin/remote-cli/code-server; fi
  if [ -f bin/helpers/browser-linux.sh ]; then cp bin/helpers/browser-linux.sh bin/helpers/browser.sh; fi
  (cd extensions && npm install --no-audit --no-fund --omit=dev >/dev/null)
)
# Fix 5: argon2 (loaded at startup) was skipped by --ignore-scripts.
(cd "$ROOT" && npm rebuild argon2 >/dev/null)
mkdir -p "$ROOT/bin"
ln -sfn "$CS/out/node/entry.js" "$ROOT/bin/entry.js"
cat > "$ROOT/bin/code-server" <<SH
#!/bin/sh
exec node "$CS/out/node/entry.js" "\$@"
SH
chmod +x "$ROOT/bin/code-server"
HOME="$ROOT/home" XDG_CONFIG_HOME="$ROOT/home/.config" XDG_DATA_HOME="$ROOT/home/.local/share" \
  "$ROOT/bin/code-server" --config "$ROOT/home/config.yaml" --version
touch "$ROOT/.installed"

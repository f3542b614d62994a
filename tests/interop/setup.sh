#!/usr/bin/env bash
# Installs the third-party MCP clients that tests/it/serve_interop.rs drives against
# `mcpload serve`: the Python SDK (PyPI `mcp`, pinned in requirements.txt) into .venv and the
# TypeScript SDK (npm `@modelcontextprotocol/sdk`, pinned in package.json/package-lock.json)
# into node_modules. Idempotent and cheap when nothing changed (a stamp file records the hash
# of the pins); safe to run from several processes at once (flock). Needs python3 (with venv)
# and npm; fails loudly when either is missing.
set -euo pipefail
cd "$(dirname "$0")"

exec 9>.setup.lock
flock 9

STAMP=.installed
WANT="$(cat requirements.txt package.json package-lock.json | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -x .venv/bin/python && -d node_modules/@modelcontextprotocol/sdk ]]; then
    exit 0
fi

command -v python3 >/dev/null || { echo "setup.sh: python3 is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "setup.sh: npm is required" >&2; exit 1; }

rm -f "$STAMP"
[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
npm ci --no-audit --no-fund --loglevel=error
.venv/bin/python -c "import mcp" 
node -e "import('@modelcontextprotocol/sdk/client/index.js')"
echo "$WANT" > "$STAMP"

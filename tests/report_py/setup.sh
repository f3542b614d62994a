#!/usr/bin/env bash
# Installs the independent Python readers of the run folder, pinned in requirements.txt, into
# the git-ignored .venv/ beside this script: HdrHistogram's Python port (PyPI hdrhistogram,
# module hdrh, with its one dependency) for tests/it/report_hlog_python.rs, a reader of
# latency.hlog; junitparser for tests/it/report_ci.rs, a reader of --junit files.
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

#!/usr/bin/env bash
# Installs everything the test suite needs that cargo does not: the third-party MCP servers and
# clients (npm, PyPI, pinned), the MCP conformance harness (npm, with Node 22), HdrHistogram's
# Python port, headless Chromium and tmux (Debian), and a JSON Schema validator with two TOML
# language servers' CLIs (PyPI). Each part is idempotent and quick when already done.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/interop/setup.sh"          # SDK clients that drive `mcpload serve`
bash "$here/interop_servers/setup.sh"  # the "everything" server and the Python SDK server
bash "$here/conformance/setup.sh"      # the MCP conformance harness (and the Node 22 it needs)
bash "$here/report_py/setup.sh"        # hdrh, an independent reader of latency.hlog
bash "$here/report_browser/setup.sh"   # chromium, to render report.html
bash "$here/live/setup.sh"             # tmux, a real terminal for the live view
bash "$here/profile_schema/setup.sh"   # check-jsonschema, tombi, taplo: readers of schema/profile.json
bash "$here/prometheus/setup.sh"       # Prometheus, the receiver of --prometheus-remote-write

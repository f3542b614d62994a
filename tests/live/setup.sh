#!/usr/bin/env bash
# Installs tmux (Debian package `tmux`) for tests/it/run_live.rs, which runs `mcpload run` in a
# real terminal and reads its live screen back with `capture-pane`. Needs root (CI runs as
# root); quick when tmux is already there.
set -euo pipefail
if command -v tmux >/dev/null; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends tmux >/dev/null
command -v tmux >/dev/null

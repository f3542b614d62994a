#!/usr/bin/env bash
# Installs Prometheus (Debian package `prometheus`, 2.42 on bookworm) for
# tests/it/export_prometheus.rs, which starts the binary itself (no systemd in a container)
# with its remote-write receiver and native histograms on, and reads back what mcpload pushed.
# The package's service is not used. Needs root (CI runs as root); quick when installed.
set -euo pipefail
if command -v prometheus >/dev/null; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# In a container (no systemd) the package starts no daemon; the test runs its own.
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
command -v prometheus >/dev/null

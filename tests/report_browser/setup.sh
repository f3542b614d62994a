#!/usr/bin/env bash
# Installs headless Chromium (Debian package `chromium`) for tests/it/report_browser.rs, which
# opens report.html from disk in a real browser. Needs root (CI runs as root); quick when
# Chromium is already there.
set -euo pipefail
if command -v chromium >/dev/null; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null

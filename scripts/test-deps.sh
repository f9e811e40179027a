#!/bin/sh
# System packages the test suite needs beyond Python: Debian's headless Chromium, which
# tests/test_report.py uses to check that the HTML report's plots render. Idempotent and quiet.
set -eu
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null

#!/bin/sh
# What the test suite needs beyond Python. Idempotent and quiet.
# - Debian's headless Chromium: tests/test_report.py checks that the HTML report's plots render.
# - The Codex CLI, the pinned npm release, in a cache directory outside the repository:
#   tests/test_codex.py drives the real binary offline (tests/codex_cli.py reads the version here).
set -eu
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
apt_install() {
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
    apt_install chromium
fi

CODEX_VERSION=0.171.0
CODEX_DIR="${MAST_OTEL_CODEX_DIR:-$HOME/.cache/mast-otel/codex}"
if ! "$CODEX_DIR/node_modules/.bin/codex" --version 2>/dev/null | grep -qx "codex-cli $CODEX_VERSION"; then
    command -v npm >/dev/null 2>&1 || apt_install npm
    mkdir -p "$CODEX_DIR"
    npm install --prefix "$CODEX_DIR" --no-audit --no-fund --loglevel=error "@openai/codex@$CODEX_VERSION" >/dev/null
fi

#!/usr/bin/env bash
# Install Debian's Chromium and ChromeDriver for the browser tests of the Prefect and MLflow
# UIs, unless they are there already (safe to rerun). Needs root (or sudo) and apt.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "error: the browser tests need chromium and chromium-driver; install them as root:" >&2
    echo "  apt-get install chromium chromium-driver" >&2
    exit 1
  fi
fi
echo "installing chromium and chromium-driver (Debian packages, about a minute)" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null

#!/usr/bin/env bash
# The HTML report's test renders the page in headless Chromium (Debian's `chromium`).
# Installs it when missing; needs root or passwordless sudo, as apt does.
set -euo pipefail
if command -v chromium >/dev/null; then
    exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
    sudo="sudo -n"
fi
echo "installing Debian's chromium for the HTML report test (apt-get)..."
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null

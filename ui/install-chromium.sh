#!/bin/sh
# install-chromium.sh installs the headless browser ui/browser_test.go drives
# (Debian's "chromium" package).
#
# Idempotent and quiet: it does nothing when /usr/bin/chromium (or chromium
# on PATH) is already there. Otherwise it installs the package with apt-get;
# needs root (CI) or sudo. Output goes to a log that is shown only on
# failure.
#
#   sh ui/install-chromium.sh
set -eu

if [ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1; then
	exit 0
fi

fail() {
	echo "install-chromium.sh: $*" >&2
	exit 1
}

command -v apt-get >/dev/null 2>&1 ||
	fail "chromium is missing and apt-get is not available; install Chromium and put 'chromium' on PATH"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || fail "need root or sudo to install chromium"
	SUDO="sudo"
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium; } >"$log" 2>&1; then
	cat "$log" >&2
	fail "apt-get install chromium failed"
fi
command -v chromium >/dev/null 2>&1 || fail "chromium was installed but is not on PATH"

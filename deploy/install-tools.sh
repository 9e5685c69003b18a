#!/bin/sh
# install-tools.sh installs the tools deploy/deploy_test.go uses to check the
# operator artifacts: promtool (Prometheus rule checks and rule unit tests).
#
# Idempotent and quiet: it does nothing when promtool is already on PATH.
# Otherwise it downloads Debian's "prometheus" package with apt and copies
# only its promtool binary to $PROMTOOL_DIR (default /usr/local/bin). It does
# not install the package itself, so no Prometheus server or exporter is
# started on the machine. Needs root (CI) or sudo.
#
#   sh deploy/install-tools.sh
set -eu

PROMTOOL_DIR=${PROMTOOL_DIR:-/usr/local/bin}

if command -v promtool >/dev/null 2>&1; then
	exit 0
fi

fail() {
	echo "install-tools.sh: $*" >&2
	exit 1
}

command -v apt-get >/dev/null 2>&1 ||
	fail "promtool is missing and apt-get is not available; install promtool from https://prometheus.io/download/ and put it on PATH"
command -v dpkg-deb >/dev/null 2>&1 || fail "promtool is missing and dpkg-deb is not available"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || fail "need root or sudo to install promtool"
	SUDO="sudo"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log="$tmp/log"

export DEBIAN_FRONTEND=noninteractive
if ! {
	$SUDO apt-get update -qq &&
		(cd "$tmp" && apt-get download -qq prometheus) &&
		dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root" &&
		$SUDO install -D -m 0755 "$tmp/root/usr/bin/promtool" "$PROMTOOL_DIR/promtool"
} >"$log" 2>&1; then
	cat "$log" >&2
	fail "could not install promtool from Debian's prometheus package"
fi

"$PROMTOOL_DIR/promtool" --version >/dev/null 2>&1 || fail "$PROMTOOL_DIR/promtool does not run"
command -v promtool >/dev/null 2>&1 || echo "install-tools.sh: installed $PROMTOOL_DIR/promtool, which is not on PATH" >&2

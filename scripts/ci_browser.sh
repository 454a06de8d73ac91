#!/usr/bin/env bash
# Browser test of `coolgp dashboard` (issue 11), called by .ci/run after `cargo test`.
#
# Installs Debian's chromium and, in a venv, PyPI playwright 1.64.1 + pytest (Playwright drives
# /usr/bin/chromium: it downloads no browser). Builds the coolgp binary if missing, starts a
# 3-node path fleet with examples/fleet.sh and four dashboards (the fleet, the fleet in brief
# mode with --full-status-limit 1, an unknown fleet, an endpoint with nothing behind it), runs scripts/browser/test_dashboard.py, and stops
# every process it started.
#
# Env: CARGO_TARGET_DIR (binary in $CARGO_TARGET_DIR/release, else target/release),
#      COOLGP (the binary), BASE_PORT (first node port, default 27447), BROWSER_VENV.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
COOLGP=${COOLGP:-$TARGET/release/coolgp}
VENV=${BROWSER_VENV:-$TARGET/browser-venv}
BASE_PORT=${BASE_PORT:-27447}
N=3
ROWS=100

if [ ! -x /usr/bin/chromium ]; then
  echo "installing chromium (Debian) ..." >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium > /dev/null
fi
if [ ! -x "$VENV/bin/pytest" ] || ! "$VENV/bin/python" -c 'import playwright' 2> /dev/null; then
  echo "installing playwright 1.64.1 + pytest in $VENV ..." >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q playwright==1.64.1 pytest
fi
if ! "$COOLGP" node --help > /dev/null 2>&1; then
  echo "building coolgp with the networked commands (release, --features node) ..." >&2
  (cd "$ROOT" && cargo build --release -p coolgp-cli --features node)
fi

RUN=$(mktemp -d "${TMPDIR:-/tmp}/coolgp-browser.XXXXXX")
# shellcheck source=scripts/browser/lib.sh
. "$ROOT/scripts/browser/lib.sh"
trap stop_all EXIT

# A 3-node path, left running (KEEP=1) once every node holds all N x ROWS points.
TMPDIR=$RUN KEEP=1 BASE_PORT=$BASE_PORT ROWS=$ROWS COOLGP=$COOLGP \
  "$ROOT/examples/fleet.sh" "$N" > "$RUN/fleet.out" 2>&1 || {
  cat "$RUN/fleet.out" >&2
  exit 1
}

start_dashboard fleet --fleet demo --connect "tcp/127.0.0.1:$BASE_PORT"
DASHBOARD_URL=$url
start_dashboard brief --fleet demo --connect "tcp/127.0.0.1:$BASE_PORT" --full-status-limit 1
DASHBOARD_BRIEF_URL=$url
start_dashboard unknown --fleet no-such-fleet --connect "tcp/127.0.0.1:$BASE_PORT"
DASHBOARD_UNKNOWN_URL=$url
start_dashboard unreachable --fleet demo --connect "tcp/127.0.0.1:1"
DASHBOARD_UNREACHABLE_URL=$url
export DASHBOARD_URL DASHBOARD_BRIEF_URL DASHBOARD_UNKNOWN_URL DASHBOARD_UNREACHABLE_URL
export EXPECT_NODES=$N EXPECT_POINTS=$((N * ROWS))

rc=0
(cd "$ROOT/scripts/browser" && "$VENV/bin/pytest" -q -p no:cacheprovider test_dashboard.py) || rc=$?
if [ "$rc" -eq 5 ]; then
  echo "ci_browser: pytest collected no test" >&2
  exit 1
fi
if [ "$rc" -ne 0 ]; then
  for f in "$RUN"/dash-*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done
fi
exit "$rc"

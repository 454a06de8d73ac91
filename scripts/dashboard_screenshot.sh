#!/usr/bin/env bash
# Remakes docs/img/dashboard.png: a dashboard watching examples/fleet.sh 5 (with a holdout so
# that rmse_holdout is drawn) from before the fleet starts, screenshotted by Playwright +
# Debian chromium once the fleet has converged. Needs what scripts/ci_browser.sh installs.
# Env: COOLGP, CARGO_TARGET_DIR, BROWSER_VENV as in ci_browser.sh; BASE_PORT (default 37447).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
COOLGP=${COOLGP:-$TARGET/release/coolgp}
VENV=${BROWSER_VENV:-$TARGET/browser-venv}
BASE_PORT=${BASE_PORT:-37447}
OUT=${1:-$ROOT/docs/img/dashboard.png}

RUN=$(mktemp -d "${TMPDIR:-/tmp}/coolgp-shot.XXXXXX")
# shellcheck source=scripts/browser/lib.sh
. "$ROOT/scripts/browser/lib.sh"
trap stop_all EXIT

# shellcheck source=examples/fleet_data.sh
. "$ROOT/examples/fleet_data.sh"
fleet_data "$RUN" 1 300
mv "$RUN/data0.csv" "$RUN/holdout.csv"

start_dashboard shot --fleet demo --connect "tcp/127.0.0.1:$BASE_PORT"

TMPDIR=$RUN KEEP=1 BASE_PORT=$BASE_PORT ROWS=1500 ROUND_MS=250 COOLGP=$COOLGP \
  NODE_FLAGS="--holdout $RUN/holdout.csv" "$ROOT/examples/fleet.sh" 5 > "$RUN/fleet.out" 2>&1
(cd "$ROOT/scripts/browser" && "$VENV/bin/python" screenshot.py "$url" "$OUT" 8)
echo "wrote $OUT" >&2

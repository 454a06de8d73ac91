#!/usr/bin/env bash
# CI step for the Python package (issue 9), run by .ci/run after `cargo test`:
# a venv, `pip install ./crates/coolgp-py` (maturin builds the abi3 wheel with cargo, reusing
# the release artifacts of `cargo test --release`), pytest, numpy and eclipse-zenoh from PyPI,
# the `coolgp` binary (the interop and simulate tests start it), then pytest.
#
# Env: PYTHON (default python3), COOLGP_VENV (default <repo>/target/ci-venv),
#      CARGO_TARGET_DIR (honoured; default <repo>/target).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${COOLGP_VENV:-$ROOT/target/ci-venv}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
start=$(date +%s)

source scripts/ci_venv.sh
"${PIP[@]}" install --quiet "numpy>=1.21" "pytest>=7" "eclipse-zenoh>=1.10,<1.11"
"${PIP[@]}" install ./crates/coolgp-py

if ! "$TARGET/release/coolgp" node --help >/dev/null 2>&1; then
  cargo build --release -p coolgp-cli --features node
fi
export COOLGP="$TARGET/release/coolgp" COOLGP_REQUIRE_BINARY=1

# The sources are under python/coolgp, so the installed package is the one imported.
cd "$ROOT/crates/coolgp-py"
set +e
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests in crates/coolgp-py/tests: the Python suite is missing" >&2
  exit 1
fi
echo "python CI step: $(( $(date +%s) - start )) s (exit $rc)" >&2
exit "$rc"

# Sourced by the CI steps that need Python (ci_python.sh, ci_ros2.sh): installs python3 and
# venv from apt when missing, then makes the venv "$VENV" and sets PIP to its pip.
# Needs: PYTHON (default python3), VENV.
PYTHON=${PYTHON:-python3}
if ! command -v "$PYTHON" >/dev/null || ! "$PYTHON" -c "import venv, ensurepip" 2>/dev/null; then
  echo "installing python3 and python3-venv (apt)" >&2
  apt-get update -qq && apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
  PYTHON=python3
fi
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

#!/usr/bin/env bash
# Installs the GPyTorch peer (not part of CI): PyTorch 1.13 CPU from Debian's python3-torch
# (PyPI's torch wheels pull several GB of CUDA libraries), GPyTorch 1.11 and linear_operator
# 0.5.2 (the last releases that support torch 1.13) from PyPI, in a venv that sees the
# system's torch. Needs root (apt-get) on Debian bookworm.
set -euo pipefail
VENV=${VENV:-/opt/coolgp-bench}
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch python3-venv >/dev/null
/usr/bin/python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q "gpytorch==1.11" "linear_operator==0.5.2" "numpy<2"
"$VENV/bin/python" -c "import torch, gpytorch; print('torch', torch.__version__, 'gpytorch', gpytorch.__version__)"
echo "peer ready: $VENV/bin/python bench/gpytorch_svgp.py --help"

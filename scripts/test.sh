#!/usr/bin/env bash
# test.sh: the README's test command, the whole set-up on a fresh Debian or Ubuntu machine, and what
# .ci/run runs: install the missing Debian packages (scripts/install-deps.sh: nothing asked of apt,
# so no root needed, when scripts/debian-packages.txt is all installed), make or find the pinned
# Python test environment (tests/py/make_venv.sh: torch (CPU), diffusers, h5py, numpy from PyPI) at
# $DSGAP_VENV, else /opt/dsgap-venv where that can be written, else ~/.cache/dsgap-venv, then
# `cmake --workflow --preset ci` (configure, build, every CTest suite; the label-python tests run in
# that environment and fail, never skip, without it; GPU tests skip (77) without a device).
#   Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [ -z "${DSGAP_VENV:-}" ]; then
  DSGAP_VENV=/opt/dsgap-venv # kept where it can be written or already works
  [ -w "$DSGAP_VENV" ] || [ -w /opt ] || "$DSGAP_VENV/bin/python" -c 'import torch, diffusers, h5py, numpy' 2>/dev/null ||
    DSGAP_VENV=${XDG_CACHE_HOME:-$HOME/.cache}/dsgap-venv
fi
export DSGAP_VENV # read by tests/CMakeLists.txt when the workflow configures
bash tests/py/make_venv.sh "$DSGAP_VENV"
cmake --workflow --preset ci

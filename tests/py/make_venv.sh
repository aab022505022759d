#!/bin/bash
# make_venv.sh [VENV]: the Python test environment (tests/CMakeLists.txt), default $DSGAP_VENV or
# /opt/dsgap-venv: Debian's python3 venv with tests/py/requirements.txt (pinned, from PyPI), torch
# without its CUDA packages (tests/py/torch_stubs.py stubs the CUDA libraries it links and the machine
# lacks). Kept while requirements.txt and torch_stubs.py are unchanged (a stamp holds their hash);
# remade otherwise. Retries the downloads; exits non-zero with a message when it cannot finish.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:-${DSGAP_VENV:-/opt/dsgap-venv}}
req=$here/requirements.txt
stamp=$(cat "$req" "$here/torch_stubs.py" | sha256sum | cut -c1-16)
if [ -f "$venv/.dsgap-stamp" ] && [ "$(cat "$venv/.dsgap-stamp")" = "$stamp" ] &&
   "$venv/bin/python" -c 'import torch, diffusers, h5py, numpy' 2>/dev/null; then
  echo "make_venv: $venv is up to date"
  exit 0
fi
t0=$(date +%s)
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
pip() { "$venv/bin/python" -m pip --disable-pip-version-check -q "$@"; }
retry() { for i in 1 2 3; do "$@" && return 0; echo "make_venv: retrying ($i): $*" >&2; sleep 5; done; return 1; }
retry pip install --no-deps -r "$req"
"$venv/bin/python" "$here/torch_stubs.py" "$venv"/lib/python3*/site-packages/torch/lib
"$venv/bin/python" -c 'import torch, diffusers, h5py, numpy; torch.ones(2) @ torch.ones(2); print("make_venv: torch", torch.__version__, "diffusers", diffusers.__version__, "cuda", torch.cuda.is_available())'
echo "$stamp" > "$venv/.dsgap-stamp"
echo "make_venv: $venv made in $(( $(date +%s) - t0 )) s"

#!/bin/bash
# run.sh VENV SCRIPT ARGS...: run a Python test in the test venv; fail (never skip) when it is missing.
venv=$1
shift
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch, diffusers, h5py, numpy' 2>/dev/null; then
  echo "FAIL: the Python test environment $venv is missing or incomplete (torch, diffusers, h5py, numpy)."
  echo "      make it with: bash tests/py/make_venv.sh $venv   (scripts/test.sh does; DSGAP_VENV=DIR picks another place)"
  exit 1
fi
exec "$venv/bin/python" -B "$@"

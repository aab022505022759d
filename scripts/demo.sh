#!/usr/bin/env bash
# demo.sh: the README's first command on a fresh machine: install what is missing (Debian packages),
# build (CUDA kernels too where nvcc is present), and run the main job, `dsgap demo`, whose tables
# and figures land in dsgap-demo/ (or the directory given as $1).  Usage: scripts/demo.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default
build/dsgap demo --out "${1:-dsgap-demo}"

#!/usr/bin/env bash
# dev/recheck/run_on_device.sh: on the GPU machine (carry .carry of scripts/device_pack.sh), dev/recheck/
# comparison_ditfastattn.ini with the carried dsgap; $OUT/recheck.tgz holds its merged run.
set -u
cd "$(dirname "$0")/../.." || exit 2
mkdir -p /tmp/dglib /tmp/rcbin && tar -C /tmp/dglib -xJf .carry/lib.tar.xz && tar -C /tmp/rcbin -xJf .carry/bin.tar.xz
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
date -u +%Y-%m-%dT%H:%M:%SZ
cat .carry/COMMIT
/tmp/rcbin/bin/dsgap --version
time /tmp/rcbin/bin/dsgap run dev/recheck/comparison_ditfastattn.ini --out /tmp/rc --device gpu --quiet
echo "run rc $?"
tar -C /tmp/rc -czf "$OUT/recheck.tgz" --exclude=cells .
ls /tmp/rc

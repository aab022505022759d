# carry_env.sh: sourced by dev/device/*.sh on the device machine, from the repository root: unpacks the
# carry of scripts/device_pack.sh (libraries to /tmp/dglib, binaries to .carry/bin) once, and sets the
# environment its binaries need (LD_LIBRARY_PATH, one OpenBLAS thread, DG_COMMIT the carried commit,
# B the binaries' folder). OUT defaults to device-out/ and is made.
OUT=${OUT:-$PWD/device-out}
mkdir -p /tmp/dglib "$OUT"
[ -d /tmp/dglib/lib ] || tar -C /tmp/dglib -xJf .carry/lib.tar.xz
[ -d .carry/bin ] || tar -C .carry -xJf .carry/bin.tar.xz
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} OPENBLAS_NUM_THREADS=1
export DG_COMMIT=$(cat .carry/COMMIT)
B=$PWD/.carry/bin

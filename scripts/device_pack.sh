#!/usr/bin/env bash
# device_pack.sh: prepare .carry/ (ignored by git) for a run on the GPU machine, which has the CUDA
# driver and toolkit but not GSL, OpenBLAS, cJSON, inih, HDF5 or gnuplot: the dsgap binary and the
# GPU test binaries built here (CUDA runtime linked statically: gpu_kernels, gpu_meta, gpu_dit,
# wan_dump), libdsgap.so (the Python package's: scripts/device_python.sh), the kernel benchmark
# dsgap-bench-kernels (build/, build/kernels/ or, with -DDSGAP_DEV_KERNELS=ON, build/dev/kernels/,
# whose other programs come along too), plus the shared libraries they need that the GPU machine
# lacks. Then: device run with carry [".carry"] and `OUT=dir bash scripts/device_all.sh` (its header
# lists the steps).
#   Usage: scripts/device_pack.sh   (after cmake --build --preset default, a CUDA build)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/dsgap ] || { echo "device_pack.sh: no build/dsgap: cmake --build --preset default first" >&2; exit 1; }
rm -rf .carry && mkdir -p .carry/bin .carry/lib
git rev-parse --short=12 HEAD > .carry/COMMIT
git diff --quiet HEAD || sed -i "s/$/+wip/" .carry/COMMIT
cp build/dsgap .carry/bin/
cp -L build/libdsgap.so .carry/bin/ # libdsgap for dsgap.torch (scripts/device_python.sh: DSGAP_LIB)
for t in build/tests/gpu_* build/tests/wan_dump; do [ -x "$t" ] && [ -f "$t" ] && cp "$t" .carry/bin/; done
for d in build build/kernels build/dev/kernels; do
  [ -x "$d/dsgap-bench-kernels" ] && cp "$d/dsgap-bench-kernels" .carry/bin/
done
if [ -d build/dev/kernels ]; then # the development kernels' benchmarks and tests
  find build/dev/kernels -maxdepth 1 -type f -perm -u+x -exec cp {} .carry/bin/ \;
fi
for t in gpu_kernels gpu_meta gpu_dit dsgap-bench-kernels; do
  [ -f ".carry/bin/$t" ] || echo "device_pack.sh: warning: no $t in build/ (a build without CUDA?): its steps of device_all.sh will fail" >&2
done
# libraries of the harness that a stock CUDA image lacks (the rest of ldd's list is there)
for lib in libhdf5_serial.so.103 libhdf5_serial_hl.so.100 libsz.so.2 libaec.so.0 libgsl.so.27 libgslcblas.so.0 \
           libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libcjson.so.1 libinih.so.1 libgomp.so.1; do
  cp -L "/lib/x86_64-linux-gnu/$lib" .carry/lib/
done
strip --strip-unneeded .carry/lib/*.so* 2>/dev/null || true
tar -C .carry -cJf .carry/lib.tar.xz lib && rm -rf .carry/lib   # OpenBLAS alone is 35 MB unpacked
# the binaries too (22 MB each, mostly the same CUDA code): stripped, in one tar that xz's 64 MiB window
# compresses to about 3 MB, so that the tree and .carry travel within 64 MiB
ls .carry/bin
strip --strip-unneeded .carry/bin/* 2>/dev/null || true
tar -C .carry -cf - bin | xz -9e -T1 > .carry/bin.tar.xz && rm -rf .carry/bin
du -sh .carry

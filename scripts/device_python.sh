#!/usr/bin/env bash
# device_python.sh: the Python package's benchmarks on the GPU machine (torch there, diffusers not):
# python/bench/bench_capture.py (issue 20: capture overhead, trace writer) and
# python/bench/bench_processor.py (issue 22: dsgap.torch.attention against diffusers' attention;
# its PARTS), one after the other, alone on the GPU. libdsgap comes from the CUDA build carried in
# .carry (scripts/device_pack.sh packs build/libdsgap.so into bin.tar.xz, the libraries it needs
# into lib.tar.xz); diffusers and importlib_metadata from the wheels in .whl/ (carried, installed
# with --no-index --no-deps into /tmp/site).
#   (here)   cmake --build --preset default && scripts/device_pack.sh; .whl/ holds the wheels
#   (device) OUT=dir [BENCHES="processor capture"] [PARTS=overhead,hunyuan,wan] bash scripts/device_python.sh
#            with carry [".carry", ".whl"]
# $OUT: summary.txt and python.tgz (bench_capture.{md,csv}, bench_processor.{md,csv}, capture.log, processor.log:
# the device returns a limited number of files).
# Each benchmark's limit: CAPTURE_CAP (default 300 s), PROCESSOR_CAP (default 330 s).
set -u
cd "$(dirname "$0")/.." || exit 2
[ -f .carry/lib.tar.xz ] || { echo "device_python.sh: no .carry/: run scripts/device_pack.sh here and carry .carry" >&2; exit 2; }
ls .whl/*.whl >/dev/null 2>&1 || { echo "device_python.sh: no wheels in .whl/ (diffusers, importlib_metadata): carry .whl" >&2; exit 2; }
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT" /tmp/dglib /tmp/site
tar -C /tmp/dglib -xJf .carry/lib.tar.xz
[ -d .carry/bin ] || tar -C .carry -xJf .carry/bin.tar.xz
[ -f .carry/bin/libdsgap.so ] || { echo "device_python.sh: no libdsgap.so in .carry (device_pack.sh of a build without it?)" >&2; exit 2; }
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 2
CUBLAS_PY=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${CUBLAS_PY:+$CUBLAS_PY:}${LD_LIBRARY_PATH:-}
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} DSGAP_LIB=$PWD/.carry/bin/libdsgap.so
OMP_NUM_THREADS=$(nproc)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS PYTHONUNBUFFERED=1 OUT
S=$OUT/summary.txt
{
	echo "device_python.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(cat .carry/COMMIT 2>/dev/null || echo unknown)"
	nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
	python3 -c 'import torch, diffusers, sys; sys.path.insert(0, "python"); from dsgap import torch_abi
print("torch", torch.__version__, "diffusers", diffusers.__version__, "libdsgap", torch_abi.version())'
} 2>&1 | tee "$S"
run() { # name limit command...: output in $OUT/name.log, a line in the summary
	local name=$1 to=$2 t0=$SECONDS; shift 2
	timeout "$to" "$@" >"$OUT/$name.log" 2>&1
	echo "$name: rc=$? ($((SECONDS - t0)) s)" | tee -a "$S"
}
for b in ${BENCHES:-processor capture}; do
	case $b in
	capture) run capture "${CAPTURE_CAP:-300}" python3 python/bench/bench_capture.py --out "$OUT" ;;
	processor) run processor "${PROCESSOR_CAP:-330}" python3 python/bench/bench_processor.py --out "$OUT" \
		--parts "${PARTS:-overhead,hunyuan,wan}" ;;
	*) echo "device_python.sh: unknown benchmark '$b' (capture, processor)" | tee -a "$S" ;;
	esac
done
grep -hE "^(generation_s_no_capture|[a-z0-9_]+_overhead|capture_compression|writer_[a-z]+_gb_per_s)," "$OUT/bench_capture.csv" 2>/dev/null | tee -a "$S"
grep -hE "^(wan,(speedup|psnr_db|ssim|dense_s|mc_sparse_s)|hunyuan,.*(speedup|refused)|overhead,.*overhead_us)" \
	"$OUT/bench_processor.csv" 2>/dev/null | tee -a "$S"
# the device returns a limited number of files: everything but the summary in one archive
(cd "$OUT" && tar czf python.tgz --exclude=python.tgz --exclude=summary.txt ./* && find . -type f ! -name python.tgz \
	! -name summary.txt -delete)

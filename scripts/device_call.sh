#!/usr/bin/env bash
# scripts/device_call.sh: one device call for kernel work (the dev versions and candidate builds), on the
# GPU machine from .carry/ (scripts/device_pack.sh, plus the files below placed in .carry/ after it):
#   1. scripts/device_all.sh with STEPS (default: the GPU checks and the 12-head length sweep) and
#      DEADLINE (default 240 s);
#   2. .carry/gpu_meta_dev.xz (xz of build-dev/dev/kernels/gpu_meta_dev, -DDSGAP_DEV_KERNELS=ON):
#      --bench (every version of exact scores and PCA grouping, PCA by phase), then --quick (the
#      versions against the CPU twin);
#   3. each .carry/dsgap_NAME.xz (a dsgap built with a candidate launcher) against .carry/bin/dsgap
#      (with DIT5X=1 and no candidate: .carry/bin/dsgap alone): cuDNN dense at 32760 tokens, 12/24/40
#      heads, then mc-sparse's DiT call there (and at the token grids GRIDS, default 21x30x52: the latent
#      grid after the 1x2x2 patches, 480p 21x30x52, 720p 21x45x80, not the latent's 21x90x160), ROUNDS
#      (default 2) interleaved rounds;
#   4. the 720p kernel shape (N720, default 75600 tokens): dsgap-bench-kernels and
#      scripts/gpu_bench_torch.py (our gather kernel against cuDNN on the same pairs); N720=0: skipped;
#   5. .carry/gpu_kernels_dev.xz and .carry/dsgap-bench-kernels-dev.xz (xz of build-dev/dev/kernels/
#      gpu_kernels_dev and build-dev/dsgap-bench-kernels-dev), where present: the attention versions'
#      checks (--quick) and their times at 32760 and N720 tokens.
# Everything goes into $OUT/call.tgz; $OUT/call.txt is the headline lines (a device call returns at
# most 8 files). Run (device tool, carry [".carry"]): bash scripts/device_call.sh
cd "$(dirname "$0")/.." || exit 2
W=/tmp/device_call
rm -rf "$W" && mkdir -p "$W"
T=$OUT/call.txt
trap 'tar -C "$W" -czf "$OUT/call.tgz" .' EXIT
STEPS="${STEPS:-gpu_kernels gpu_meta gpu_api gpu_cache gpu_replay gpu_dit closed_loop length}" LENGTH_HEADS=${LENGTH_HEADS:-12} \
	LENGTH_BACKEND_CAP=${LENGTH_BACKEND_CAP:-0} DEADLINE=${DEADLINE:-240} OUT=$W/device_all bash scripts/device_all.sh > "$W/device_all.log" 2>&1
echo "device_all rc $?" | tee "$T"
cp "$W/device_all/summary.txt" "$W/" 2>/dev/null && cat "$W/summary.txt" >> "$T"
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64 DG_COMMIT=$(cat .carry/COMMIT)
if [ -f .carry/gpu_meta_dev.xz ]; then
	xz -dc .carry/gpu_meta_dev.xz > /tmp/gpu_meta_dev && chmod +x /tmp/gpu_meta_dev
	timeout "${TB:-75}" /tmp/gpu_meta_dev --bench > "$W/meta_dev_bench.log" 2>&1
	echo "gpu_meta_dev --bench rc $?" >> "$T"
	grep -E "^bench (exact_scores|pca_groups)" "$W/meta_dev_bench.log" >> "$T"
fi
cands=$(cd .carry && ls dsgap_*.xz 2>/dev/null | sed 's/^dsgap_//; s/\.xz$//')
if [ -n "$cands" ] || [ "${DIT5X:-0}" = 1 ]; then
	timeout 90 python3 scripts/gpu_bench_torch.py --sweep 32760 --csv "$W/cudnn32760.csv" > "$W/cudnn32760.log" 2>&1
	echo "cuDNN at 32760 rc $?" >> "$T"
	cut -d, -f1-4 "$W/cudnn32760.csv" >> "$T"
	for c in $cands; do xz -dc ".carry/dsgap_$c.xz" > "/tmp/dsgap_$c" && chmod +x "/tmp/dsgap_$c"; done
	for r in $(seq "${ROUNDS:-2}"); do for b in base $cands; do
		x=.carry/bin/dsgap; [ "$b" = base ] || x=/tmp/dsgap_$b
		timeout 60 "$x" callspeed --device gpu --path dit --grids "${GRIDS:-21x30x52}" --heads 12,24,40 --policies mc-sparse \
			--reps 5 --csv "$W/cand_$b.csv" >> "$W/cand.log" 2>&1
		echo "callspeed $b round $r rc $?" >> "$T"
	done; done
	for b in base $cands; do echo "== $b: n heads dense call anchor amortised" >> "$T"
		grep mc-sparse "$W/cand_$b.csv" | cut -d, -f5,7,11-14 >> "$T"; done
fi
if [ "${N720:-75600}" != 0 ]; then
	timeout 60 .carry/bin/dsgap-bench-kernels --n "${N720:-75600}" --reps 5 --csv "$W/k720.csv" > "$W/k720.log" 2>&1
	echo "dsgap-bench-kernels --n ${N720:-75600} rc $?" >> "$T"
	timeout 90 python3 scripts/gpu_bench_torch.py --n "${N720:-75600}" --reps 5 --densities 0.15 --ours "$W/k720.csv" \
		--csv "$W/k720.csv" >> "$W/k720.log" 2>&1
	echo "gpu_bench_torch.py rc $?" >> "$T"
	grep -E "^(dense_tflops,|sparse_ms@0.15|sparse_eff_tflops@0.15|cudnn_tflops|cudnn_pairs|sparse_over_cudnn)" "$W/k720.csv" |
		cut -d, -f1-3 >> "$T"
fi
if [ -f .carry/gpu_kernels_dev.xz ]; then
	xz -dc .carry/gpu_kernels_dev.xz > /tmp/gpu_kernels_dev && chmod +x /tmp/gpu_kernels_dev
	timeout 150 /tmp/gpu_kernels_dev --quick > "$W/kernels_dev_check.log" 2>&1
	echo "gpu_kernels_dev --quick rc $?: $(tail -1 "$W/kernels_dev_check.log")" >> "$T"
	grep -E "^FAIL|fail" "$W/kernels_dev_check.log" | head -5 >> "$T"
fi
if [ -f .carry/dsgap-bench-kernels-dev.xz ]; then
	xz -dc .carry/dsgap-bench-kernels-dev.xz > /tmp/bench_kernels_dev && chmod +x /tmp/bench_kernels_dev
	for nn in 32760 "${N720:-75600}"; do
		[ "$nn" = 0 ] && continue
		timeout 120 /tmp/bench_kernels_dev --n "$nn" --quick --csv "$W/kernels_dev_$nn.csv" > "$W/kernels_dev_$nn.log" 2>&1
		echo "dsgap-bench-kernels-dev --n $nn rc $?" >> "$T"
		grep -E "^(sparse_over_dense_v[0-9]|sparse_ms@0.15|dense_ms|dense_pairs|sparse_over_dense_pairs|sparse_heads_over|probe_)" "$W/kernels_dev_$nn.csv" |
			cut -d, -f1-3 >> "$T"
	done
fi
if [ -x /tmp/gpu_meta_dev ]; then
	timeout 60 /tmp/gpu_meta_dev --quick > "$W/meta_dev_check.log" 2>&1
	echo "gpu_meta_dev --quick rc $?: $(tail -1 "$W/meta_dev_check.log")" >> "$T"
fi
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv >> "$T"
cat "$T"

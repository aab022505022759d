#!/usr/bin/env bash
# kmeans_call.sh (dev): one device call after svg2's k-means rewrite (2026-12-06): gpu_meta --peers
# (svg2's key lists identical to the CPU twin's over a cold and a warm step), svg2's bench before
# (.carry/bin/gpu_meta_old: the test of this commit, the kernel of the commit before) and after, two
# interleaved rounds, the attention kernels of svg2's matched call under Nsight Compute (their
# times), then the comparison's speed stage (scripts/device_all.sh comparison, COMPARISON_STAGE=speed).
# Pack: scripts/device_pack.sh, then gpu_meta_old added to .carry/bin.tar.xz. Out: $OUT/r.tgz, $OUT/cmp.
cd "$(dirname "$0")/../.." || exit 2
mkdir -p /tmp/dglib "$OUT/r" && tar -C /tmp/dglib -xJf .carry/lib.tar.xz && tar -C .carry -xJf .carry/bin.tar.xz
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=.carry/bin R=$OUT/r
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/gpu.txt"
cat "$R/gpu.txt"
timeout 150 $B/gpu_meta --peers > "$R/peers.log" 2>&1
echo "gpu_meta --peers rc $?: $(grep -c '^ok' "$R/peers.log") ok, $(grep -c '^FAIL' "$R/peers.log") FAIL" | tee -a "$R/steps.txt"
for r in 1 2; do
	for b in gpu_meta_old gpu_meta; do
		for s in svg2 svg2/budget=matched; do
			timeout 60 $B/$b --bench-peers $s >> "$R/bench_$b.log" 2>&1
			echo "round $r $b $s rc $?" >> "$R/steps.txt"
		done
	done
done
grep -h "bench peer" "$R"/bench_*.log | cut -c1-200
if command -v ncu > /dev/null; then
	timeout 120 ncu --metrics gpu__time_duration.sum -k 'regex:attn|small|keys' -c 24 \
		$B/gpu_meta --bench-peers svg2/budget=matched > "$R/ncu.log" 2>&1
	echo "ncu rc $?" >> "$R/steps.txt"
fi
OUT=$OUT/cmp STEPS=comparison COMPARISON_STAGE=speed DEADLINE=${CMP_DEADLINE:-420} bash scripts/device_all.sh 2>&1 | tail -6
tar -C "$OUT" -czf "$OUT/r.tgz" r && rm -rf "$R"

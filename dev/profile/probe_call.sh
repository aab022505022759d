#!/usr/bin/env bash
# probe_call.sh (dev): one device call of measurements before a change (issue 21/23, 2026-12-06):
# cuBLASLt's algorithms on the Wan GEMM shapes (gemm_probe), the replay backend's anchor by phase at
# 32760 and 75600 tokens x 12 heads (dsgap bench), and every metadata kernel at 32760 (gpu_meta --bench).
# On the GPU machine with .carry/ from scripts/device_pack.sh plus .carry/probe/gemm_probe.
cd "$(dirname "$0")/../.." || exit 2
mkdir -p /tmp/dglib && tar -C /tmp/dglib -xJf .carry/lib.tar.xz && tar -C .carry -xJf .carry/bin.tar.xz
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} DG_COMMIT=$(cat .carry/COMMIT)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
date -u +%FT%TZ >> "$OUT/device.txt"
timeout 200 .carry/probe/gemm_probe 16 > "$OUT/gemm_probe.csv" 2>&1; echo "gemm_probe rc $?"
for n in 32760; do
	timeout 120 .carry/bin/dsgap bench --device gpu --tokens $n --heads 12 --layer-step none --reps 3 \
		--csv "$OUT/bench$n.csv" > "$OUT/bench$n.log" 2>&1; echo "bench $n rc $?"
done
[ "${META:-0}" = 1 ] && timeout 120 .carry/bin/gpu_meta --bench > "$OUT/meta_bench.log" 2>&1
grep -hE "^bench" "$OUT/meta_bench.log" 2>/dev/null | head -60
# the DiT path's mc-sparse call at 720p's token count, kernel by kernel where the machine has nsys
echo "tools: $(for t in nsys ncu; do command -v $t >/dev/null && printf '%s ' $t; done)"
P=(.carry/bin/dsgap callspeed --device gpu --path both --grids 21x45x80,21x30x52 --heads 12 --policies mc-sparse --reps 3)
timeout 120 "${P[@]}" --csv "$OUT/callspeed.csv" > "$OUT/callspeed.log" 2>&1; echo "callspeed rc $?"
if command -v nsys >/dev/null; then
	timeout 150 nsys profile -q -o /tmp/cs --stats=false "${P[@]}" --csv /tmp/cs.csv > /dev/null 2>&1
	nsys stats -q --report cuda_gpu_kern_sum --format csv /tmp/cs.nsys-rep > "$OUT/nsys_kern.csv" 2>&1
	echo "nsys rc $?"; head -25 "$OUT/nsys_kern.csv" | cut -c1-220
fi
# the Wan2.1-1.3B architecture at 720p: 3 steps dense, then mc-sparse (step 0 the anchor, 1-2 reuse),
# GEMM and elementwise times per forward (generate.json), kernel by kernel under nsys where it exists
if [ "${DIT720:-1}" = 1 ]; then
	B=/tmp/w720
	timeout 200 python3 scripts/gpu_dit.py make 1.3b $B --seed 2 --latent 21x90x160 > "$OUT/make.log" 2>&1; echo "make rc $?"
	G=(.carry/bin/dsgap generate --model $B/model --text $B/text.safetensors --noise $B/noise.safetensors --steps 3
	   --guidance 5 --shift 5 --device gpu --policies dense,mc-sparse --density 0.15
	   --schedule warmup=1,anchors=0,dense_layers=0 --quiet)
	if command -v nsys >/dev/null; then
		timeout 200 nsys profile -q -o /tmp/g720 --stats=false "${G[@]}" --out /tmp/g720out > "$OUT/gen720.log" 2>&1
		echo "nsys generate rc $?"
		nsys stats -q --report cuda_gpu_trace --format csv /tmp/g720.nsys-rep 2>/dev/null | xz > "$OUT/gen720_trace.csv.xz"
	else
		timeout 200 "${G[@]}" --out /tmp/g720out > "$OUT/gen720.log" 2>&1; echo "generate rc $?"
	fi
	cp /tmp/g720out/generate.json "$OUT/gen720.json" 2>/dev/null
fi

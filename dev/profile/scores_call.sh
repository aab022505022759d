#!/usr/bin/env bash
# scores_call.sh (dev): one device call for the exact scores' v9/v10 (issue 21, 2026-12-06):
# gpu_meta_dev --quick (every version against the CPU twin, v9/v10's bits against v6) while the
# 720p model is made, gpu_meta_dev --bench (every version at 32760 tokens, one head), then the
# Wan2.1-1.3B architecture at 720p x 81 (random weights), 4 steps (warm-up 2, anchor 1), mc-sparse
# with the promoted scores (.carry/bin/dsgap) and with v9 promoted (.carry/bin/dsgap_v9: the same tree
# with kernels/group_scores.cu's launcher on OVL), interleaved A B A B, the first with dense beside it.
# Pack: scripts/device_pack.sh, then .carry/bin.tar.xz with build-dev's gpu_meta_dev and dsgap_v9 added.
cd "$(dirname "$0")/../.." || exit 2
mkdir -p /tmp/dglib && tar -C /tmp/dglib -xJf .carry/lib.tar.xz && tar -C .carry -xJf .carry/bin.tar.xz
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
date -u +%FT%TZ >> "$OUT/device.txt"
B=/tmp/w720
timeout 200 python3 scripts/gpu_dit.py make 1.3b $B --seed 2 --latent 21x90x160 > "$OUT/make.log" 2>&1 &
MK=$!
timeout 200 .carry/bin/gpu_meta_dev --quick > "$OUT/meta_dev_quick.txt" 2>&1; echo "gpu_meta_dev --quick rc $?"
tail -3 "$OUT/meta_dev_quick.txt"; grep -i "fail" "$OUT/meta_dev_quick.txt" | head -5
wait $MK; echo "make rc $?"
timeout 150 .carry/bin/gpu_meta_dev --bench > "$OUT/meta_dev_bench.txt" 2>&1; echo "gpu_meta_dev --bench rc $?"
grep -i "exact_scores" "$OUT/meta_dev_bench.txt"
run() { # name binary policies
	local name=$1 bin=$2 pol=$3
	timeout 150 "$bin" generate --model $B/model --text $B/text.safetensors --noise $B/noise.safetensors --steps 4 \
		--guidance 5 --shift 5 --device gpu --density 0.15 --schedule warmup=2,anchors=1,dense_layers=0 \
		--policies "$pol" --out /tmp/gen_$name > "$OUT/gen_$name.log" 2>&1
	echo "generate $name rc $?"
	cp /tmp/gen_$name/generate.json "$OUT/gen_$name.json" 2>/dev/null
}
run a1 .carry/bin/dsgap dense,mc-sparse
run b1 .carry/bin/dsgap_v9 mc-sparse
run a2 .carry/bin/dsgap mc-sparse
run b2 .carry/bin/dsgap_v9 mc-sparse
python3 dev/profile/gen_steps.py "$OUT"/gen_a1.json "$OUT"/gen_b1.json "$OUT"/gen_a2.json "$OUT"/gen_b2.json | tee "$OUT/steps.txt"
date -u +%FT%TZ >> "$OUT/device.txt"

#!/usr/bin/env bash
# pooled_call.sh (dev): what MC-Sparse's exact selection (score=exact, the factorial's S) costs at
# 720p (issue 21, 2026-12-06): the Wan2.1-1.3B architecture at 720p x 81 (random weights), 4 steps
# (warm-up 2, anchor 1), dense and mc-sparse with its own scores, with score=pooled (the group's mean
# query against the keys), and each with cfg_meta=shared; the 50-step ratio projected by
# dev/profile/gen_steps.py. Pack: scripts/device_pack.sh (dsgap alone is needed).
cd "$(dirname "$0")/../.." || exit 2
mkdir -p /tmp/dglib && tar -C /tmp/dglib -xJf .carry/lib.tar.xz && tar -C .carry -xJf .carry/bin.tar.xz
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
B=/tmp/w720
timeout 200 python3 scripts/gpu_dit.py make 1.3b $B --seed 2 --latent 21x90x160 > "$OUT/make.log" 2>&1; echo "make rc $?"
timeout 300 .carry/bin/dsgap generate --model $B/model --text $B/text.safetensors --noise $B/noise.safetensors --steps 4 \
	--guidance 5 --shift 5 --device gpu --density 0.15 --schedule warmup=2,anchors=1,dense_layers=0 \
	--policies dense,mc-sparse,mc-sparse/score=pooled,mc-sparse/cfg_meta=shared,mc-sparse/score=pooled/cfg_meta=shared \
	--out /tmp/gen > "$OUT/gen.log" 2>&1; echo "generate rc $?"
cp /tmp/gen/generate.json /tmp/gen/generate.csv "$OUT/" 2>/dev/null
python3 dev/profile/gen_steps.py "$OUT/generate.json" | tee "$OUT/steps.txt"
date -u +%FT%TZ >> "$OUT/device.txt"

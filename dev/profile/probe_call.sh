#!/usr/bin/env bash
# probe_call.sh (dev): one device call of measurements before a change (issue 21, 2026-12-06):
# cuBLASLt's algorithms on the Wan GEMM shapes (gemm_probe), then the Wan2.1-1.3B architecture at
# 720p x 81 (random weights), 4 steps (warm-up 2, anchor 1: a dense step, the anchor, two reuse
# steps), dense and mc-sparse, with the dev switches of the binary: DSGAP_GEMM_TUNE=16 (the fastest
# of cuBLASLt's first 16 algorithms per GEMM shape) and DSGAP_GEN_NOWAIT=1 (the entry point without
# its syncs), and the storage switches as a policy. Output: gemm_probe.csv, gen_VARIANT.json/.log.
# The two switches are not in dsgap: build it with dev/profile/gemm_tune_nowait.patch applied (git apply),
# then scripts/device_pack.sh, plus .carry/probe/gemm_probe (nvcc line in gemm_probe.cu).
# Run 2026-12-06T16:18Z on an H100: results/gpu/2026-12-06T1618Z-h100/.
cd "$(dirname "$0")/../.." || exit 2
mkdir -p /tmp/dglib && tar -C /tmp/dglib -xJf .carry/lib.tar.xz && tar -C .carry -xJf .carry/bin.tar.xz
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} DG_COMMIT=$(cat .carry/COMMIT)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
date -u +%FT%TZ >> "$OUT/device.txt"
B=/tmp/w720
timeout 200 python3 scripts/gpu_dit.py make 1.3b $B --seed 2 --latent 21x90x160 > "$OUT/make.log" 2>&1 &
MK=$!
timeout 60 .carry/probe/gemm_probe 8 > "$OUT/gemm_probe.csv" 2>&1; echo "gemm_probe rc $?"
wait $MK; echo "make rc $?"
G=(.carry/bin/dsgap generate --model $B/model --text $B/text.safetensors --noise $B/noise.safetensors --steps 4
   --guidance 5 --shift 5 --device gpu --density 0.15 --schedule warmup=2,anchors=1,dense_layers=0)
run() { # name policies [VAR=value ...]
	local name=$1 pol=$2; shift 2
	env "$@" timeout 150 "${G[@]}" --policies "$pol" --out /tmp/gen_$name > "$OUT/gen_$name.log" 2>&1
	echo "generate $name rc $?: $(tail -c 300 /tmp/gen_$name/generate.csv 2>/dev/null | tr '\n' ' ')"
	cp /tmp/gen_$name/generate.json "$OUT/gen_$name.json" 2>/dev/null
}
run base dense,mc-sparse,mc-sparse/keys=bitmap/residual_dtype=bf16
run tune dense,mc-sparse DSGAP_GEMM_TUNE=16
run nowait dense,mc-sparse DSGAP_GEN_NOWAIT=1

grep -h "gemm tune" "$OUT/gen_tune.log" | sort | uniq | head -20
date -u +%FT%TZ >> "$OUT/device.txt"

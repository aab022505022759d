#!/usr/bin/env bash
# offload_14b.sh: issue 53 item 4 on one GPU of 80 GB (an H100, where the 14B's caches at 720p fit only
# offloaded): the Wan2.1-14B architecture at 720p x 81 (random weights, scripts/gpu_dit.py make 14b, 6
# shards), one closed-loop cell (dsgap run) of mc-sparse/keys=bitmap/residual_dtype=bf16 at rho 0.15 with
# [device] cache_offload = true, STEPS (4) UniPC steps, CFG 5, shift 5, warm-up WARMUP (3: dense steps
# 0..WARMUP-2, the anchor at WARMUP-1), layer 0 dense. Prints the cell's step times, the offload's
# figures (host memory pinned ahead beside the dense steps, pinning left on the loop's thread, copies,
# exposed waits) and the 50-step projection (step 0 + 8 dense + anchor + 40 reuse against 50 dense steps,
# each the measured mean of its kind; the dense step from steps 1.., since step 0 runs beside the pinning). From the binaries of scripts/device_pack.sh (builds nothing).
# PAIR=1 runs the cell without offload first (a GPU that holds its caches: an H200), for the anchor
# step with offload against the one without on one card.
#   (device) OUT=dir [STEPS=4] [WARMUP=3] [PAIR=1] bash dev/device/offload_14b.sh    (carry .carry)
set -u
cd "$(dirname "$0")/../.." || exit 2
STEPS=${STEPS:-4}
WARMUP=${WARMUP:-3}
W=/tmp/offload_14b
. dev/device/carry_env.sh
mkdir -p "$W"
export OMP_NUM_THREADS=$(nproc)
DSGAP=$B/dsgap
L=$OUT/offload_14b.log
echo "offload_14b.sh $(date -u +%FT%TZ) commit $(cat .carry/COMMIT); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" | tee "$L"
M=$W/m
if [ ! -f "$M/model/diffusion_pytorch_model.safetensors.index.json" ]; then
	t0=$SECONDS
	python3 scripts/gpu_dit.py make 14b "$M" --seed 3 --shards 6 --latent 21x90x160 >> "$L" 2>&1 || { echo "no model" | tee -a "$L"; exit 1; }
	echo "model made in $((SECONDS - t0)) s" | tee -a "$L"
fi
# PAIR=1 (a GPU that holds the caches, an H200): the same cell without offload first, in its own process
cell() { # tag offload(true|false): one run of the sparse cell; its run.json -> $OUT/run_TAG.json, a CSV block
	local tag=$1
	printf '%s\n' "[experiment]" "name = offload14b" "[model]" "path = $M/model" "latent = 21x90x160" "steps = $STEPS" \
		"shift = 5" "guidance = 5" "sampler = unipc" "seeds = 0" "[prompts]" "p = $M/text.safetensors" \
		"[policies]" "list = mc-sparse/keys=bitmap/residual_dtype=bf16" "[densities]" "list = 0.15" \
		"[schedules]" "w = warmup=$WARMUP,dense_layers=0" "[device]" "device = gpu" "cache_offload = $2" > "$W/e_$tag.ini"
	rm -rf "$W/exp_$tag"
	(while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; sleep 0.5; done > "$W/mem_$tag.txt") &
	local poll=$! t0=$SECONDS
	"$DSGAP" run "$W/e_$tag.ini" --out "$W/exp_$tag" --shard 1/2 >> "$L" 2>&1 # cell 1, the sparse one (cell 0: dense)
	local rc=$?
	kill $poll 2>/dev/null
	echo "dsgap run ($tag): rc=$rc ($((SECONDS - t0)) s)" | tee -a "$L"
	local j
	j=$(ls "$W"/exp_$tag/cells/*/*mc-sparse*/run.json 2>/dev/null | head -1)
	[ -n "$j" ] || { echo "no run.json ($tag)" | tee -a "$L"; return 1; }
	cp "$j" "$OUT/run_$tag.json"
	python3 - "$j" "$W/mem_$tag.txt" "$WARMUP" "$tag" <<'PY' | tee -a "$OUT/offload_14b.csv" | tee -a "$L"
import json, sys
r = json.load(open(sys.argv[1]))
w, tag = int(sys.argv[3]), sys.argv[4]
s = r["step_s"]
peak = max((float(x) for x in open(sys.argv[2]) if x.strip()), default=0) / 1024
# the dense step: the mean of the dense steps after step 0 (step 0 runs beside the pinning ahead, which a
# dense run does not do); the sparse run counts its own step 0 as measured
dense = sum(s[1:w - 1]) / (w - 2) if w > 2 else s[0]
anchor = s[w - 1]
reuse = sum(s[w:]) / len(s[w:])
print("%s_peak_gib,%.2f,GiB (nvidia-smi)" % (tag, peak))
print("%s_steps_s,%s,s (measured; step_s of run.json)" % (tag, ";".join("%.3f" % x for x in s)))
print("%s_dense_step_s,%.3f,s (mean of steps %d..%d)" % (tag, dense, min(1, w - 2), w - 2))
print("%s_anchor_step_s,%.3f,s (step %d)" % (tag, anchor, w - 1))
print("%s_reuse_step_s,%.3f,s (mean of steps %d..)" % (tag, reuse, w))
for k in ("offload_pin_s", "offload_pin_ahead_bytes", "offload_pin_ahead_s", "offload_copy_s", "offload_wait_s",
          "offload_up_bytes", "offload_down_bytes", "metadata_s", "attend_s", "load_s"):
    if k in r:
        print("%s_%s,%.6g,%s" % (tag, k, r[k], "bytes" if k.endswith("bytes") else "s"))
d50, s50 = 50 * dense, s[0] + 8 * dense + anchor + 40 * reuse
print("%s_speedup_50,%.3f,ratio (projection: 50 dense steps %.1f s against step 0 + 8 dense + anchor + 40 reuse %.1f s)" % (tag, d50 / s50, d50, s50))
print("%s_anchor_over_dense,%.3f,ratio" % (tag, anchor / dense))
PY
}
echo "name,value,unit" > "$OUT/offload_14b.csv"
[ "${PAIR:-0}" = 1 ] && cell plain false
cell offload true

#!/usr/bin/env bash
# gpu_14b.sh: issue 21 on the H200 in one call (< 9 minutes), from the binaries of scripts/device_pack.sh
# (builds nothing). $OUT/gpu_14b.log, $OUT/gpu_14b.csv, $OUT/plan-14b.txt, $OUT/{14b,13b}/generate.{csv,json}.
#   0. the memory plans of the full Wan2.1-14B at 720p x 81 (fp32/int32, bf16 + bitmap), no weights
#   1. the Wan2.1-14B architecture (dim 5120, 40 heads of 128, random weights) at 720p x 81 frames
#      (latent 21x90x160, 75600 tokens) with L14 blocks (default 16: the caches of all 40 blocks in
#      fp32/int32 do not fit one H200, 259 GB, and bf16/bitmap storage is not on the GPU yet), CFG 5:
#      STEPS14 (4) steps dense, then mc-sparse at rho 0.15 (warm-up 2, anchor 1, layer 0 dense):
#      peak memory (nvidia-smi), seconds per step, and the 40-block 50-step projection (9 dense +
#      1 anchor + 40 reuse steps, each step's time x 40 / L14)
#   2. the storage switches' fidelity at Wan2.1-1.3B 720p x 81: 10 steps (warm-up 2), dense and
#      $STORE13 (default: those the GPU runs today) at rho 0.15: PSNR against dense and against mc-sparse
#   (device) OUT=dir bash scripts/gpu_14b.sh      DSGAP=.carry/bin/dsgap PY=python3
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
DSGAP=${DSGAP:-$PWD/.carry/bin/dsgap}
PY=${PY:-python3}
W=${GPU14_WORK:-/tmp/gpu_14b}
L14=${L14:-16}
STEPS14=${STEPS14:-4}
STORE13=${STORE13:-mc-sparse,mc-sparse/cfg_meta=shared}
mkdir -p "$OUT" "$W"
L=$OUT/gpu_14b.log
CSV=$OUT/gpu_14b.csv
log() { echo "$*" | tee -a "$L"; }
fail=0
step() { # name timeout command...
  local name=$1 to=$2; shift 2
  local t0=$SECONDS
  timeout "$to" "$@" >> "$L" 2>&1
  local rc=$?
  log "gpu_14b $name: rc=$rc ($((SECONDS - t0)) s)"
  [ $rc = 0 ] || fail=1
  return $rc
}
mem_poll() { while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; sleep 0.2; done > "$1" 2>/dev/null; }

# --- 0. plans ---------------------------------------------------------------------------------
"$DSGAP" generate --plan-only --arch wan2.1-14b --latent 21x90x160 --density 0.15,0.25 \
  --policies mc-sparse,mc-sparse/keys=bitmap/residual_dtype=bf16,mc-sparse/keys=bitmap/residual_dtype=fp8 \
  --schedule warmup=10,dense_layers=0 > "$OUT/plan-14b.txt" 2>&1
log "plan: $(grep -c 'memory plan' "$OUT/plan-14b.txt") plans in plan-14b.txt; $(grep 'would fit' "$OUT/plan-14b.txt" | head -1)"

# --- 1. 14B architecture, L14 blocks --------------------------------------------------------------
B=$W/w14b
step make_14b 200 $PY scripts/gpu_dit.py make 14b "$B" --seed 3 --layers "$L14"
base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
mem_poll "$W/mem14.txt" &
POLL=$!
step generate_14b 330 "$DSGAP" generate --model "$B/model" --text "$B/text.safetensors" --noise "$B/noise.safetensors" \
  --steps "$STEPS14" --guidance 5 --shift 5 --device gpu --policies dense,mc-sparse --density 0.15 \
  --schedule warmup=2,anchors=1,dense_layers=0 --out "$W/g14"
kill "$POLL" 2>/dev/null; wait "$POLL" 2>/dev/null
mkdir -p "$OUT/14b" && cp "$W/g14/generate.csv" "$W/g14/generate.json" "$OUT/14b/" 2>/dev/null
peak=$(sort -n "$W/mem14.txt" | tail -1)
rm -rf "$B"

# --- 2. 1.3B 720p: the storage switches -----------------------------------------------------------
C=$W/w13b
step make_13b 120 $PY scripts/gpu_dit.py make 1.3b "$C" --seed 2 --latent 21x90x160
step generate_13b 240 "$DSGAP" generate --model "$C/model" --text "$C/text.safetensors" --noise "$C/noise.safetensors" \
  --steps 10 --guidance 5 --shift 5 --device gpu --policies "dense,$STORE13" --density 0.15 \
  --schedule warmup=2,dense_layers=0 --out "$W/g13" --quiet
mkdir -p "$OUT/13b" && cp "$W/g13/generate.csv" "$W/g13/generate.json" "$OUT/13b/" 2>/dev/null

$PY - "$W" "$L14" "$STEPS14" "${peak:-0}" "${base:-0}" > "$CSV" 2>> "$L" <<'PY'
import glob, json, os, sys
w, L, S, peak, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
print("name,value,unit")
g = json.load(open(os.path.join(w, "g14", "generate.json")))
runs = {r["policy"]: r for r in g["runs"]}
d, s = runs["dense"], runs.get("mc-sparse")
dense_step = d["transformer_s"] / S
print("14b_blocks,%d,blocks (of 40)" % L)
print("14b_peak_mem_gib,%.2f,GiB (nvidia-smi, dense + mc-sparse run)" % ((peak - base) / 1024))
print("14b_dense_step_s,%.3f,s (measured; %d blocks)" % (dense_step, L))
if s:
    # mc-sparse: steps 0 (dense), 1 (anchor: dense + metadata + residuals), 2.. (reuse)
    anchor = dense_step + s["metadata_s"]
    reuse = (s["transformer_s"] - dense_step - anchor) / (S - 2)
    print("14b_anchor_step_s,%.3f,s (estimate: a dense step + metadata)" % anchor)
    print("14b_reuse_step_s,%.3f,s (measured: the rest over %d steps)" % (reuse, S - 2))
    k = 40.0 / L
    dense50, sparse50 = 50 * dense_step * k, (9 * dense_step + anchor + 40 * reuse) * k
    print("14b_dense_50_projected_s,%.1f,s (projection: 40 blocks)" % dense50)
    print("14b_mc_sparse_50_projected_s,%.1f,s (projection: 9 dense + anchor + 40 reuse)" % sparse50)
    print("14b_speedup_projected,%.3f,ratio" % (dense50 / sparse50))
for r in json.load(open(os.path.join(w, "g13", "generate.json")))["runs"]:
    print("13b720_%s_transformer_s,%.2f,s (10 steps)" % (r["policy"].replace("/", "_"), r["transformer_s"]))
import csv
ref = None
for r in csv.DictReader(open(os.path.join(w, "g13", "generate.csv"))):
    if r["policy"] != "dense":
        print("13b720_%s_psnr,%s,dB vs dense" % (r["policy"].replace("/", "_"), r["psnr"]))
PY
log "--- $CSV"; cat "$CSV" | tee -a "$L"
exit $fail

#!/usr/bin/env bash
# gpu_dit.sh: the DiT engine on the GPU machine (issue 4), the steps gpu_dit (check) and dit (prepare,
# bench) of scripts/device_all.sh, from the binaries of scripts/device_pack.sh;
# $OUT/gpu_dit_{check,prepare,bench,all}.log, $OUT/gpu_dit.csv, $OUT/generate.{csv,json}; about 3 minutes.
#   1. small config, random weights: dsgap's GPU and CPU forwards (tests/wan_dump: every block, the
#      Q/K/V, the velocity) and a 4-step CFG Euler run against the independent PyTorch forward
#      tests/torch_ref/wan_torch.py (fp32 reference, the original's bf16 precision as the naive one)
#   2. the Wan2.1-1.3B architecture, random weights, 480p x 81 frames (latent 21x60x104, 32760 tokens):
#      PyTorch's bf16 forward (SDPA) against dsgap's, dsgap's peak GPU memory (nvidia-smi), and one
#      `dsgap generate`: 50 UniPC steps with CFG dense, then mc-sparse at rho 0.15 (warm-up 10, anchor
#      step 9, layer 0 dense) -> speedup and where the time goes (generate.json).
#   0. tests/gpu_dit (the op table against the CPU one, a forward, sampler steps dense and mc-sparse)
#   (device) OUT=dir DSGAP=.carry/bin/dsgap bash scripts/gpu_dit.sh [check|prepare|bench|all]
#   check = 0 and 1; prepare = the 1.3B model of 2 (no timing: may overlap other work); bench = 2
#   (alone on the GPU); all (default) = all three in order. DIT_STEPS=50 (default); DIT_LATENT=FxHxW
#   another latent for 2 (720p x 81: 21x90x160, 75600 tokens, issue 21; with DIT_GEN_TIMEOUT=480)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
DSGAP=${DSGAP:-$PWD/.carry/bin/dsgap}
DUMP=${DUMP:-$(dirname "$DSGAP")/wan_dump}
PY=${PY:-python3}
W=${DIT_WORK:-/tmp/gpu_dit}
STEPS=${DIT_STEPS:-50}
MODE=${1:-all}
mkdir -p "$OUT" "$W"
L=$OUT/gpu_dit_${MODE}.log   # every step's output (stdout: the summary lines)
CSV=$OUT/gpu_dit.csv
log() { echo "$*" | tee -a "$L"; }
fail=0
step() { # name timeout command...
  local name=$1 to=$2; shift 2
  local t0=$SECONDS
  timeout "$to" "$@" >> "$L" 2>&1
  local rc=$?
  log "gpu_dit $name: rc=$rc ($((SECONDS - t0)) s)"
  [ $rc = 0 ] || fail=1
  return $rc
}

if [ "$MODE" = check ] || [ "$MODE" = all ]; then
# --- 0. the GPU op table against the CPU one (tests/dit/gpu_dit.c), on the test models of ctest wan_models
step wan_models 60 $PY -B tests/wan_ref.py derive tests/fixtures/wan "$W/wan_models"
step gpu_dit_test 120 "$(dirname "$DSGAP")/gpu_dit" "$W/wan_models" tests/fixtures/wan
grep -E "passed, .* failed" "$L" | tail -1

# --- 1. small config against PyTorch ----------------------------------------------------------------
S=$W/small
step make_small 60 $PY scripts/gpu_dit.py make small "$S" --seed 1
step dump_gpu 60 "$DUMP" "$S/model" "$S/text.safetensors" "$S/noise.safetensors" 750 "$W/dump_gpu.safetensors" gpu
step dump_cpu 60 "$DUMP" "$S/model" "$S/text.safetensors" "$S/noise.safetensors" 750 "$W/dump_cpu.safetensors" cpu
step dump_gpu_neg 60 "$DUMP" "$S/model" "$S/neg.safetensors" "$S/noise.safetensors" 750 "$W/dump_gpu_neg.safetensors" gpu
for dev in gpu cpu; do
  step "euler_$dev" 60 "$DSGAP" generate --model "$S/model" --text "$S/text.safetensors" --noise "$S/noise.safetensors" \
    --steps 4 --guidance 5 --shift 5 --sampler euler --policies dense --device $dev --quiet --out "$W/euler_$dev"
done
step compare 120 $PY scripts/gpu_dit.py compare "$S" "$W/dump_gpu.safetensors" "$W/dump_cpu.safetensors" \
  "$(ls "$W"/euler_gpu/*.h5 | head -1)" "$(ls "$W"/euler_cpu/*.h5 | head -1)" --steps 4 --guidance 5 --shift 5 \
  --dump-neg-gpu "$W/dump_gpu_neg.safetensors"
grep -E "^info|final latents|checks failed" "$L" | tail -9
# the same 4 Euler steps without guidance: how much of the latents' error is CFG's amplification
for dev in gpu cpu; do
  step "euler_g1_$dev" 60 "$DSGAP" generate --model "$S/model" --text "$S/text.safetensors" --noise "$S/noise.safetensors" \
    --steps 4 --guidance 1 --shift 5 --sampler euler --policies dense --device $dev --quiet --out "$W/euler_g1_$dev"
done
step compare_g1 120 $PY scripts/gpu_dit.py compare "$S" "$W/dump_gpu.safetensors" "$W/dump_cpu.safetensors" \
  "$(ls "$W"/euler_g1_gpu/*.h5 | head -1)" "$(ls "$W"/euler_g1_cpu/*.h5 | head -1)" --steps 4 --guidance 1 --shift 5
grep -E "final latents" "$L" | tail -2
# mc-sparse in the loop on both devices (each against its own dense run): the fidelity it loses on
# the GPU should be the fidelity it loses on the CPU
for dev in gpu cpu; do
  step "sparse_$dev" 60 "$DSGAP" generate --model "$S/model" --text "$S/text.safetensors" --noise "$S/noise.safetensors" \
    --steps 4 --guidance 5 --shift 5 --policies dense,mc-sparse --density 0.3 --schedule warmup=1 --device $dev \
    --quiet --out "$W/sparse_$dev"
  log "--- mc-sparse vs dense on the $dev:"
  cat "$W/sparse_$dev/generate.csv" | tee -a "$L"
done

fi

# --- 2. Wan2.1-1.3B architecture at 480p x 81 frames ----------------------------------------------
B=$W/w13b${DIT_LATENT:+-$DIT_LATENT}
if [ "$MODE" = prepare ] || [ "$MODE" = all ]; then
  [ -f "$B/model/config.json" ] || step make_1.3b 150 $PY scripts/gpu_dit.py make 1.3b "$B" --seed 2 \
    ${DIT_LATENT:+--latent "$DIT_LATENT"}
fi
[ "$MODE" = bench ] || [ "$MODE" = all ] || exit $fail
echo "name,value,unit" > "$CSV"
step torch_forward 90 $PY scripts/gpu_dit.py bench "$B" --reps 2
TORCH_JSON=$(grep '"pytorch_forward_s"' "$L" | tail -1)
mem_poll() { # the GPU's used memory every 0.2 s into $1, until killed
  while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; sleep 0.2; done > "$1" 2>/dev/null
}
base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
# the dense forward's peak alone: 2 dense CFG steps (4 forwards)
mem_poll "$W/mem_dense.txt" &
POLL=$!
step generate_dense 120 "$DSGAP" generate --model "$B/model" --text "$B/text.safetensors" --noise "$B/noise.safetensors" \
  --steps 2 --guidance 5 --shift 5 --device gpu --policies dense --out "$W/gen_dense" --quiet
kill "$POLL" 2>/dev/null
wait "$POLL" 2>/dev/null
mem_poll "$W/mem.txt" &
POLL=$!
step generate ${DIT_GEN_TIMEOUT:-330} "$DSGAP" generate --model "$B/model" --text "$B/text.safetensors" --noise "$B/noise.safetensors" \
  --steps "$STEPS" --guidance 5 --shift 5 --device gpu --policies dense,mc-sparse --density 0.15 \
  --schedule warmup=10,anchors=9,dense_layers=0 --out "$W/gen"
kill "$POLL" 2>/dev/null
wait "$POLL" 2>/dev/null
cp "$W/gen/generate.csv" "$W/gen/generate.json" "$OUT/" 2>/dev/null
peak=$(sort -n "$W/mem.txt" | tail -1)
peak_dense=$(sort -n "$W/mem_dense.txt" | tail -1)
$PY - "$W/gen/generate.json" "$TORCH_JSON" "${peak:-0}" "${base:-0}" "${peak_dense:-0}" >> "$CSV" 2>> "$L" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))
t = json.loads(sys.argv[2]) if sys.argv[2] else {}
peak, base, peak_dense = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
runs = {r["policy"]: r for r in g["runs"]}
d, s = runs["dense"], runs.get("mc-sparse")
fwd = d["transformer_s"] / (2 * g["steps"])  # CFG: two forwards a step
rows = [("dsgap_forward_s", fwd, "s"), ("pytorch_forward_s", t.get("pytorch_forward_s", float("nan")), "s"),
        ("forward_over_pytorch", fwd / t.get("pytorch_forward_s", float("nan")), "ratio"),
        ("peak_mem_dense_gb", (peak_dense - base) / 1024, "GiB (nvidia-smi, dense CFG run, incl. CUDA context)"),
        ("peak_mem_mc_sparse_run_gb", (peak - base) / 1024, "GiB (nvidia-smi, dense + mc-sparse run: residuals of 30 layers x 12 heads x 2 CFG branches)"),
        ("pytorch_peak_alloc_gb", t.get("peak_alloc_gb", float("nan")), "GB")]
if s:
    rows.append(("e2e_speedup_mc_sparse", d["transformer_s"] / s["transformer_s"], "ratio"))
for name, r in (("dense", d), ("mc_sparse", s)):
    if not r:
        continue
    # gemm, elementwise (layernorm, heads = to/from_heads, residual = add_gated, convert = to bf16),
    # table_attention: device time of the op table (table attention = the dense
    # self-attention sites and every cross-attention); attention: wall time inside the self-attention
    # entry point (dense sites and the sparse sites' backend work), of which metadata
    for k in ("transformer_s", "gemm_s", "elementwise_s", "layernorm_s", "heads_s", "residual_s", "convert_s",
              "table_attention_s", "attention_s", "metadata_s"):
        rows.append(("%s_%s" % (name, k), r.get(k, float("nan")), "s"))
for n, v, u in rows:
    print("%s,%.6g,%s" % (n, v, u))
EOF
log "--- $CSV"
cat "$CSV" | tee -a "$L"
exit $fail

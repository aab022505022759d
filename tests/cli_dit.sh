#!/bin/bash
# cli_dit.sh: dsgap capture and dsgap generate end to end on the tiny Wan fixtures (CPU), read back
# with h5py against the fp64 reference (tests/wan_ref.py), the trace fed to info and replay; and the
# bad inputs: broken checkpoints, wrong input shapes, a capture that cannot fit the disk, each a
# one-line error, a non-zero exit and no output file.
#   DSGAP=build/dsgap DSGAP_SOURCE=. bash tests/cli_dit.sh   (after `ctest -R wan_models`)
set -u
export PYTHONDONTWRITEBYTECODE=1
DSGAP=${DSGAP:-build/dsgap}
SRC=${DSGAP_SOURCE:-.}
FIX=$SRC/tests/fixtures/wan
MODELS=${WAN_MODELS:-$PWD/wan_models}
PY=/usr/bin/python3
T=$(mktemp -d /tmp/dsgap_cli_dit.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

[ -d "$MODELS/orig_hd64" ] || { echo "no test models in $MODELS (run: ctest -R wan_models)"; exit 1; }

# --- capture: UniPC + CFG, every step/layer/head; compare with the reference -----------------------
"$DSGAP" capture --model "$MODELS/orig_hd64" --text "$FIX/text.safetensors" --negative "$FIX/negative.safetensors" \
  --noise "$FIX/noise.safetensors" --steps 4 --shift 3 --guidance 4 --out "$T/trace.h5" 2>"$T/err"
check "capture runs (exit 0)" '[ $? -eq 0 ] && [ -f "$T/trace.h5" ]'
check "capture shows a progress bar with ETA on stderr" 'grep -q "ETA" "$T/err" && grep -q "step 4/4" "$T/err"'
$PY - "$T/trace.h5" "$FIX/ref_hd64.safetensors" <<'EOF' > "$T/py.out" 2>&1
import sys, json
import numpy as np, h5py
sys.path.insert(0, __import__("os").environ.get("DSGAP_SOURCE", ".") + "/tests")
import wan_ref
f = h5py.File(sys.argv[1], "r")
ref = wan_ref.read_safetensors(sys.argv[2])
assert f.attrs["format"] == "dsgap-trace", f.attrs["format"]
assert f["q"].shape == (4, 2, 2, 48, 64), f["q"].shape
assert list(f["step_index"][:]) == [0, 1, 2, 3] and list(f["grid"][:]) == [2, 4, 6]
assert int(f["text_tokens"][()]) == 0 and f["timestep"][0] == 999
cfg = json.loads(f.attrs["config"])
assert cfg["run"]["guidance"] == 4 and cfg["model"]["num_heads"] == 2 and cfg["run"]["captured_pass"] == "cond"
worst = 0
for nm in "qkv":  # step 0 (t = 999) of the cond pass is the reference forward
    got = f[nm][0, 1].astype(np.float32).astype(np.float64)
    want = ref[nm + ".1"]
    worst = max(worst, np.abs(got - want).max() / np.abs(want).max())
print("qkv_bf16_rel %.3e" % worst)
assert worst < 2 ** -8, worst  # bf16 storage: half an ulp of 8 bits
lat = f["latents"][:]
e = np.abs(lat - ref["unipc_cfg"]).max() / np.abs(ref["unipc_cfg"]).max()
print("latents_rel %.3e" % e)
assert lat.shape == (4, 2, 8, 12) and e < 2e-5, e
print("PYOK")
EOF
check "trace read with h5py: layout, metadata, Q/K/V of step 0 = reference within bf16, /latents = reference UniPC+CFG run ($(grep -o 'qkv_bf16_rel.*' "$T/py.out"); $(grep -o 'latents_rel.*' "$T/py.out"))" 'grep -q PYOK "$T/py.out"' || cat "$T/py.out"
"$DSGAP" info "$T/trace.h5" > "$T/info.out" 2>&1
check "dsgap info reads the captured trace" '[ $? -eq 0 ] && grep -q "48" "$T/info.out"'
"$DSGAP" replay "$T/trace.h5" --out "$T/replay" --policies dense,oracle,mc-sparse --density 0.5 --quiet > /dev/null 2>&1
check "dsgap replay runs on the captured trace" '[ $? -eq 0 ] && [ $(wc -l < "$T/replay/metrics.csv") -eq $((1 + 3 * 4 * 2 * 2)) ]'

# --- capture a selection, inputs from HDF5 --------------------------------------------------------
"$DSGAP" capture --model "$MODELS/diff_hd128" --text "$MODELS/text.h5" --noise "$MODELS/noise.h5" --steps 5 \
  --guidance 1 --sampler euler --capture-steps 4,0,0 --layers 1 --heads 0 --quiet --out "$T/sel.h5"
check "capture of steps 0,4 / layer 1 / head 0 from HDF5 inputs (diffusers layout)" '[ $? -eq 0 ]'
$PY -c "
import h5py, sys
f = h5py.File('$T/sel.h5', 'r')
assert f['q'].shape == (2, 1, 1, 48, 128), f['q'].shape
assert list(f['step_index'][:]) == [0, 4] and list(f['layer_index'][:]) == [1] and list(f['head_index'][:]) == [0]
assert f['latents'].shape == (4, 2, 8, 12)
print('PYOK')" > "$T/py2.out" 2>&1
check "selected trace has shape (2, 1, 1, 48, 128) and its indices" 'grep -q PYOK "$T/py2.out"' || cat "$T/py2.out"

# --- FILE:NAME picks one prompt of a file that holds several ---------------------------------------
"$DSGAP" capture --model "$MODELS/orig_hd64" --text "$MODELS/conds.safetensors:text" --negative "$MODELS/text.h5:embeddings" \
  --noise "$FIX/noise.safetensors" --steps 2 --guidance 3 --layers 0 --heads 1 --quiet --out "$T/named.h5"
"$DSGAP" capture --model "$MODELS/orig_hd64" --text "$FIX/text.safetensors" --negative "$FIX/text.safetensors" \
  --noise "$FIX/noise.safetensors" --steps 2 --guidance 3 --layers 0 --heads 1 --quiet --out "$T/plain.h5"
$PY -c "
import h5py, numpy as np
a, b = h5py.File('$T/named.h5', 'r'), h5py.File('$T/plain.h5', 'r')
assert np.array_equal(a['latents'][:], b['latents'][:]) and np.array_equal(a['q'][:], b['q'][:])
print('PYOK')" > "$T/py4.out" 2>&1
check "--text FILE:NAME (safetensors tensor, HDF5 dataset) gives the same run as single-tensor files" 'grep -q PYOK "$T/py4.out"' || cat "$T/py4.out"

# --- generate: dense and policies from one seed ---------------------------------------------------
"$DSGAP" generate --model "$MODELS/orig_hd64" --text "$FIX/text.safetensors" --latent 4x16x24 --seed 3 \
  --steps 3 --shift 3 --guidance 2 --policies dense,mc-sparse,oracle --density 0.3,1 --schedule warmup=1 \
  --out "$T/gen" 2>"$T/gerr"
check "generate runs (exit 0)" '[ $? -eq 0 ]' || cat "$T/gerr"
check "generate.csv has the header and 5 runs" \
  '[ "$(head -1 "$T/gen/generate.csv")" = "policy,density_target,density,psnr,ssim,psnr_min,ssim_min,transformer_s,total_s,speedup" ] && [ $(wc -l < "$T/gen/generate.csv") -eq 6 ]'
check "generate wrote latents per run and generate.json" \
  '[ -f "$T/gen/dense.h5" ] && [ -f "$T/gen/mc-sparse@0.3.h5" ] && [ -f "$T/gen/oracle@1.h5" ] && [ -f "$T/gen/generate.json" ]'
$PY - "$T/gen" <<'EOF' > "$T/py3.out" 2>&1
import csv, sys, math, h5py, numpy as np
rows = {(r["policy"], r["density_target"]): r for r in csv.DictReader(open(sys.argv[1] + "/generate.csv"))}
d = rows[("dense", "1")]
assert math.isinf(float(d["psnr"])) and float(d["ssim"]) == 1 and float(d["density"]) == 1 and float(d["speedup"]) == 1
for p in ("mc-sparse", "oracle"):
    full, sp = rows[(p, "1")], rows[(p, "0.3")]
    assert float(full["psnr"]) > 90 and float(full["ssim"]) > 0.99999, full     # density 1 = dense
    assert float(sp["density"]) < 0.9 and 0 < float(sp["psnr"]) < 90 and float(sp["ssim"]) < 1, sp
    print(p, "psnr@0.3 %.1f ssim %.4f density %.3f" % (float(sp["psnr"]), float(sp["ssim"]), float(sp["density"])))
a = h5py.File(sys.argv[1] + "/dense.h5", "r")["latents"]
assert a.shape == (4, 4, 16, 24) and np.isfinite(a[:]).all()
print("PYOK")
EOF
check "generate.csv: dense is the reference, density 1 reproduces it, density 0.3 is sparse ($(grep -o 'mc-sparse psnr.*' "$T/py3.out"))" \
  'grep -q PYOK "$T/py3.out"' || cat "$T/py3.out"

# --cache-offload: on the CPU a no-op (its caches are host memory): the same latents, said in generate.json
"$DSGAP" generate --model "$MODELS/orig_hd64" --text "$FIX/text.safetensors" --latent 4x16x24 --seed 3 \
  --steps 3 --shift 3 --guidance 2 --policies dense,mc-sparse --density 0.3 --schedule warmup=1 \
  --cache-offload --out "$T/genoff" 2>"$T/gofferr"
$PY - "$T/gen" "$T/genoff" <<'EOF' > "$T/py5.out" 2>&1
import json, sys, h5py, numpy as np
for f in ("dense.h5", "mc-sparse@0.3.h5"):
    a, b = (h5py.File(d + "/" + f, "r")["latents"][:] for d in sys.argv[1:3])
    assert np.array_equal(a, b), f
assert json.load(open(sys.argv[2] + "/generate.json"))["cache_offload"] is True
print("PYOK")
EOF
check "generate --cache-offload on the CPU: the same latents; generate.json says so" 'grep -q PYOK "$T/py5.out"' || \
  cat "$T/py5.out" "$T/gofferr"

# --- bad input: one line, non-zero exit, no output ------------------------------------------------
B=$MODELS/bad
expect_fail() { # description, expected text, dsgap arguments...
  local what=$1 want=$2; shift 2
  rm -f "$T/bad.h5" "$T"/bad.h5.tmp.*
  "$DSGAP" "$@" > "$T/out" 2> "$T/err"
  local rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -qF -- "$want" "$T/err" && \
     ! ls "$T"/bad.h5* > /dev/null 2>&1; then
    ok "$what: $(cat "$T/err")"
  else
    bad "$what (exit $rc, wanted one line with '$want'): $(head -3 "$T/err")"
  fi
}
cap() { echo capture --model "$1" --text "$FIX/text.safetensors" --noise "$FIX/noise.safetensors" --steps 2 --quiet --out "$T/bad.h5"; }
expect_fail "missing tensor" "missing tensor 'blocks.1.ffn.2.bias'" $(cap "$B/missing.safetensors")
expect_fail "extra tensor" "unexpected tensor 'blocks.0.extra.weight'" $(cap "$B/extra.safetensors")
expect_fail "image-to-video tensor" "image-to-video" $(cap "$B/i2v.safetensors")
expect_fail "wrong shape" "tensor 'blocks.0.self_attn.q.weight' has shape [128, 64], expected [128, 128]" $(cap "$B/shape.safetensors")
expect_fail "mixed layouts" "mixes original Wan names" $(cap "$B/mixed.safetensors")
expect_fail "NaN weight" "tensor 'blocks.1.cross_attn.k.weight' holds a non-finite value" $(cap "$B/nan.safetensors")
expect_fail "dtype dsgap does not read" "tensor 'a' has dtype I64" $(cap "$B/h_dtype.safetensors")
expect_fail "unknown dtype" "unknown dtype 'Q4'" $(cap "$B/h_unknown_dtype.safetensors")
expect_fail "malformed header" "malformed JSON header near byte" $(cap "$B/h_json.safetensors")
expect_fail "size mismatch" "is 8 bytes but data_offsets [0, 4] span 4" $(cap "$B/h_size.safetensors")
expect_fail "truncated file" "truncated" $(cap "$B/truncated.safetensors")
expect_fail "header length" "over the 100000000-byte limit" $(cap "$B/h_length.safetensors")
expect_fail "not a Wan checkpoint" "not a Wan2.1 transformer checkpoint" $(cap "$B/ok_small.safetensors")
expect_fail "no model" "cannot open model" $(cap "$T/nonexistent")
M=$MODELS/orig_hd64
expect_fail "text of the wrong width" "expected [tokens, 32]" capture --model "$M" --text "$FIX/noise.safetensors" --seed 1 --latent 2x8x12 --out "$T/bad.h5"
expect_fail "noise of the wrong shape" "expected [4, F, H, W]" capture --model "$M" --text "$FIX/text.safetensors" --noise "$FIX/text.safetensors" --out "$T/bad.h5"
expect_fail "noise disagreeing with --latent" "expected [4, 2, 8, 8]" capture --model "$M" --text "$FIX/text.safetensors" --noise "$FIX/noise.safetensors" --latent 2x8x8 --out "$T/bad.h5"
expect_fail "latent not a multiple of the patch" "not a multiple of the patch" capture --model "$M" --text "$FIX/text.safetensors" --latent 2x7x12 --out "$T/bad.h5"
expect_fail "no latent size" "--latent FxHxW is required" capture --model "$M" --text "$FIX/text.safetensors" --out "$T/bad.h5"
expect_fail "layer out of range" "--layers entry 2 is outside 0..1" capture --model "$M" --text "$FIX/text.safetensors" --noise "$FIX/noise.safetensors" --layers 2 --out "$T/bad.h5"
expect_fail "capture too large for the disk" "GiB free: capture fewer" capture --model "$M" --text "$FIX/text.safetensors" --latent 1x2048x2048 --steps 10000 --out "$T/bad.h5"
if ! nvidia-smi -L > /dev/null 2>&1; then # no device here (or a build without CUDA): one line, nothing written
  expect_fail "--device gpu without a device" "--device gpu is not available" capture --model "$M" --text "$FIX/text.safetensors" --noise "$FIX/noise.safetensors" --device gpu --out "$T/bad.h5"
fi
expect_fail "several tensors, none named" "the file holds 2 (name one: FILE:NAME)" capture --model "$M" --text "$MODELS/conds.safetensors" --noise "$FIX/noise.safetensors" --out "$T/bad.h5"
expect_fail "no such named tensor" "no tensor 'zz'" capture --model "$M" --text "$MODELS/conds.safetensors:zz" --noise "$FIX/noise.safetensors" --out "$T/bad.h5"
expect_fail "unknown policy" "unknown policy" generate --model "$M" --text "$FIX/text.safetensors" --noise "$FIX/noise.safetensors" --policies dense,nope --out "$T/gen2"
expect_fail "bad config.json" "qk_norm" capture --model "$MODELS/badcfg" --text "$FIX/text.safetensors" --noise "$FIX/noise.safetensors" --out "$T/bad.h5"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]

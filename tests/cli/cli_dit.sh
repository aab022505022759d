#!/bin/bash
# cli_dit.sh: dsgap capture and dsgap generate end to end on the tiny Wan fixtures (CPU), read back
# with h5py against the fp64 reference (tests/wan_ref.py), the trace fed to info and replay; and the
# bad inputs: broken checkpoints, wrong input shapes, a capture that cannot fit the disk, each a
# one-line error, a non-zero exit and no output file.
#   DSGAP=build/dsgap DSGAP_SOURCE=. bash tests/cli/cli_dit.sh   (after `ctest -R wan_models`)
. "$(dirname "$0")/../lib.sh" dit
export PYTHONDONTWRITEBYTECODE=1
SRC=${DSGAP_SOURCE:-.}
FIX=$SRC/tests/fixtures/wan
MODELS=${WAN_MODELS:-$PWD/wan_models}
PY=/usr/bin/python3

[ -d "$MODELS/orig_hd64" ] || { echo "no test models in $MODELS (run: ctest -R wan_models)"; exit 1; }

# --- capture: UniPC + CFG, every step/layer/head; compare with the reference -----------------------
"$DSGAP" capture --model "$MODELS/orig_hd64" --text "$FIX/text.safetensors" --negative "$FIX/negative.safetensors" \
  --noise "$FIX/noise.safetensors" --steps 4 --shift 3 --guidance 4 --out "$tmp/trace.h5" 2>"$tmp/err"
check "capture runs (exit 0)" eval '[ $? -eq 0 ] && [ -f "$tmp/trace.h5" ]'
check "capture shows a progress bar with ETA on stderr" eval 'grep -q "ETA" "$tmp/err" && grep -q "step 4/4" "$tmp/err"'
$PY - "$tmp/trace.h5" "$FIX/ref_hd64.safetensors" <<'EOF' > "$tmp/py.out" 2>&1
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
check "trace read with h5py: layout, metadata, Q/K/V of step 0 = reference within bf16, /latents = reference UniPC+CFG run ($(grep -o 'qkv_bf16_rel.*' "$tmp/py.out"); $(grep -o 'latents_rel.*' "$tmp/py.out"))" eval 'grep -q PYOK "$tmp/py.out"' || cat "$tmp/py.out"
"$DSGAP" info "$tmp/trace.h5" > "$tmp/info.out" 2>&1
check "dsgap info reads the captured trace" eval '[ $? -eq 0 ] && grep -q "48" "$tmp/info.out"'
"$DSGAP" replay "$tmp/trace.h5" --out "$tmp/replay" --policies dense,oracle,mc-sparse --density 0.5 --quiet > /dev/null 2>&1
check "dsgap replay runs on the captured trace" eval '[ $? -eq 0 ] && [ $(wc -l < "$tmp/replay/metrics.csv") -eq $((1 + 3 * 4 * 2 * 2)) ]'

# --- capture a selection, inputs from HDF5 --------------------------------------------------------
"$DSGAP" capture --model "$MODELS/diff_hd128" --text "$MODELS/text.h5" --noise "$MODELS/noise.h5" --steps 5 \
  --guidance 1 --sampler euler --capture-steps 4,0,0 --layers 1 --heads 0 --quiet --out "$tmp/sel.h5"
check "capture of steps 0,4 / layer 1 / head 0 from HDF5 inputs (diffusers layout)" eval '[ $? -eq 0 ]'
$PY -c "
import h5py, sys
f = h5py.File('$tmp/sel.h5', 'r')
assert f['q'].shape == (2, 1, 1, 48, 128), f['q'].shape
assert list(f['step_index'][:]) == [0, 4] and list(f['layer_index'][:]) == [1] and list(f['head_index'][:]) == [0]
assert f['latents'].shape == (4, 2, 8, 12)
print('PYOK')" > "$tmp/py2.out" 2>&1
check "selected trace has shape (2, 1, 1, 48, 128) and its indices" eval 'grep -q PYOK "$tmp/py2.out"' || cat "$tmp/py2.out"

# --- FILE:NAME picks one prompt of a file that holds several ---------------------------------------
"$DSGAP" capture --model "$MODELS/orig_hd64" --text "$MODELS/conds.safetensors:text" --negative "$MODELS/text.h5:embeddings" \
  --noise "$FIX/noise.safetensors" --steps 2 --guidance 3 --layers 0 --heads 1 --quiet --out "$tmp/named.h5"
"$DSGAP" capture --model "$MODELS/orig_hd64" --text "$FIX/text.safetensors" --negative "$FIX/text.safetensors" \
  --noise "$FIX/noise.safetensors" --steps 2 --guidance 3 --layers 0 --heads 1 --quiet --out "$tmp/plain.h5"
$PY -c "
import h5py, numpy as np
a, b = h5py.File('$tmp/named.h5', 'r'), h5py.File('$tmp/plain.h5', 'r')
assert np.array_equal(a['latents'][:], b['latents'][:]) and np.array_equal(a['q'][:], b['q'][:])
print('PYOK')" > "$tmp/py4.out" 2>&1
check "--text FILE:NAME (safetensors tensor, HDF5 dataset) gives the same run as single-tensor files" eval 'grep -q PYOK "$tmp/py4.out"' || cat "$tmp/py4.out"

# --- generate: dense and policies from one seed ---------------------------------------------------
"$DSGAP" generate --model "$MODELS/orig_hd64" --text "$FIX/text.safetensors" --latent 4x16x24 --seed 3 \
  --steps 3 --shift 3 --guidance 2 --policies dense,mc-sparse,oracle --density 0.3,1 --schedule warmup=1 \
  --out "$tmp/gen" 2>"$tmp/gerr"
check "generate runs (exit 0)" eval '[ $? -eq 0 ]' || cat "$tmp/gerr"
check "generate.csv has the header and 5 runs" \
  eval '[ "$(head -1 "$tmp/gen/generate.csv")" = "policy,density_target,density,psnr,ssim,psnr_min,ssim_min,transformer_s,total_s,speedup" ] && [ $(wc -l < "$tmp/gen/generate.csv") -eq 6 ]'
check "generate wrote latents per run and generate.json" \
  eval '[ -f "$tmp/gen/dense.h5" ] && [ -f "$tmp/gen/mc-sparse@0.3.h5" ] && [ -f "$tmp/gen/oracle@1.h5" ] && [ -f "$tmp/gen/generate.json" ]'
$PY - "$tmp/gen" <<'EOF' > "$tmp/py3.out" 2>&1
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
check "generate.csv: dense is the reference, density 1 reproduces it, density 0.3 is sparse ($(grep -o 'mc-sparse psnr.*' "$tmp/py3.out"))" \
  eval 'grep -q PYOK "$tmp/py3.out"' || cat "$tmp/py3.out"

# --cache-offload: on the CPU a no-op (its caches are host memory): the same latents, said in generate.json
"$DSGAP" generate --model "$MODELS/orig_hd64" --text "$FIX/text.safetensors" --latent 4x16x24 --seed 3 \
  --steps 3 --shift 3 --guidance 2 --policies dense,mc-sparse --density 0.3 --schedule warmup=1 \
  --cache-offload --out "$tmp/genoff" 2>"$tmp/gofferr"
$PY - "$tmp/gen" "$tmp/genoff" <<'EOF' > "$tmp/py5.out" 2>&1
import json, sys, h5py, numpy as np
for f in ("dense.h5", "mc-sparse@0.3.h5"):
    a, b = (h5py.File(d + "/" + f, "r")["latents"][:] for d in sys.argv[1:3])
    assert np.array_equal(a, b), f
assert json.load(open(sys.argv[2] + "/generate.json"))["cache_offload"] is True
print("PYOK")
EOF
check "generate --cache-offload on the CPU: the same latents; generate.json says so" eval 'grep -q PYOK "$tmp/py5.out"' || \
  cat "$tmp/py5.out" "$tmp/gofferr"

# --- bad input: one line, non-zero exit, no output ------------------------------------------------
B=$MODELS/bad
cap() { echo capture --model "$1" --text "$FIX/text.safetensors" --noise "$FIX/noise.safetensors" --steps 2 --quiet --out "$tmp/bad.h5"; }
refused "missing tensor" "missing tensor 'blocks.1.ffn.2.bias'" "$tmp/bad.h5" "$DSGAP" $(cap "$B/missing.safetensors")
refused "extra tensor" "unexpected tensor 'blocks.0.extra.weight'" "$tmp/bad.h5" "$DSGAP" $(cap "$B/extra.safetensors")
refused "image-to-video tensor" "image-to-video" "$tmp/bad.h5" "$DSGAP" $(cap "$B/i2v.safetensors")
refused "wrong shape" "tensor 'blocks.0.self_attn.q.weight' has shape [128, 64], expected [128, 128]" "$tmp/bad.h5" "$DSGAP" $(cap "$B/shape.safetensors")
refused "mixed layouts" "mixes original Wan names" "$tmp/bad.h5" "$DSGAP" $(cap "$B/mixed.safetensors")
refused "NaN weight" "tensor 'blocks.1.cross_attn.k.weight' holds a non-finite value" "$tmp/bad.h5" "$DSGAP" $(cap "$B/nan.safetensors")
refused "dtype dsgap does not read" "tensor 'a' has dtype I64" "$tmp/bad.h5" "$DSGAP" $(cap "$B/h_dtype.safetensors")
refused "unknown dtype" "unknown dtype 'Q4'" "$tmp/bad.h5" "$DSGAP" $(cap "$B/h_unknown_dtype.safetensors")
refused "malformed header" "malformed JSON header near byte" "$tmp/bad.h5" "$DSGAP" $(cap "$B/h_json.safetensors")
refused "size mismatch" "is 8 bytes but data_offsets [0, 4] span 4" "$tmp/bad.h5" "$DSGAP" $(cap "$B/h_size.safetensors")
refused "truncated file" "truncated" "$tmp/bad.h5" "$DSGAP" $(cap "$B/truncated.safetensors")
refused "header length" "over the 100000000-byte limit" "$tmp/bad.h5" "$DSGAP" $(cap "$B/h_length.safetensors")
refused "not a Wan checkpoint" "not a Wan2.1 transformer checkpoint" "$tmp/bad.h5" "$DSGAP" $(cap "$B/ok_small.safetensors")
refused "no model" "cannot open model" "$tmp/bad.h5" "$DSGAP" $(cap "$tmp/nonexistent")
M=$MODELS/orig_hd64
refused "text of the wrong width" "expected [tokens, 32]" "$tmp/bad.h5" "$DSGAP" capture --model "$M" --text "$FIX/noise.safetensors" --seed 1 --latent 2x8x12 --out "$tmp/bad.h5"
refused "noise of the wrong shape" "expected [4, F, H, W]" "$tmp/bad.h5" "$DSGAP" capture --model "$M" --text "$FIX/text.safetensors" --noise "$FIX/text.safetensors" --out "$tmp/bad.h5"
refused "noise disagreeing with --latent" "expected [4, 2, 8, 8]" "$tmp/bad.h5" "$DSGAP" capture --model "$M" --text "$FIX/text.safetensors" --noise "$FIX/noise.safetensors" --latent 2x8x8 --out "$tmp/bad.h5"
# a config.json that is there but unreadable is an error, not a config inferred from the shapes
cp -r "$M" "$tmp/cfgdir" && rm -f "$tmp/cfgdir/config.json" && mkdir "$tmp/cfgdir/config.json"
refused "config.json a directory" "cfgdir/config.json: Is a directory" "$tmp/bad.h5" \
  "$DSGAP" capture --model "$tmp/cfgdir" --text "$FIX/text.safetensors" --seed 1 --latent 2x8x12 --out "$tmp/bad.h5"
cp -r "$M" "$tmp/cfglink" && rm -f "$tmp/cfglink/config.json" && ln -s nowhere.json "$tmp/cfglink/config.json"
refused "config.json a dangling link" "cfglink/config.json: No such file" "$tmp/bad.h5" \
  "$DSGAP" capture --model "$tmp/cfglink" --text "$FIX/text.safetensors" --seed 1 --latent 2x8x12 --out "$tmp/bad.h5"
/usr/bin/python3 - "$tmp/huge_noise.safetensors" <<'EOF'
import json, struct, sys
import numpy as np
x = np.clip(np.random.RandomState(1).randn(4, 2, 8, 12) * 3e38, -3.4e38, 3.4e38).astype(np.float32)  # finite
h = json.dumps({"noise": {"dtype": "F32", "shape": list(x.shape), "data_offsets": [0, x.nbytes]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + x.tobytes())
EOF
refused "noise of 3e38 (finite): the latents overflow, an error (NaN latents exited 0 once)" "latents are not finite after step 1" \
  "$tmp/huge_out" "$DSGAP" generate --model "$M" --text "$FIX/text.safetensors" --noise "$tmp/huge_noise.safetensors" --steps 2 \
  --guidance 1 --policies dense --quiet --out "$tmp/huge_out"
/usr/bin/python3 - "$tmp" <<'EOF'
import json, struct, sys
import numpy as np
def st(path, name, x):
    x = np.asarray(x, np.float32)
    h = json.dumps({name: {"dtype": "F32", "shape": list(x.shape), "data_offsets": [0, x.nbytes]}}).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + x.tobytes())
st(sys.argv[1] + "/noise_oddH.safetensors", "noise", np.random.RandomState(1).randn(4, 2, 7, 12))
st(sys.argv[1] + "/text_600.safetensors", "text", np.random.RandomState(2).randn(600, 32))
EOF
refused "noise whose latent is not a multiple of the patch: the error names the file" \
  "noise_oddH.safetensors: noise 'noise' has shape [4, 2, 7, 12]: its latent is not a multiple of the patch" "$tmp/huge_out" \
  "$DSGAP" generate --model "$M" --text "$FIX/text.safetensors" --noise "$tmp/noise_oddH.safetensors" --steps 1 --guidance 1 \
  --policies dense --quiet --out "$tmp/huge_out"
refused "text longer than text_len: the error names the file" "text_600.safetensors: text embeddings 'text' have 600 tokens" \
  "$tmp/huge_out" "$DSGAP" generate --model "$M" --text "$tmp/text_600.safetensors" --latent 1x4x4 --steps 1 --guidance 1 \
  --policies dense --quiet --out "$tmp/huge_out"
cp -r "$M" "$tmp/cfgdup" && sed -i '0,/{/s/{/{"text_len": 1, /' "$tmp/cfgdup/config.json"
refused "config.json with a key twice (cJSON took the first, Python's json the last)" "cfgdup/config.json: the key \"text_len\" twice" \
  "$tmp/bad.h5" "$DSGAP" capture --model "$tmp/cfgdup" --text "$FIX/text.safetensors" --seed 1 --latent 2x8x12 --out "$tmp/bad.h5"
mkfifo "$tmp/text.fifo"
refused "--text a FIFO (refused, never waited on)" "$tmp/text.fifo (text embeddings): not a regular file" "$tmp/bad.h5" \
  "$DSGAP" capture --model "$M" --text "$tmp/text.fifo" --seed 1 --latent 2x8x12 --out "$tmp/bad.h5"
refused "latent not a multiple of the patch" "not a multiple of the patch" "$tmp/bad.h5" "$DSGAP" capture --model "$M" --text "$FIX/text.safetensors" --latent 2x7x12 --out "$tmp/bad.h5"
refused "no latent size" "--latent FxHxW is required" "$tmp/bad.h5" "$DSGAP" capture --model "$M" --text "$FIX/text.safetensors" --out "$tmp/bad.h5"
refused "layer out of range" "--layers entry 2 is outside 0..1" "$tmp/bad.h5" "$DSGAP" capture --model "$M" --text "$FIX/text.safetensors" --noise "$FIX/noise.safetensors" --layers 2 --out "$tmp/bad.h5"
refused "capture too large for the disk" "GiB free: capture fewer" "$tmp/bad.h5" "$DSGAP" capture --model "$M" --text "$FIX/text.safetensors" --latent 1x2048x2048 --steps 10000 --out "$tmp/bad.h5"
if ! nvidia-smi -L > /dev/null 2>&1; then # no device here (or a build without CUDA): one line, nothing written
  refused "--device gpu without a device" "--device gpu is not available" "$tmp/bad.h5" "$DSGAP" capture --model "$M" --text "$FIX/text.safetensors" --noise "$FIX/noise.safetensors" --device gpu --out "$tmp/bad.h5"
fi
refused "several tensors, none named" "the file holds 2 (name one: FILE:NAME)" "$tmp/bad.h5" "$DSGAP" capture --model "$M" --text "$MODELS/conds.safetensors" --noise "$FIX/noise.safetensors" --out "$tmp/bad.h5"
refused "no such named tensor" "no tensor 'zz'" "$tmp/bad.h5" "$DSGAP" capture --model "$M" --text "$MODELS/conds.safetensors:zz" --noise "$FIX/noise.safetensors" --out "$tmp/bad.h5"
refused "unknown policy" "unknown policy" "$tmp/bad.h5" "$DSGAP" generate --model "$M" --text "$FIX/text.safetensors" --noise "$FIX/noise.safetensors" --policies dense,nope --out "$tmp/gen2"
sha=$(sha256sum < "$tmp/gen/dense.h5") # an earlier run's latents as the noise, --out that folder
refused "generate over its own --noise" "holds the input" - "$DSGAP" generate --model "$MODELS/orig_hd64" \
  --text "$FIX/text.safetensors" --noise "$tmp/gen/dense.h5" --steps 2 --out "$tmp/gen"
check "the noise input is kept" eval '[ "$(sha256sum < "$tmp/gen/dense.h5")" = "$sha" ]'
refused "bad config.json" "qk_norm" "$tmp/bad.h5" "$DSGAP" capture --model "$MODELS/badcfg" --text "$FIX/text.safetensors" --noise "$FIX/noise.safetensors" --out "$tmp/bad.h5"

finish

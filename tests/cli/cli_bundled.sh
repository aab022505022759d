#!/bin/bash
# cli_bundled.sh: the commands around the bundled model (data/model) on the CPU at a small size:
# dsgap attnstats against an independent fp64 NumPy computation of row entropy and per-query top-K
# mass from the captured trace (read with h5py), dsgap sheet's image against the latents it shows,
# the demo's bad inputs. One line per check; exit 1 on any failure.
#   DSGAP=build/dsgap DSGAP_SOURCE=. bash tests/cli/cli_bundled.sh
. "$(dirname "$0")/../lib.sh" bundled
export PYTHONDONTWRITEBYTECODE=1
SRC=${DSGAP_SOURCE:-.}
M=$SRC/data/model
PY=/usr/bin/python3

# --- capture a small trace of the bundled model (256 tokens, 2 steps, layers 0 and 7) -------------
# (shift and guidance from the model folder's protocol.json: 10 steps, shift 3, CFG 3; --steps wins)
"$DSGAP" capture --model "$M" --text "$M/conds.safetensors:zoom_in" --latent 4x16x16 --seed 3 --steps 2 \
  --layers 0,7 --out "$tmp/trace.h5" --quiet
check "capture of the bundled model (exit 0)" eval '[ $? -eq 0 ] && [ -f "$tmp/trace.h5" ]'
check "capture takes shift 3 and CFG 3 from data/model/protocol.json, --steps 2 from the command line" \
  $PY -c 'import h5py, json, sys; f = h5py.File(sys.argv[1], "r"); c = json.loads(f.attrs["config"]); r = c["run"]
assert (r["steps"], r["shift"], r["guidance"]) == (2, 3, 3), r' "$tmp/trace.h5"
"$DSGAP" info "$M" > "$tmp/info.txt"
check "dsgap info MODEL lists the class names: every entry of conds.safetensors's header, sorted" \
  $PY -c 'import json, struct, sys; b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
names = sorted(k for k in json.loads(b[8:8 + n]) if k != "__metadata__")
line = [l for l in open(sys.argv[2]) if l.startswith("classes")][0].split()[1:]
assert line == names, (line, names)' "$M/conds.safetensors" "$tmp/info.txt"
check "dsgap info MODEL shows the protocol (10 steps, shift 3, CFG 3)" \
  grep -q '^protocol  {"steps":10,"shift":3,"guidance":3}' "$tmp/info.txt"
mkdir "$tmp/badmodel"
for f in config.json diffusion_pytorch_model.safetensors conds.safetensors; do ln -s "$(cd "$M" && pwd)/$f" "$tmp/badmodel/$f"; done
echo '{"steps": 2.5}' > "$tmp/badmodel/protocol.json"
"$DSGAP" capture --model "$tmp/badmodel" --text "$M/conds.safetensors:zoom_in" --latent 4x16x16 --out "$tmp/bad.h5" \
  --quiet 2>"$tmp/err"
check "a bad protocol.json: one line naming it and the key, an error exit, no trace" \
  eval '[ $? -ne 0 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "protocol.json: bad \"steps\"" "$tmp/err" && [ ! -e "$tmp/bad.h5" ]'

# --- attnstats against fp64 NumPy ------------------------------------------------------------------
"$DSGAP" attnstats --density 0.3 --out "$tmp/as" --quiet bundled="$tmp/trace.h5" > /dev/null 2>"$tmp/err"
check "attnstats runs (exit 0), csv md png pdf written" \
  eval '[ $? -eq 0 ] && [ -s "$tmp/as/attnstats.csv" ] && [ -s "$tmp/as/attnstats.md" ] && [ -s "$tmp/as/attnstats-rho0.3.png" ] && [ -s "$tmp/as/attnstats-rho0.3.pdf" ]'
$PY - "$tmp/trace.h5" "$tmp/as/attnstats.csv" <<'PYEOF' > "$tmp/py.out" 2>&1
import csv, math, sys
import numpy as np, h5py
f = h5py.File(sys.argv[1], "r")
rows = list(csv.DictReader(open(sys.argv[2])))
q, k = f["q"], f["k"]
S, L, H, n, d = q.shape
assert len(rows) == S * L * H, len(rows)
K = min(n, 128 * math.ceil(0.3 * n / 128))
worst = 0.0
for r in rows:
    s = list(f["step_index"][:]).index(int(r["step"]))
    l = list(f["layer_index"][:]).index(int(r["layer"]))
    h = list(f["head_index"][:]).index(int(r["head"]))
    Q = q[s, l, h].astype(np.float64); Kk = k[s, l, h].astype(np.float64)
    z = Q @ Kk.T / math.sqrt(d)
    p = np.exp(z - z.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
    ent = float((-(p * np.log(np.where(p > 0, p, 1))).sum(1)).mean() / math.log(n))
    mass = float(np.sort(p, 1)[:, ::-1][:, :K].sum(1).mean())
    for name, ref in (("entropy_norm", ent), ("oracle_mass", mass)):
        worst = max(worst, abs(float(r[name]) - ref) / abs(ref))
print("worst relative difference %.2e over %d units (K = %d of %d)" % (worst, len(rows), K, n))
assert worst < 1e-4, worst
PYEOF
py=$? # before the description's $(tail ...) sets $?
check "attnstats entropy and oracle mass = fp64 NumPy within 1e-4 ($(tail -1 "$tmp/py.out"))" test $py -eq 0
# gnuplot stopped by a file size limit (it wrote a cut PNG and exited 0 once): nothing is published
png=$(stat -c %s "$tmp/as/attnstats-rho0.3.png")
big=$(stat -c %s "$tmp/as"/*.csv "$tmp/as"/*.md "$tmp/as"/*.dat "$tmp/as"/*.gp "$tmp/as"/*.pdf | sort -n | tail -1)
lim=$(( (big + png) / 2 / 1024 ))
(ulimit -f "$lim"; "$DSGAP" attnstats --density 0.3 --out "$tmp/asf" --quiet bundled="$tmp/trace.h5") >/dev/null 2>"$tmp/err"
check "attnstats: gnuplot stopped by a file size limit ($lim KiB, PNG $png B): exit 1, one line naming the signal, nothing written" \
  eval '[ $? -eq 1 ] && [ $big -lt $((lim * 1024)) ] && [ $(wc -l < "$tmp/err") -eq 1 ] && [ ! -e "$tmp/asf" ] &&
    grep -q "(SIGXFSZ, file size limit exceeded)" "$tmp/err"'
"$DSGAP" attnstats --out "$tmp/x" bundled="$tmp/nonexistent.h5" 2>"$tmp/err"
check "attnstats: missing trace is one line, exit 1, nothing written" \
  eval '[ $? -eq 1 ] && [ $(wc -l < "$tmp/err") -eq 1 ] && [ ! -e "$tmp/x" ]'
"$DSGAP" attnstats --density 1.5 --out "$tmp/x" a="$tmp/trace.h5" 2>"$tmp/err"
check "attnstats: density outside (0, 1] is exit 2" eval '[ $? -eq 2 ] && [ ! -e "$tmp/x" ]'

# --- sheet: the image is the latents it shows --------------------------------------------------------
"$DSGAP" sheet --out "$tmp/sheet/s" --frames 0,3 --scale 2 first="$tmp/trace.h5" again="$tmp/trace.h5" > /dev/null 2>"$tmp/err"
check "sheet runs (exit 0), png pdf rgb gp written" \
  eval '[ $? -eq 0 ] && [ -s "$tmp/sheet/s.png" ] && [ -s "$tmp/sheet/s.pdf" ] && [ -s "$tmp/sheet/s.gp" ]'
# a rerun stopped by a file size limit (its .rgb or gnuplot's output cut): nothing published, the
# earlier sheet of that name kept whole
sum0=$(cat "$tmp"/sheet/s.* | md5sum)
(ulimit -f 8; "$DSGAP" sheet --out "$tmp/sheet/s" --frames 0,3 --scale 2 first="$tmp/trace.h5" again="$tmp/trace.h5") \
  >/dev/null 2>"$tmp/err"
check "sheet: a rerun past a file size limit: exit 1, one line, the old sheet unchanged, no temporaries" \
  eval '[ $? -eq 1 ] && [ $(wc -l < "$tmp/err") -eq 1 ] && [ "$(cat "$tmp"/sheet/s.* | md5sum)" = "$sum0" ] && [ -z "$(ls -A "$tmp/sheet" | grep tmp)" ]'
# a label is text, never a command: gnuplot expands `...` in double-quoted strings only
"$DSGAP" sheet --out "$tmp/sheet/q" --frames 0 "it's \`touch $tmp/ran\`=$tmp/trace.h5" > /dev/null 2>"$tmp/err"
check "sheet: a label with a quote and backquotes is drawn as text (exit 0), nothing run" \
  eval '[ $? -eq 0 ] && [ -s "$tmp/sheet/q.png" ] && [ ! -e "$tmp/ran" ]'
"$DSGAP" sheet --out "$tmp/sheet/nl" --frames 0 "$(printf 'a\nb')=$tmp/trace.h5" > /dev/null 2>"$tmp/err"
check "sheet: a label with a line break is refused in one line, nothing written" \
  eval '[ $? -eq 1 ] && [ ! -e "$tmp/sheet/nl.gp" ] && [ "$(wc -l < "$tmp/err")" -eq 1 ]'
$PY - "$tmp/trace.h5" "$tmp/sheet/s.rgb" <<'PYEOF' > "$tmp/py.out" 2>&1
import sys
import numpy as np, h5py
x = h5py.File(sys.argv[1], "r")["latents"][:]            # [3, F, H, W] in [-1, 1]
C, F, H, W = x.shape
S, G, frames = 2, 2, [0, 3]
tw, th = (W + G) * S, (H + G) * S
img = np.fromfile(sys.argv[2], np.uint8).reshape(2 * th, len(frames) * tw, 3)
for r in range(2):
    for j, fr in enumerate(frames):
        ref = np.clip(np.floor((x[:, fr] + 1) * 127.5 + 0.5), 0, 255).astype(np.uint8).transpose(1, 2, 0)
        ref = ref.repeat(S, 0).repeat(S, 1)
        tile = img[r * th:r * th + H * S, j * tw:j * tw + W * S]
        assert (tile == ref).all(), (r, j, int(np.abs(tile.astype(int) - ref).max()))
        assert (img[r * th + H * S:(r + 1) * th, j * tw:(j + 1) * tw] == 255).all()
print("tiles equal the latents, gaps white")
PYEOF
check "sheet: every tile equals the frame's RGB (fp32 -> uint8), gaps white" eval '[ $? -eq 0 ]'
"$DSGAP" sheet --out "$tmp/sheet2/s" --frames 9 a="$tmp/trace.h5" 2>"$tmp/err"
check "sheet: a frame outside the clip is one line, exit 1, nothing written" \
  eval '[ $? -eq 1 ] && [ $(wc -l < "$tmp/err") -eq 1 ] && [ ! -e "$tmp/sheet2" ]'

rows=(); for i in $(seq 33); do rows+=("r$i=$tmp/trace.h5"); done
"$DSGAP" sheet --out "$tmp/sheet3/s" --frames 0 "${rows[@]:0:18}" > /dev/null 2>"$tmp/err"
check "sheet: 18 rows (a closed loop's 6 prompts x 3 runs) drawn, exit 0" eval '[ $? -eq 0 ] && [ -s "$tmp/sheet3/s.png" ]'
"$DSGAP" sheet --out "$tmp/sheet4/s" --frames 0 "${rows[@]}" > /dev/null 2>"$tmp/err"
check "sheet: 33 rows refused in one line naming the count, exit 2, nothing written" \
  eval '[ $? -eq 2 ] && [ $(wc -l < "$tmp/err") -eq 1 ] && grep -q "33 runs" "$tmp/err" && [ ! -e "$tmp/sheet4" ]'

# --- demo: a model that is not there ---------------------------------------------------------------
"$DSGAP" demo --model "$tmp/nomodel" --out "$tmp/demo" 2>"$tmp/err"
check "demo: a missing model is one line naming it, exit 1, no output folder" \
  eval '[ $? -eq 1 ] && [ $(wc -l < "$tmp/err") -eq 1 ] && grep -q nomodel "$tmp/err" && [ ! -e "$tmp/demo" ]'
"$DSGAP" demo --device tpu --out "$tmp/demo" 2>"$tmp/err"
check "demo: an unknown device is exit 2" eval '[ $? -eq 2 ] && [ ! -e "$tmp/demo" ]'

finish

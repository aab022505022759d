#!/usr/bin/env bash
# cli_pipeline.sh: the CLI end to end (synth -> replay -> decompose -> plot), checking the files'
# contents, and replay's answers to bad input: one line "dsgap: error: ..." naming the file or the
# problem, a non-zero exit, and no partial output left behind.
# Run: ctest -R cli_pipeline (needs $DSGAP, the dsgap binary).
. "$(dirname "$0")/../lib.sh" cli

# --- the pipeline ----------------------------------------------------------------------------------
"$DSGAP" synth --out "$tmp/t.h5" --grid 2x8x20 --heads 4 --layers 2 --steps 5 --head-dim 32 --seed 7 >/dev/null
check "synth writes the trace" test -s "$tmp/t.h5"
"$DSGAP" replay "$tmp/t.h5" --policies all,mc-sparse/budget=topp:0.9 --density 0.1,0.3 \
  --schedule warmup=2,dense_layers=1 --out "$tmp/r" --quiet
check "replay exits 0" test $? -eq 0
header=$(head -1 "$tmp/r/metrics.csv")
check "metrics.csv header is that of docs/spec.md §6" test "$header" = \
  "policy,density_target,density,step,layer,head,rel_l1,rel_l2,cosine,psnr,mass_mean,mass_p5,staleness,time_ms"
rows=$(($(wc -l < "$tmp/r/metrics.csv") - 1))
check "one row per policy x density x step x layer x head (16 x 2 x 5 x 2 x 4 = 1280, got $rows)" test "$rows" -eq 1280
check "every row has 14 fields and finite numbers (psnr may be inf)" awk -F, \
  'NR > 1 { if (NF != 14) exit 1; for (i = 2; i <= 14; i++) if ($i !~ /^-?[0-9.e+-]+$/ && !(i == 10 && $i == "inf")) exit 1 }' \
  "$tmp/r/metrics.csv"
check "warm-up and dense-layer units are dense (rel_l2 0, density 1)" awk -F, \
  'NR > 1 && ($4 < 2 || $5 == 1) { if ($8 != 0 || $3 != 1) exit 1 }' "$tmp/r/metrics.csv"
check "post-warm-up sparse units: density in [target, target + 256/n] (the rounding rule), error > 0" awk -F, \
  'NR > 1 && $4 >= 2 && $5 == 0 && $1 != "dense" && $1 !~ /topp/ { if ($3 < $2 || $3 > $2 + 256 / 160 + 1e-9 || $8 <= 0) exit 1 }' \
  "$tmp/r/metrics.csv"
check "anchor policies report staleness = step - 1 (anchor at step 1)" awk -F, \
  'NR > 1 && $4 >= 2 && $5 == 0 && $1 ~ /^(baseline|mc-)/ { if ($13 != $4 - 1) exit 1 }' "$tmp/r/metrics.csv"
check "run.json records schedule, policies and commit" grep -q '"dense_layers"' "$tmp/r/run.json"
check "run.json records the P.V arithmetic (fp32 on the CPU)" grep -q '"pv":[[:space:]]*"fp32"' "$tmp/r/run.json"
/usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['schedule']['anchors']==[1] and len(j['policies'])==16" \
  "$tmp/r/run.json" 2>/dev/null || command -v /usr/bin/python3 >/dev/null || true
"$DSGAP" decompose "$tmp/r" >/dev/null
check "decompose writes the ladder and ablation tables" test -s "$tmp/r/decomposition.md" -a -s "$tmp/r/ablation.tex" -a -s "$tmp/r/ablation.csv"
check "the ladder table names its three sources" grep -q "lost contributions" "$tmp/r/decomposition.md"
"$DSGAP" plot "$tmp/r" >/dev/null
for f in error_vs_density sources_per_layer-rho0.1 ablation-rho0.1 error_vs_staleness-rho0.1 mass_distribution-rho0.1; do
  check "figure $f: .dat .gp .png .pdf" test -s "$tmp/r/figures/$f.dat" -a -s "$tmp/r/figures/$f.gp" -a -s "$tmp/r/figures/$f.png" -a -s "$tmp/r/figures/$f.pdf"
done
check "figures are real PNG and PDF" bash -c "head -c 4 '$tmp/r/figures/ablation-rho0.1.png' | grep -q PNG && head -c 4 '$tmp/r/figures/ablation-rho0.1.pdf' | grep -q %PDF"
check "no temporary files left" test -z "$(find "$tmp" -name '*.tmp.*')"

# --- bad input to replay ---------------------------------------------------------------------------
refused "density above 1" "density 1.5 is outside (0, 1]" "$tmp/b1/metrics.csv" "$DSGAP" replay "$tmp/t.h5" --density 1.5 --out "$tmp/b1"
refused "density 0" "outside (0, 1]" "$tmp/b2/metrics.csv" "$DSGAP" replay "$tmp/t.h5" --density 0 --out "$tmp/b2"
refused "density not a number" "bad --density" "$tmp/b3/metrics.csv" "$DSGAP" replay "$tmp/t.h5" --density abc --out "$tmp/b3"
refused "precise neither on nor off" "bad --precise 'yes' (on or off)" "$tmp/b3/metrics.csv" "$DSGAP" replay "$tmp/t.h5" --precise yes --out "$tmp/b3"
refused "unknown policy" "unknown policy 'nope'" "$tmp/b4/metrics.csv" "$DSGAP" replay "$tmp/t.h5" --policies dense,nope --out "$tmp/b4"
refused "bad policy switch" "bad switch 'group=hex'" "$tmp/b5/metrics.csv" "$DSGAP" replay "$tmp/t.h5" --policies mc-sparse/group=hex --out "$tmp/b5"
refused "bad schedule" "schedule" "$tmp/b6/metrics.csv" "$DSGAP" replay "$tmp/t.h5" --schedule warmup=x --out "$tmp/b6"
refused "anchor not in the trace" "anchor step 40 is not in the trace" "$tmp/b7/metrics.csv" "$DSGAP" replay "$tmp/t.h5" --schedule anchors=40 --out "$tmp/b7"
refused "unwritable output directory" "cannot create directory /proc/dsgap" "/proc/dsgap/metrics.csv" "$DSGAP" replay "$tmp/t.h5" --out /proc/dsgap/x
refused "missing trace" "$tmp/missing.h5" "$tmp/b8/metrics.csv" "$DSGAP" replay "$tmp/missing.h5" --out "$tmp/b8"
head -c 20000 "$tmp/t.h5" > "$tmp/trunc.h5"
refused "truncated trace" "trunc.h5" "$tmp/b9/metrics.csv" "$DSGAP" replay "$tmp/trunc.h5" --out "$tmp/b9"
check "a failed replay leaves no directory it created" test ! -e "$tmp/b9" -a ! -e "$tmp/b1"
if /usr/bin/python3 -c "import h5py, numpy" 2>/dev/null; then
  # a float32 copy of the trace with one NaN in K, deep in the file: replay must stop with no output
  /usr/bin/python3 - "$tmp/t.h5" "$tmp/nan.h5" <<'PY'
import sys, h5py, numpy as np
src, dst = sys.argv[1:]
with h5py.File(src, "r") as a, h5py.File(dst, "w") as b:
    for key, val in a.attrs.items():
        b.attrs[key] = val
    for name in a:
        data = a[name][()]
        if name in ("q", "k", "v"):
            data = data.astype(np.float32)
        if name == "k":
            data[3, 1, 2, 17, 5] = np.nan
        b.create_dataset(name, data=data)
PY
  refused "NaN in K" "non-finite value in /k at step 3 layer 1 head 2" "$tmp/b10/metrics.csv" "$DSGAP" replay "$tmp/nan.h5" --out "$tmp/b10" --quiet
  # attnstats reads the units one by one with a progress line between them: the error on a line of
  # its own, on a terminal (script(1) gives a pty; the line is redrawn with \r) and in a log (whole lines)
  script -qefc "$(printf '%q ' "$DSGAP" attnstats --boot 10 --out "$tmp/a11" "x=$tmp/nan.h5")" /dev/null \
    >"$tmp/tty.out" 2>&1 || true
  check "attnstats on a terminal: a progress line was redrawn before the error" grep -qa $'\rattnstats: x unit 1/40' "$tmp/tty.out"
  check "attnstats on a terminal: the error starts its own line" \
    bash -c 'grep -a "dsgap: error:" "$1" | tr -d "\r" | grep -q "^dsgap: error: .*non-finite value in /k"' - "$tmp/tty.out"
  "$DSGAP" attnstats --boot 10 --out "$tmp/a12" "x=$tmp/nan.h5" 2>"$tmp/log.err" && bad "attnstats of a NaN trace exited 0"
  check "attnstats in a log: whole progress lines (no \\r), then the error on its own line" \
    bash -c '! grep -q $'"'"'\r'"'"' "$1" && grep -q "^attnstats: x unit 1/40, ETA " "$1" &&
      grep -q "^dsgap: error: .*non-finite value in /k" "$1" && [ "$(grep -c "dsgap: error" "$1")" = 1 ]' - "$tmp/log.err"
  check "a failed attnstats leaves no output" test ! -e "$tmp/a11" -a ! -e "$tmp/a12"
fi
finish

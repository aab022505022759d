#!/usr/bin/env bash
# golden.sh: the outputs of the key commands are the committed ones (tests/fixtures/golden/), byte
# for byte but for what is measured or names the run: replay's metrics.csv (time_ms out), the
# decompose tables (csv, md, tex), attnstats and refreshstats over a two-sample set, callspeed's
# and bench's rows (times out), a closed-loop sweep of dsgap run on the tiny Wan model (its
# closed_loop.csv without times, every cell's final latents) and compare's and drift's tables over
# it. Made before issue 49's moves (src/cli's analysis into analysis/ and bench/, dit/ and
# backend_gpu.c split), so a move that changes an output fails here.
#   bash tests/cli/golden.sh            check (ctest -R golden; needs $DSGAP, $DSGAP_SOURCE, wan_models)
#   bash tests/cli/golden.sh --update   write the goldens anew (only when an output is meant to change)
# Normalised away: the commit, dates, the scratch folder's path, timing columns, the device's name.
. "$(dirname "$0")/../lib.sh" golden
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
command -v gnuplot >/dev/null || { echo "skipped: no gnuplot"; exit 77; }
MODELS=${WAN_MODELS:-$PWD/wan_models}
FIX=$DSGAP_SOURCE/tests/fixtures/wan
GOLD=$DSGAP_SOURCE/tests/fixtures/golden
[ -d "$MODELS/orig_hd64" ] || { echo "no test models in $MODELS (run: ctest -R wan_models)"; exit 1; }
o=$tmp/out
mkdir -p "$o"
cd "$tmp" || exit 1
run() { "$DSGAP" "$@" > /dev/null 2>> "$tmp/log" || { echo "FAIL dsgap $*"; tail -3 "$tmp/log"; exit 1; }; }

# --- open loop: two synthetic samples, replay, decompose, attnstats, refreshstats -----------------
for s in 3 4; do run synth --out s$s.h5 --grid 2x8x16 --heads 2 --layers 2 --steps 6 --head-dim 32 --seed $s; done
run replay s3.h5 --out r --policies all,peers --density 0.1,0.25 --schedule warmup=1
run decompose r --boot 100 --seed 2
for s in 3 4; do
  run replay s$s.h5 --out p$s.a1 --policies dense,baseline,mc-residual --density 0.25 --schedule warmup=2,anchors=1
  run replay s$s.h5 --out p$s.a2 --policies dense,baseline,mc-residual --density 0.25 --schedule warmup=2,anchors=1\;3
done
run refreshstats --schedules a1,a2 --boot 100 --seed 3 --out rs p3 p4
mkdir a b && cp s3.h5 a/x.h5 && cp s4.h5 a/y.h5 && cp s4.h5 b/x.h5 && cp s3.h5 b/y.h5 # paired samples x, y
run attnstats --density 0.15 --out as first=a/x.h5,a/y.h5 second=b/x.h5,b/y.h5
# --- the backend's and the DiT entry point's call timings: every column but the times ------------
run callspeed --device cpu --grids 2x8x16 --heads 2 --head-dim 32 --policies mc-sparse,est-block \
  --density 0.25 --path both --reps 1 --csv cs.csv
run bench --device cpu --tokens 256 --heads 2 --head-dim 32 --reps 1 --layer-step 2x4x8 --csv bench.csv
# --- closed loop: dsgap run on the tiny Wan model, compare and drift ------------------------------
printf '%b' "[experiment]\nname = golden\n[model]\npath = $MODELS/orig_hd64\nlatent = 4x16x24\nsteps = 3
shift = 3\nguidance = 2\nseeds = 3, 4\n[prompts]\nfix = $FIX/text.safetensors\n[policies]
list = dense, mc-sparse, mc-sparse/fresh=keys, ditfastattn/window=64\n[densities]\nlist = 0.3\n[schedules]\nw1 = warmup=1\n" > c.ini
run run c.ini --out cl
# the measured times made fixed (transformer_s: dense 2 s, a policy 1 s), so that compare's speedups are
awk -F, -v OFS=, 'NR > 1 { $10 = $11 = ($3 == "dense" ? 2 : 1); $12 = 2 / $10 } 1' cl/model.w1/closed_loop.csv > t.csv
mv t.csv cl/model.w1/closed_loop.csv
run compare cl/model.w1 --out cmp --boot 100 --seed 4
run drift cl/model.w1 --out dr --boot 100 --seed 5

# --- what is compared -----------------------------------------------------------------------------
commit=$("$DSGAP" --version | sed -n 's/.*commit \([0-9a-f]\{7\}\).*/\1/p') # its first 7 digits
norm() { # the file, its run-specific values replaced
  sed -e "s|$tmp|TMP|g" -e "s|$DSGAP_SOURCE|SRC|g" ${commit:+-e "s/$commit[0-9a-f]*\(+wip\)\?/COMMIT/g"} \
      -e 's/cpu: [^(]*([0-9]* threads\?)/DEVICE/g' -e 's/[0-9]\{4\}-[0-9][0-9]-[0-9][0-9]T[0-9:]*Z/DATE/g' -e 's/[0-9]\{4\}-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]\( UTC\)\?/DATE/g' "$1"
}
cols() { cut -d, -f"$2" "$1"; } # CSV columns of a file
g=$tmp/got
mkdir -p "$g"
cols r/metrics.csv 1-13 > "$g/replay-metrics.csv"
for f in r/*.csv r/*.md r/*.tex rs/*.csv rs/*.md rs/*.tex rs/figures/*.dat as/*.csv as/*.md as/*.dat \
         cmp/*.csv cmp/*.md cmp/*.tex cmp/figures/*.dat dr/*.csv dr/*.md dr/figures/*.dat; do
  [ "$f" = r/metrics.csv ] && continue
  norm "$f" > "$g/$(echo "$f" | tr / -)"
done
cols cs.csv 1-10,16 > "$g/callspeed.csv"
cols bench.csv 1,3 > "$g/bench.csv"
cp cl/model.w1/closed_loop.csv "$g/closed_loop.csv"
for c in cl/cells/model.w1/*/; do # the final latents' bits
  h5dump -d /latents -b LE -o "$tmp/latents.bin" "$c/latents.h5" > /dev/null
  echo "$(sha256sum < "$tmp/latents.bin" | cut -c1-64) $(basename "$c")"
done > "$g/latents.sha256"

if [ "${1:-}" = --update ]; then
  rm -rf "$GOLD" && cp -r "$g" "$GOLD" && echo "goldens written: $GOLD ($(ls "$GOLD" | wc -l) files)"
  exit 0
fi
check "the same files as the goldens ($(ls "$GOLD" | wc -l))" diff <(ls "$GOLD") <(ls "$g")
for f in "$GOLD"/*; do
  b=$(basename "$f")
  check "$b" cmp -s "$f" "$g/$b"
  cmp -s "$f" "$g/$b" || diff "$f" "$g/$b" | head -5
done
finish

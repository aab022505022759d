#!/usr/bin/env bash
# refresh_cell.sh (dev): where a GPU cell of experiments/refresh.ini spends its 0.8 s (H100,
# 2026-12-05: 608 cells at 0.81 s each, host-bound). On the GPU machine, after device_all.sh has
# unpacked .carry: captures one 14-step trace, times `dsgap run` on its 24 cells against one
# `dsgap replay` of the whole trace (the same work in one process), and profiles the run with perf
# (or nsys) where the machine has it. Output in $OUT/profile/.
set -u
cd "$(dirname "$0")/../.." || exit 2
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} PATH=$PATH:/usr/local/cuda/bin
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=4
D=$PWD/.carry/bin/dsgap P=$OUT/profile W=/tmp/prof
mkdir -p "$P" "$W"
m=data/model
echo "tools: $(for t in perf nsys strace ltrace; do command -v $t >/dev/null && printf '%s ' $t; done)"
t=$SECONDS
$D capture --model $m --text $m/conds.safetensors:vtest --negative $m/conds.safetensors:null \
  --latent 16x32x32 --seed 1 --steps 14 --shift 3 --guidance 3 --layers 0,3,7 --device gpu \
  --sample vtest/seed1 --out $W/t.h5 --quiet
echo "capture: $((SECONDS - t)) s"
sed -e "s|^vtest-s1 = .*|vtest-s1 = $W/t.h5|" -e '/samples-s14/d' -e 's/^synthetic = .*//' experiments/refresh.ini > $W/one.ini
t=$SECONDS; $D run $W/one.ini --device gpu --out $W/run1 --quiet; echo "run (24 cells): $((SECONDS - t)) s"
grep -h '"wall_s"' $W/run1/cells/*/*/run.json | head -3
t=$SECONDS; $D replay $W/t.h5 --out $W/rep --policies dense,baseline,mc-residual,mc-gs,mc-sparse \
  --schedule warmup=2,anchors=1 --device gpu --quiet; echo "replay (6 clusters, one schedule): $((SECONDS - t)) s"
grep -A3 '"timing"' $W/rep/run.json
t=$SECONDS; $D info --check $W/t.h5 > /dev/null; echo "info --check: $((SECONDS - t)) s"
if command -v perf >/dev/null; then
  perf record -q -g -o $W/perf.data $D run $W/one.ini --device gpu --out $W/run2 --quiet
  perf report -i $W/perf.data --no-children --sort dso,sym 2>/dev/null | grep -v '^#' | grep '%' | head -60 > $P/perf.txt
elif command -v nsys >/dev/null; then
  nsys profile -q -o $W/ns --stats=false $D run $W/one.ini --device gpu --out $W/run2 --quiet
  nsys stats -q --report cuda_api_sum,osrt_sum $W/ns.nsys-rep > $P/nsys.txt 2>&1
fi
strace -f -c -o $P/strace.txt $D run $W/one.ini --device gpu --out $W/run3 --quiet 2>/dev/null
true

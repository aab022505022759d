#!/usr/bin/env bash
# time_experiments.sh: the wall time of each experiment's device path — the captures and `dsgap run`
# cells that experiments/NAME.sh runs before its tables and figures (those need gnuplot and take
# seconds on any CPU) — one experiment after the other, printed as a markdown table labelled with the
# machine, its CPU count and load, and the commit (for the README's times, issue 19).
#   scripts/time_experiments.sh [--device cpu|gpu] [--cap S] [--scratch DIR] [--out DIR] [EXPERIMENT ...]
#   EXPERIMENT   ladder ablation refresh peers samples attention closed_loop demo (default: all of them)
#   --device     where the cells run (default cpu; on the GPU machine: gpu)
#   --cap S      stop an experiment after S seconds: its row says "> S" (default 500)
#   --scratch    traces and cells (default /tmp/dsgap-times); --out DIR: times.md and each
#                experiment's summary.* and run.json there, and closed_loop.tgz (the closed loop's
#                run folder: tar xzf it, then experiments/closed_loop.sh --update-results --cells
#                closed_loop)
#   DSGAP        the dsgap binary (default build/dsgap; scripts/device_all.sh sets it to .carry/bin/dsgap)
#   SAMPLE_CLASSES, SAMPLE_SEEDS: the samples timed (default all 12 classes x 1,2: 24); the row gives
#                the time per sample and the 24-sample total it implies
#   WORKERS      dsgap run --workers on the CPU (default: the CPU count)
# On the H200 (one device call each, with carry [".carry"] after scripts/device_pack.sh here):
#   STEPS=experiments DEADLINE=580 CHECK_CAP=570 EXPERIMENTS="ladder ablation refresh peers attention demo samples" \
#     OUT=$OUT bash scripts/device_all.sh
#   STEPS=experiments DEADLINE=580 CHECK_CAP=570 EXPERIMENTS=closed_loop OUT=$OUT bash scripts/device_all.sh
# (device_all.sh's experiments step runs this with --device gpu; $OUT/experiments.log holds the table).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DSGAP=${DSGAP:-$ROOT/build/dsgap}
device=cpu cap=500 scratch=/tmp/dsgap-times out="" list=()
while [ $# -gt 0 ]; do
  case $1 in
    --device) device=$2; shift ;;
    --cap) cap=$2; shift ;;
    --scratch) scratch=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "time_experiments.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    *) list+=("$1") ;;
  esac
  shift
done
[ ${#list[@]} -gt 0 ] || list=(ladder ablation refresh peers samples attention closed_loop demo)
for x in "${list[@]}"; do
  case $x in ladder|ablation|refresh|peers|samples|attention|closed_loop|demo) ;;
    *) echo "time_experiments.sh: unknown experiment '$x' (--help)" >&2; exit 2 ;; esac
done
[ -x "$DSGAP" ] || { echo "time_experiments.sh: $DSGAP not found: build first or set DSGAP" >&2; exit 1; }
cd "$ROOT" || exit 1
mkdir -p "$scratch"
[ -z "$out" ] || mkdir -p "$out"
m=$ROOT/data/model
classes=${SAMPLE_CLASSES:-vtest,cockatoo,tree,realshort,pan_left,pan_right,pan_up,pan_down,zoom_in,zoom_out,rotate_cw,rotate_ccw}
seeds=${SAMPLE_SEEDS:-1,2}
nsamples=$(( $(echo "$classes" | tr ',' '\n' | wc -l) * $(echo "$seeds" | tr ',' '\n' | wc -l) ))
workers=""
[ "$device" = gpu ] || workers="--workers ${WORKERS:-$(nproc)}"
if [ "$device" = gpu ]; then
  machine=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  machine="${machine:-GPU}, $(nproc) CPU cores"
else
  machine="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores"
fi
path() { # what experiment $1's device path runs
  case $1 in
    ladder|ablation|peers) echo "dsgap run experiments/$1.ini (synthetic trace)" ;;
    refresh) echo "$nsamples captures (14 steps) + dsgap run experiments/refresh.ini" ;;
    samples) echo "experiments/samples.sh --stage replay: $nsamples samples, capture + replay of every policy at 3 densities" ;;
    attention) echo "$nsamples captures of the bundled and of the random-weight model + dsgap attnstats" ;;
    closed_loop) echo "dsgap run experiments/closed_loop.ini (44 generate runs)" ;;
    demo) echo "dsgap demo (capture + replay of the ladder and factorial)" ;;
  esac
}
steps() { # the device path of experiment $1
  local w=$scratch/$1
  rm -rf "$w"
  mkdir -p "$w"
  case $1 in
    ladder|ablation|peers|closed_loop)
      "$DSGAP" run "experiments/$1.ini" --device "$DSGAP_DEVICE" $workers --out "$w" ;;
    refresh) # refresh.ini's 24 samples (14-step captures), as experiments/refresh.sh makes them
      local t=$SECONDS && rm -rf build/experiments/samples-s14 &&
        NAME=refresh T0=$(date +%s) exp_sample_traces 14 "$m" build/experiments/samples-s14 $labels &&
        echo "refresh: captures $((SECONDS - t)) s" &&
        "$DSGAP" run experiments/refresh.ini --device "$DSGAP_DEVICE" $workers --out "$w" ;;
    samples)
      bash experiments/samples.sh --stage replay --device "$DSGAP_DEVICE" --classes "$classes" --seeds "$seeds" \
        --out "$w" ;;
    attention) # the random-weight model is made by PyTorch (data/random_model.py) first, not timed
      # (samples.ini's 24 samples, both models, as experiments/attention.sh), then dsgap attnstats
      { [ -f "$scratch/random/config.json" ] || python3 data/random_model.py --out "$scratch/random" >/dev/null; } &&
        local t=$SECONDS && NAME=attention T0=$(date +%s) exp_sample_traces 10 "$m" "$w/learned" $labels &&
        NAME=attention T0=$(date +%s) exp_sample_traces 10 "$scratch/random" "$w/random" $labels &&
        echo "attention: captures $((SECONDS - t)) s" &&
        "$DSGAP" attnstats --density 0.15 --out "$w/attnstats" \
          learned="$(printf "$w/learned/%s.h5," $labels | sed 's/,$//')" random="$(printf "$w/random/%s.h5," $labels | sed 's/,$//')" &&
        rm -rf "$w/learned" "$w/random" ;;
    demo)
      "$DSGAP" demo --device "$DSGAP_DEVICE" --model "$m" --out "$w" --quiet && rm -f "$w/trace.h5" ;;
  esac
}
source experiments/lib.sh # exp_capture
set +e                     # an experiment that fails is a row of the table
export -f steps exp_capture exp_sample_traces exp_say
labels=$(for s in ${seeds//,/ }; do for c in ${classes//,/ }; do printf '%s-s%s ' "$c" "$s"; done; done)
export DSGAP DSGAP_DEVICE=$device scratch m classes seeds workers labels
rows=()
echo "time_experiments.sh: ${list[*]} on $machine, device $device, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for x in "${list[@]}"; do
  l0=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(date +%s.%N)
  timeout "$cap" bash -c "steps $x" >"$scratch/$x.log" 2>&1
  rc=$?
  s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
  l1=$(cut -d' ' -f1 /proc/loadavg)
  case $rc in 0) t=$s ;; 124) t="> $cap" ;; *) t="failed (rc $rc, $s s)" ;; esac
  what=$(path "$x")
  if [ "$x" = samples ] && [ $rc = 0 ]; then
    what="$what: $(awk -v s="$s" -v n="$nsamples" 'BEGIN { printf "%.0f s a sample, %.0f s for 24", s / n, 24 * s / n }')"
  fi
  [ $rc = 0 ] || tail -3 "$scratch/$x.log" >&2
  rows+=("| $x | $what | $t | $l0 / $l1 |")
  echo "time_experiments.sh: $x: $t s" >&2
  if [ -n "$out" ] && [ -d "$scratch/$x" ]; then
    # the step's log (its stages' times, progress lines every 10 s), then its summaries
    mkdir -p "$out/$x" && cp "$scratch/$x.log" "$out/$x/" && cp "$scratch/$x"/summary.* "$scratch/$x"/*/run.json "$out/$x/" 2>/dev/null
    # the closed loop's whole run folder (its cells' latents make the contact sheet), for
    # experiments/closed_loop.sh --cells DIR on a machine with gnuplot
    [ "$x" != closed_loop ] || [ $rc != 0 ] || tar czf "$out/closed_loop.tgz" -C "$scratch" closed_loop
    # refresh: every run's metrics (experiments/refresh.sh --update-results --cells refresh after
    # tar xzf); attention: its tables (re-render attnstats-rho0.15.gp with gnuplot)
    [ "$x" != refresh ] || [ $rc != 0 ] || (cd "$scratch" && tar czf "$out/refresh.tgz" refresh/experiment.json \
      refresh/summary.csv refresh/summary.md refresh/*/metrics.csv refresh/*/run.json)
    [ "$x" != attention ] || [ $rc != 0 ] || cp -r "$scratch/attention/attnstats" "$out/attention/"
  fi
done
{
  echo "Device paths of the experiment scripts on $machine, device $device, $(date -u +%Y-%m-%dT%H:%MZ), dsgap $("$DSGAP" --version 2>/dev/null | sed -n 's/.*commit \([0-9a-f+wip]*\).*/\1/p')"
  echo
  echo "| experiment | what ran | wall s | load (1 min) before / after |"
  echo "|:--|:--|--:|--:|"
  printf '%s\n' "${rows[@]}"
} | tee ${out:+"$out/times.md"}

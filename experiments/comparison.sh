#!/usr/bin/env bash
# comparison.sh: the paper's main comparison (issue 23) -> results/comparison/: comparison.{md,tex,csv}
# (every method x density: PSNR, SSIM and rel-L2 of the final latents against dense, means over the
# samples with 95% bootstrap intervals over them; the computed density, all calls and past the
# warm-up; the measured speedup of the denoising loop; "cannot reach ρ" for a peer whose computed
# density misses its target by more than 0.02, run.json's unreached_densities), figures/pareto.{png,pdf}
# (speedup against PSNR, one marker per method, the frontier drawn, computed densities labelled),
# fidelity/RUN/{closed_loop.csv,run.json} and speed/RUN/{...} (every sample), summary.{csv,md}.
#
#   experiments/comparison.sh [--out DIR | --update-results] [--stage all|gpu|analyse] [--from FILE]
#                             [--pack FILE] [--budget S] [dsgap run options, e.g. --gpus all]
#
#   all (default)  fidelity (experiments/comparison.ini, or EXP_INI=FILE) and, unless
#                  COMPARISON_SPEED_INI=none, speed (experiments/comparison_speed.ini) with dsgap run
#                  here, then the tables. COMPARISON_SPEED_INI=none: the fidelity run's own times are the
#                  speed (say so in the figure). The CPU path: EXP_INI=a small experiment of the
#                  same form (tests/cli_comparison.sh runs one end to end); the full experiment is 372
#                  cells of several minutes each on 2 CPU cores (one measured: 444 s): a GPU job.
#   gpu            on the GPU machine (scripts/device_all.sh's `comparison` step, which sets DSGAP and
#                  the libraries): the fidelity run (--device gpu), the Wan2.1-1.3B random-weight model
#                  (scripts/gpu_dit.py make 1.3b build/w13b, once), the speed run, each under what is
#                  left of --budget S seconds (default 540; a run cut short keeps its finished cells in
#                  the scratch folder and goes on when called again on the same warm machine); the
#                  finished runs' small outputs packed into --pack FILE (default DIR/comparison.tar.gz)
#   analyse        here: unpack --from FILE (the gpu stage's pack) and make the tables and figure
# Scratch: build/experiments/comparison/{fidelity,speed} (DSGAP_WORK moves it; analyse unpacks into
# .../unpacked). COMPARISON_DEVICE=cpu runs the gpu stage's steps on the CPU (its test).
source "$(dirname "$0")/lib.sh"
stage=all from="" pack="" budget=540
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --stage) stage=${2:?--stage needs all, gpu or analyse}; shift ;;
    --from) from=${2:?--from needs a file}; shift ;;
    --pack) pack=${2:?--pack needs a file}; shift ;;
    --budget) budget=${2:?--budget needs seconds}; shift ;;
    --cells|--cells=*) echo "comparison.sh: two runs (fidelity, speed): bring the GPU's with --stage analyse --from FILE, not --cells" >&2; exit 2 ;;
    *) args+=("$1") ;;
  esac
  shift
done
case $stage in all|gpu|analyse) ;; *) echo "comparison.sh: --stage all|gpu|analyse, not '$stage'" >&2; exit 2 ;; esac
[ "$stage" != analyse ] || [ -n "$from" ] || { echo "comparison.sh: --stage analyse needs --from FILE (the gpu stage's pack)" >&2; exit 2; }
[ -z "$from" ] || [ -s "$from" ] || { echo "comparison.sh: --from $from: no such file" >&2; exit 2; }
[ -z "$from" ] || from=$(realpath "$from")
exp_init comparison ${args[@]+"${args[@]}"}
fid_ini=$INI # EXP_INI=FILE (lib.sh) for another fidelity experiment
speed_ini=${COMPARISON_SPEED_INI:-$ROOT/experiments/comparison_speed.ini}

# one experiment into WORK/KIND, at most S seconds when S > 0 (a run cut short keeps its cells); the
# script's dsgap run options (e.g. --gpus all) go to the fidelity run only: the speed run's cells run
# one at a time, alone on the machine
run_exp() { # KIND INI S [dsgap run options]
  local kind=$1 ini=$2 secs=$3 extra=()
  shift 3
  [ "$kind" = fidelity ] && extra=(${EXP_ARGS[@]+"${EXP_ARGS[@]}"})
  local omp=${OMP_NUM_THREADS:-}
  case " ${extra[*]-} " in *" --gpus "*) # the host's cores shared among the workers, one per GPU
    local ngpu
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    omp=$(( $(nproc) / (ngpu > 0 ? ngpu : 1) )) ;; esac
  exp_say "$kind: dsgap run $ini ($("$DSGAP" run "$ini" --out "$WORK/$kind" --list 2>/dev/null | wc -l) cells; finished cells are kept in $WORK/$kind)"
  local t=()
  [ "$secs" -gt 0 ] && t=(timeout "$secs")
  OMP_NUM_THREADS=${omp:-$(nproc)} ${t[@]+"${t[@]}"} "$DSGAP" run "$ini" --out "$WORK/$kind" ${extra[@]+"${extra[@]}"} "$@" ||
    { exp_say "$kind: dsgap run stopped (status $?): run again to go on"; return 1; }
}

case $stage in
all)
  run_exp fidelity "$fid_ini" 0
  [ "$speed_ini" = none ] || run_exp speed "$speed_ini" 0
  ;;
gpu)
  t0=$(date +%s)
  left() { echo $(( budget - ($(date +%s) - t0) )); }
  ok=1
  dev=${COMPARISON_DEVICE:-gpu} # cpu: the stage's own test (tests/cli_comparison.sh)
  run_exp fidelity "$fid_ini" "$(left)" --device "$dev" || ok=0
  if [ "$speed_ini" != none ] && [ "$(left)" -gt 60 ]; then
    if [ "$speed_ini" = "$ROOT/experiments/comparison_speed.ini" ] && [ ! -s "$ROOT/build/w13b/model/config.json" ]; then
      exp_say "speed: the Wan2.1-1.3B random-weight model (scripts/gpu_dit.py make 1.3b build/w13b)"
      timeout 200 python3 "$ROOT/scripts/gpu_dit.py" make 1.3b "$ROOT/build/w13b" --seed 2 >&2 || ok=0
    fi
    run_exp speed "$speed_ini" "$(left)" --device "$dev" || ok=0
  else
    [ "$speed_ini" = none ] || { exp_say "speed: not started, $(left) s left of --budget $budget"; ok=0; }
  fi
  pack=${pack:-$RESULTS/comparison.tar.gz}
  files=$(cd "$WORK" && { ls -d {fidelity,speed}/{summary.csv,summary.md,experiment.json,*/closed_loop.csv,*/run.json} 2>/dev/null || true; })
  [ -n "$files" ] || { exp_say "nothing finished to pack"; exit 1; }
  # shellcheck disable=SC2086  # the list splits on blanks
  (cd "$WORK" && tar czf "$pack.tmp" $files) && mv "$pack.tmp" "$pack"
  exp_say "packed into $pack: $(echo "$files" | wc -w) files$([ $ok = 1 ] || echo '; a run is unfinished: call again')"
  [ $ok = 1 ]
  exit
  ;;
analyse)
  WORK=$WORK/unpacked # the pack's runs, beside (not over) this machine's own cells
  rm -rf "$WORK"
  mkdir -p "$WORK"
  tar xzf "$from" -C "$WORK"
  exp_say "unpacked $from into $WORK"
  ;;
esac

# the tables and figure
fid_runs=("$WORK"/fidelity/*/closed_loop.csv)
[ -e "${fid_runs[0]}" ] || { echo "comparison.sh: no finished fidelity run in $WORK/fidelity" >&2; exit 1; }
fid_runs=("${fid_runs[@]%/closed_loop.csv}")
speed=()
for s in "$WORK"/speed/*/closed_loop.csv; do [ -e "$s" ] && speed+=(--speed "${s%/closed_loop.csv}"); done
samples=$(awk -F, 'NR > 1 && !seen[$1 "/" $2]++' "${fid_runs[@]/%//closed_loop.csv}" | wc -l)
model=$(sed -n 's/^[[:space:]]*"label":[[:space:]]*"\(.*\)",*$/\1/p' "${fid_runs[0]}/run.json" | head -1)
rm -rf "$RESULTS/fidelity" "$RESULTS/speed" "$RESULTS/figures"
exp_say "dsgap compare"
"$DSGAP" compare "${fid_runs[@]}" ${speed[@]+"${speed[@]}"} --out "$RESULTS" --title "$model model, $samples samples"
for kind in fidelity speed; do
  for d in "$WORK/$kind"/*/closed_loop.csv; do
    [ -e "$d" ] || continue
    run=$(basename "$(dirname "$d")")
    mkdir -p "$RESULTS/$kind/$run"
    cp "$d" "$(dirname "$d")/run.json" "$RESULTS/$kind/$run/"
  done
done
speed_dev=$(sed -n 's/^[[:space:]]*"speed_device":[[:space:]]*"\(.*\)",*$/\1/p' "$RESULTS/run.json")
WORK=$WORK/fidelity exp_readme "# The main comparison: every method's fidelity against its measured speedup

Fidelity: **$model** model, closed loop over $samples samples (\`fidelity/RUN/closed_loop.csv\`: every
sample; settings \`$(basename "$fid_ini")\`): every method generated from the same noise as the sample's
dense run; PSNR, SSIM and rel-L2 of the final latents against it, means over the samples with 95%
percentile bootstrap intervals over them (\`dsgap compare\`, src/analysis/compare.c, paired across
methods). Methods: dense (reference), mc-sparse, est-block (the FlexAttention-style block-sparse
reference: 128x128 tiles, top-k blocks by pooled scores) and the eight peers at matched budgets
(\`PEER/budget=matched\`; chipmunk and pisa are top-k methods); a peer whose computed density past the
warm-up misses its target by more than 0.02 is \"cannot reach ρ\" in the tables, left out of the
figure (\`run.json\`: \`unreached_densities\`).
Speed: $([ ${#speed[@]} -gt 0 ] && echo "\`speed/RUN/\`: the same methods in the denoising loop of \`$(basename "$speed_ini")\` on $speed_dev; speedup = dense transformer time / the method's." || echo "the fidelity runs' own transformer times (no speed run).")
\`comparison.md\` (also \`.tex\`, \`.csv\`); \`figures/pareto.png\`: speedup against PSNR, one marker per
method, labels the computed density past the warm-up, the dashed line the frontier of non-dominated
points. GPU runs: \`experiments/comparison.sh --stage gpu\` on the H200 (scripts/device_all.sh step
\`comparison\`), then \`experiments/comparison.sh --stage analyse --from comparison.tar.gz --update-results\` here." \
  "${fid_runs[0]}/run.json"

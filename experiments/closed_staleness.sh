#!/usr/bin/env bash
# closed_staleness.sh: issue 50 items 4 and 5 -> results/closed_staleness/ (or, with --sensitivity,
# results/closed_sensitivity/): dsgap run of experiments/closed_staleness.ini (closed_sensitivity.ini),
# then dsgap drift over its merged runs: drift.md, staleness.csv (E(mc-sparse) - E(mc-sparse
# fresh=X): what the staleness of each cached component costs the loop, beside the decomposition's
# three sources), drift.csv and figures/drift-RUN.{png,pdf} (each step's rel-L2 against dense, mean
# over the samples with 95% bands), sensitivity.csv and figures/sensitivity.{png,pdf} (the final PSNR
# with sparse attention in one window of steps or one layer only); each run's closed_loop.csv,
# drift.csv and run.json under RUN/.
#   experiments/closed_staleness.sh [--sensitivity] [--out DIR | --update-results] [--cells DIR]
#                                   [dsgap run options]
# Both experiments are GPU jobs (384 and 936 cells of 50 steps): run them on the GPU machine
# (dsgap run ... --device gpu) and bring the run folder here with --cells DIR.
source "$(dirname "$0")/lib.sh"
name=closed_staleness
args=()
for a in "$@"; do
  if [ "$a" = --sensitivity ]; then name=closed_sensitivity; else args+=("$a"); fi
done
exp_init $name ${args[@]+"${args[@]}"}
exp_run
runs=()
for d in "$WORK"/*/closed_loop.csv; do [ -e "$d" ] && runs+=("$(dirname "$d")"); done
[ ${#runs[@]} -gt 0 ] || { echo "closed_staleness.sh: no merged run (RUN/closed_loop.csv) in $WORK" >&2; exit 1; }
exp_say "dsgap drift over ${#runs[@]} run(s)"
"$DSGAP" drift "${runs[@]}" --out "$RESULTS" || exit 1
for r in "${runs[@]}"; do
  mkdir -p "$RESULTS/$(basename "$r")"
  cp "$r/closed_loop.csv" "$r/drift.csv" "$r/run.json" "$RESULTS/$(basename "$r")/"
done
flag=; [ "$name" = closed_staleness ] || flag=" --sensitivity"
EXP_REGEN="\`experiments/closed_staleness.sh$flag --update-results\` (\`dsgap run experiments/$name.ini\`, a GPU job: \
run it on the GPU machine and bring its folder here with \`--cells DIR\`; then \`dsgap drift\` over its runs)." \
exp_readme "# $name: issue 50's staleness, drift and sensitivity in the closed loop

The tables and figures are dsgap drift's (drift.md; src/analysis/drift.h says what each one is)." \
  "${runs[0]}/run.json"

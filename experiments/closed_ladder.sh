#!/usr/bin/env bash
# closed_ladder.sh: issue 50 item 3, the three sources inside the loop -> results/closed_ladder/:
# dsgap run of experiments/closed_ladder.ini (the oracle ladder, each rung made anew every call, and
# the MC-Sparse 2^3 factorial, in whole 50-step generations of the bundled model's 24 samples), then
# dsgap decompose --closed over its merged run: decomposition{,-psnr}.{md,csv,tex} (the final
# latents' rel-L2 and PSNR against dense split into lost contributions, query grouping, key
# blocking and selection, with the paired "A − B" rows), ablation{,-psnr}.* (the factorial's Shapley
# shares and interactions), each with NAME-samples.csv; the run's closed_loop.csv and run.json.
#   experiments/closed_ladder.sh [--out DIR | --update-results] [--cells DIR] [dsgap run options]
# A GPU job (696 generations of 50 steps): run it on the GPU machine (experiments/device_runs.sh
# closed_ladder) and bring the run folder here with --cells DIR.
source "$(dirname "$0")/lib.sh"
exp_init closed_ladder "$@"
exp_run
runs=()
for d in "$WORK"/*/closed_loop.csv; do [ -e "$d" ] && runs+=("$(dirname "$d")"); done
[ ${#runs[@]} -gt 0 ] || { echo "closed_ladder.sh: no merged run (RUN/closed_loop.csv) in $WORK" >&2; exit 1; }
exp_say "dsgap decompose --closed over ${#runs[@]} run(s)"
"$DSGAP" decompose --closed "${runs[@]}" --out "$RESULTS" || exit 1
for r in "${runs[@]}"; do
  mkdir -p "$RESULTS/$(basename "$r")"
  cp "$r/closed_loop.csv" "$r/run.json" "$RESULTS/$(basename "$r")/"
done
exp_readme "# closed_ladder: issue 50's three sources inside the closed loop

The tables are dsgap decompose --closed's (src/analysis/closed.h says what each one is): E is the
mean over the samples of the final latents' rel-L2 against the sample's dense generation
(decomposition.md), or minus the mean PSNR in dB (decomposition-psnr.md: differences are dB lost)." \
  "${runs[0]}/run.json"

#!/usr/bin/env bash
# attention.sh: is the bundled model's attention learned? -> RESULTS/ (attnstats.{csv,md},
# attnstats-samples.csv, attnstats-rho0.15.{png,pdf}): per layer and head, the row entropy and the per-query
# oracle's retained mass at density 0.15 of the bundled model (data/model) against the same
# architecture with random weights (data/random_model.py: the initialisation train.py starts from),
# over the ladder's sample set (issue 19: experiments/samples.ini's 24 samples, CLASS-sSEED), both
# models captured by the same command per sample (latent 16x32x32 = 4096 tokens, 10 UniPC steps,
# shift 3, CFG 3; layers 0, 3, 7: samples.sh's capture). Means pool the samples; 95% intervals from
# the two-level bootstrap (samples, then (layer, head) clusters); ΔH and Δmass with the samples where
# the learned model is the more peaked. 1-7 min a capture on 2 shared CPU cores (48 of them for the
# full set), seconds on an H200 (DSGAP_DEVICE=gpu).
#   experiments/attention.sh [--out DIR | --update-results] [--samples LIST]
#   --samples LIST   a comma list of samples.ini's samples in place of all 24 (the README says so)
#   PYTHON: a python with torch for data/random_model.py (default python3); --out defaults to a
#   fresh build/results/attention-DATE, --update-results writes results/attention
source "$(dirname "$0")/lib.sh"
exp_init attention "$@"
only=$EXP_SAMPLES
cd "$ROOT" || exit 1
PYTHON=${PYTHON:-python3}
W=build/attention
# the sample set: the labels of samples.ini's traces (the ladder's and the factorial's)
mapfile -t all < <(awk '/^\[/ { on = ($0 == "[traces]"); next } on && /^[^;#[:space:]][^=]*=/ {
  k = $0; sub(/[[:space:]]*=.*/, "", k); print k }' "$ROOT/experiments/samples.ini")
samples=()
for s in "${all[@]}"; do
  if [ -z "$only" ] || [[ ",$only," == *",$s,"* ]]; then samples+=("$s"); fi
done
for s in ${only//,/ }; do
  [[ " ${all[*]} " == *" $s "* ]] || { echo "attention.sh: --samples: '$s' is not a sample of samples.ini" >&2; exit 2; }
done
[ -f "$W/random/config.json" ] || "$PYTHON" data/random_model.py --out "$W/random"
exp_sample_traces 10 data/model "$W/traces/learned" "${samples[@]}"
exp_sample_traces 10 "$W/random" "$W/traces/random" "${samples[@]}"
learned=$(printf "$W/traces/learned/%s.h5," "${samples[@]}") random=$(printf "$W/traces/random/%s.h5," "${samples[@]}")
exp_say "dsgap attnstats over ${#samples[@]} samples"
"$DSGAP" attnstats --density 0.15 --out "$RESULTS" --quiet learned="${learned%,}" random="${random%,}"

set_note="the full set: all ${#samples[@]} samples of experiments/samples.ini"
[ -z "$only" ] || set_note="a reduced set of ${#samples[@]} of its 24 samples (\`experiments/attention.sh --update-results --samples $only\`), to keep the run on 2 shared CPU cores near half an hour; the full set: \`experiments/attention.sh --update-results\` (48 captures and their statistics: about 50 min on 2 CPU cores, 2026-12-05; minutes with DSGAP_DEVICE=gpu)"
{
  printf '# Is the bundled model'"'"'s attention learned? (row entropy and oracle mass over samples)\n\n'
  printf 'The bundled model (`data/model`) against the same architecture with random weights (`data/random_model.py`), each captured per sample of the ladder'"'"'s sample set (`experiments/samples.ini`: class x noise seed; 4096 tokens, layers 0/3/7 x 2 heads, 10 UniPC steps, CFG 3, shift 3): %s. Means pool the samples; 95%% intervals from the two-level bootstrap (samples, then (layer, head) clusters within each), so they include the variation between samples.\n\n' "$set_note"
  sed -n '/^## Is /,$p' "$RESULTS/attnstats.md"
  printf 'Files: `attnstats.md` (per source, layer and head, with intervals), `attnstats.csv` (every unit of every sample), `attnstats-samples.csv` (each sample'"'"'s estimates), `attnstats-rho0.15.png`/`.pdf` (both quantities per layer and head with the intervals, the oracle mass at density 0.15; `.dat`, `.gp`).\n\n'
  printf 'Regenerate: `experiments/attention.sh --update-results` (traces in the scratch folder `build/attention/traces/`). Last run: %s on %s, dsgap commit %s: %d s wall (the captures not already in the scratch folder included).\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${DSGAP_DEVICE:-cpu} ($(nproc) cores)" "$("$DSGAP" --version | sed 's/.*commit \([0-9a-f]*\).*/\1/')" $(( $(date +%s) - T0 ))
} > "$RESULTS/README.md.tmp"
mv "$RESULTS/README.md.tmp" "$RESULTS/README.md"
exp_say "results in $RESULTS"

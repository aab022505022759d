#!/usr/bin/env bash
# refresh.sh: experiment 3, the refresh interval (experiments/refresh.ini) over the bundled model's
# sample set (issue 19) and a synthetic trace -> RESULTS/ (the bundled model's samples):
# refresh.md (every table), anchors.{csv,tex} (error vs number of anchors per policy),
# trends.{csv,tex} (error growth per step since the anchor and E(1 anchor) - E(6 anchors), each with
# the samples where it holds), staleness.csv, samples.csv (each sample's estimates) and
# figures/error_vs_{anchors,staleness}-rhoX.{png,pdf} (at density X; 95% two-level bootstrap intervals:
# samples, then (layer, head) clusters); RESULTS/synthetic/: the same for the synthetic trace (one
# sample: cluster-bootstrap intervals). dsgap refreshstats makes the tables and figures.
#   experiments/refresh.sh [--out DIR | --update-results] [--samples LIST] [dsgap run options]
#   --samples LIST   a comma list of the ini's samples (CLASS-sSEED) to run, in place of all 24:
#                    the ini filtered into its own scratch folder (WORK-HASH; the README says the
#                    set is reduced)
# The samples' 14-step traces are captured first where missing (build/experiments/samples-s14/; 1-7
# min each on 2 shared CPU cores, seconds on an H200 with DSGAP_DEVICE=gpu), then every cell is
# replayed (dsgap run). Extra arguments go to dsgap run (e.g. --workers 2).
source "$(dirname "$0")/lib.sh"
exp_init refresh "$@"
only=$EXP_SAMPLES

# the ini's sections: LABEL PATH of its traces, the names of its schedules (in order)
section() { awk -v s="[$1]" '/^\[/ { on = ($0 == s); next } on && /^[^;#[:space:]][^=]*=/ {
  k = $0; sub(/[[:space:]]*=.*/, "", k); v = $0; sub(/^[^=]*=[[:space:]]*/, "", v); print k, v }' "$INI"; }
mapfile -t traces < <(section traces)
schedules=$(section schedules | awk '{ printf "%s%s", (NR > 1 ? "," : ""), $1 }')
samples=() paths=()
for t in "${traces[@]}"; do
  label=${t%% *}
  [ "$label" = synthetic ] && continue
  if [ -n "$only" ] && [[ ",$only," != *",$label,"* ]]; then continue; fi
  samples+=("$label") paths+=("${t#* }")
done
if [ -n "$only" ]; then # (with --cells the folder's runs are read as they are)
  for s in ${only//,/ }; do
    [[ " ${samples[*]} " == *" $s "* ]] || { echo "refresh.sh: --samples: '$s' is not a sample of $INI" >&2; exit 2; }
  done
  # another experiment (its fingerprint): its own scratch folder, the ini with the synthetic trace and
  # the chosen samples only
fi
if [ -n "$only" ] && [ -z "$EXP_CELLS" ]; then
  WORK=$WORK-$(printf %s "$only" | md5sum | cut -c1-8)
  mkdir -p "$WORK"
  exp_say "the samples $only only: scratch $WORK"
  awk -v keep=",synthetic,$only," '/^\[/ { sec = $0 } sec == "[traces]" && /^[^;#[:space:]][^=]*=/ {
    k = $0; sub(/[[:space:]]*=.*/, "", k); if (index(keep, "," k ",") == 0) next } { print }' "$INI" |
    sed "s|\.\./build/|$ROOT/build/|" > "$WORK/refresh-subset.ini"
  INI=$WORK/refresh-subset.ini
fi
# the traces that are files of the bundled model's samples (a synth: trace needs no capture)
capture=()
for i in "${!samples[@]}"; do
  case ${paths[$i]} in synth:*) ;; *) capture+=("${samples[$i]}") ;; esac
done
[ -n "$EXP_CELLS" ] || [ ${#capture[@]} -eq 0 ] ||
  exp_sample_traces 14 "$ROOT/data/model" "$ROOT/build/experiments/samples-s14" "${capture[@]}"
exp_run

exp_say "dsgap refreshstats over ${#samples[@]} samples (schedules $schedules)"
sample_args=()
for s in "${samples[@]}"; do sample_args+=("$s=$WORK/$s"); done
"$DSGAP" refreshstats --schedules "$schedules" --out "$RESULTS" "${sample_args[@]}" >&2
"$DSGAP" refreshstats --schedules "$schedules" --out "$RESULTS/synthetic" synthetic="$WORK/synthetic" >&2

set_note="the full set: all ${#samples[@]} samples of experiments/refresh.ini"
[ -z "$only" ] || set_note="a reduced set of ${#samples[@]} of the ini's 24 samples (\`experiments/refresh.sh --update-results --samples $only\`), chosen to keep the run on 2 shared CPU cores near half an hour; the full set: \`experiments/refresh.sh --update-results\` (24 captures and replays: hours on 2 CPU cores, minutes with DSGAP_DEVICE=gpu)"
exp_readme "# Experiment 3: the refresh interval over the bundled model's samples (and a synthetic trace)

Policies \`dense baseline mc-residual mc-gs mc-sparse\` (refresh=anchor) and mc-sparse with one cached
component remade at every step (\`fresh=keys\`, \`fresh=groups\`, \`fresh=residual\`: what the staleness
of each costs a call) at density 0.15; warm-up 2 steps; four schedules with 1, 2, 3 and 6 evenly
spaced anchors over the 12 reuse steps (\`a1\`: anchor 1; \`a2\`: 1, 7; \`a3\`: 1, 5, 9; \`a6\`: 1, 3,
5, 7, 9, 11). An anchor step gives the dense output (error 0) and costs a dense pass plus the
metadata.

**Samples**: the bundled model (\`data/model\`), its own attention captured per sample (class x noise
seed, as results/samples/: 4096 tokens, layers 0/3/7 x 2 heads, CFG 3, shift 3) with 14 UniPC steps:
$set_note. Every mean pools the samples' post-warm-up units; the 95% intervals come from the
two-level bootstrap (samples with replacement, then (layer, head) clusters within each), so they
include the variation between samples; \"> 0 in k of n\" counts the samples whose own estimate is
positive (\`samples.csv\`: each sample's).

$(sed -n '/^## Trends/,/^## Error vs number/p' "$RESULTS/refresh.md" | sed '$d')
- \`refresh.md\`: every table (error vs anchors, vs steps since the anchor, each sample);
  \`anchors.{csv,tex}\`, \`trends.{csv,tex}\`, \`staleness.csv\`, \`samples.csv\`.
- \`figures/$(cd "$RESULTS/figures" && ls error_vs_staleness-rho*.png | head -1)\`: error vs steps since the anchor (schedule a1), and
  \`figures/$(cd "$RESULTS/figures" && ls error_vs_anchors-rho*.png | head -1)\`: error vs number of anchors, both with the
  two-level intervals (NAME-rhoX: at density X).
- \`synthetic/\`: the same tables for a structured synthetic trace (\`synth: grid=5x16x32 heads=4
  layers=2 steps=14 head_dim=64 seed=1\`, 2560 tokens; one sample, so its intervals resample only its
  (layer, head) clusters)." "$WORK/synthetic.a1/run.json"

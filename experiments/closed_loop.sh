#!/usr/bin/env bash
# closed_loop.sh: experiment 4, the closed loop (experiments/closed_loop.ini) -> results/closed_loop/:
# closed_loop.{md,tex,csv} (per policy and density, means over the samples: effective density, PSNR
# and SSIM of the final frames against the dense run of the same prompt and noise, worst frame,
# transformer time and speedup; each policy labelled by its source: the reference, MC-Sparse or the
# peer's paper), figures/closed_loop.{png,pdf} (PSNR, SSIM and speedup against the effective
# density, one line per policy), RUN/closed_loop.csv (every sample) and RUN/run.json, summary.*.
# Needs the bundled model in data/model (a cell is one whole generate run: hours on 2 CPU cores,
# minutes on a GPU with the engine's GPU path: --device gpu). Extra arguments go to dsgap run
# (e.g. --workers 2, --gpus all, --device gpu). EXP_INI=FILE runs another experiment file of the
# same form (e.g. a smaller model or grid; experiments/lib.sh).
source "$(dirname "$0")/lib.sh"
exp_init closed_loop "$@"
exp_run
rm -rf "$RESULTS"/*/ "$RESULTS"/figures
for d in "$WORK"/*/closed_loop.csv; do
  run=$(basename "$(dirname "$d")")
  mkdir -p "$RESULTS/$run"
  cp "$d" "$WORK/$run/run.json" "$RESULTS/$run/"
done

# the table: summary.csv's lines, each policy labelled by its source
label='function src(p) { sub(/\/.*/, "", p)
  if (p == "dense") return "reference"
  if (p == "baseline" || p ~ /^mc-/) return "MC-Sparse"
  split("svg2:Sparse VideoGen2,spargeattn:SpargeAttn,xattention:XAttention,radial:Radial Attention,sta:Sliding Tile Attention,ditfastattn:DiTFastAttn,chipmunk:Chipmunk,pisa:PISA", m, ",")
  for (i in m) { split(m[i], kv, ":"); if (kv[1] == p) return kv[2] }
  return "custom" }'
awk -F, "$label"' NR > 1 { printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", $1, $6, src($6), $7, $8, $9, $10, $11, $12, $13, $14, $15 }
  BEGIN { print "run,policy,source,density_target,samples,density,psnr,psnr_min,ssim,ssim_min,transformer_s,speedup" }' \
  "$WORK/summary.csv" > "$RESULTS/closed_loop.csv"
model=$(sed -n 's/^[[:space:]]*"path":[[:space:]]*"\(.*\)",*$/\1/p' "$WORK/experiment.json" | head -1)
mlabel=$(sed -n 's/^[[:space:]]*"label":[[:space:]]*"\(.*\)",*$/\1/p' "$WORK/experiment.json" | head -1)
{
  echo "# Closed loop: end-to-end fidelity and speedup per policy"
  echo
  echo "Model \`$(basename "$model")\`; means over the samples (prompt x seed) of PSNR (dB) and SSIM of the final frames against the dense run of the same prompt and noise (min: the worst frame of any sample), the effective density (computed pairs / N² over every self-attention call, warm-up included) and the transformer speedup (mean dense time / mean policy time). Settings: \`experiments/$(basename "$INI")\`."
  echo
  echo "| policy | source | target ρ | samples | effective density | PSNR | PSNR min | SSIM | SSIM min | speedup |"
  echo "|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|"
  awk -F, 'NR > 1 { printf "| `%s` | %s | %s | %s | %.3f | %.2f | %.2f | %.4f | %.4f | %.2f |\n", $2, $3, $4, $5, $6, $7, $8, $9, $10, $12 }' "$RESULTS/closed_loop.csv"
} > "$RESULTS/closed_loop.md"
{
  echo "% closed_loop.tex: made by experiments/closed_loop.sh from summary.csv; needs \\usepackage{booktabs}"
  echo "\\begin{tabular}{llrrrrrr}"
  echo "\\toprule"
  echo "Policy & Source & \$\\rho\$ & Density & PSNR & SSIM & SSIM\$_{\\min}\$ & Speedup \\\\"
  echo "\\midrule"
  awk -F, 'NR > 1 { p = $2; gsub(/_/, "\\_", p); printf "\\texttt{%s} & %s & %s & %.3f & %.2f & %.4f & %.4f & %.2f \\\\\n", p, $3, $4, $6, $7, $9, $10, $12 }' "$RESULTS/closed_loop.csv"
  echo "\\bottomrule"
  echo "\\end{tabular}"
} > "$RESULTS/closed_loop.tex"

# figure: PSNR, SSIM and speedup per policy, means over the samples with 95% intervals over them
exp_say "closed-loop figure"
bash "$ROOT/experiments/closed_loop_fig.sh" "$RESULTS/figures" "$mlabel" "$RESULTS"/*/closed_loop.csv

# contact sheet (pixel-space model: the latents are the frames): per prompt of seed 1, the dense run,
# mc-sparse and svg2 at 0.15, 8 frames each -> sheet.{png,pdf}
cells=$WORK/cells/$(ls "$WORK/cells" | head -1)
sheet=()
for p in $(ls "$cells" | sed -n 's/\.s1\.dense$//p'); do
  for pol in dense mc-sparse@0.15 svg2_budget=topk@0.15; do
    lab="$p seed 1: ${pol%%[@_]*}"; [ "$pol" = dense ] || lab="$lab ρ ${pol##*@}" # no '=' in a label
    [ -f "$cells/$p.s1.$pol/latents.h5" ] && sheet+=("$lab=$cells/$p.s1.$pol/latents.h5")
  done
done
[ ${#sheet[@]} -gt 0 ] && "$DSGAP" sheet --out "$WORK/sheet" "${sheet[@]}" && cp "$WORK"/sheet.{png,pdf} "$RESULTS/"

first=$(ls -d "$RESULTS"/*/run.json | head -1)
exp_readme "# Experiment 4: the closed loop ($(basename "$model"))

Source: **model** \`$model\` (the bundled model when run from \`experiments/closed_loop.ini\`).
Every sample (prompt, seed) is generated densely and with each policy inside every self-attention
call of the denoising loop (\`dsgap run\`: one cell per sample x policy x density, the dense reference
once per sample); the final frames are compared with the dense run's at merge time.
\`closed_loop.md\` (also \`.tex\`, \`.csv\`): per policy and target density, the effective density,
PSNR and SSIM (means over the samples and worst frame) and the transformer speedup, each policy
labelled by its source (reference, MC-Sparse, or the peer's paper); \`RUN/closed_loop.csv\`: every
sample. Figure: \`figures/closed_loop.png\` (PSNR, SSIM and speedup per policy, means over the samples with 95% bootstrap intervals over them);
\`sheet.png\`: frames of the dense, mc-sparse and svg2 runs of every prompt (seed 1), side by side.
Speedups are CPU times unless the run said \`--device gpu\` (\`RUN/run.json\`: the devices)." "$first"

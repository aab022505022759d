#!/usr/bin/env bash
# peers.sh: the peer methods beside MC-Sparse (experiments/peers.ini) -> results/peers/: peers.{md,csv}
# (per policy and target density: effective density, mean rel_l2, cosine and retained mass over
# post-warm-up units), figures/error_vs_density.png (error against the effective density each method
# actually ran at), summary and metrics.csv. Synthetic trace. About 1-2
# minutes on 2 CPU cores. Extra arguments go to dsgap run.
source "$(dirname "$0")/lib.sh"
exp_init peers "$@"
exp_run
run=synthetic.w2
# no dsgap decompose: the peers are neither the ladder nor the factorial; the table below is theirs
exp_collect $run "$RESULTS"
# the table: post-warm-up units (step >= 2) of every policy x target density
awk -F, 'NR > 1 && $4 >= 2 { k = $1 FS $2; n[k]++; dn[k] += $3; e[k] += $8; c[k] += $9; m[k] += $11
  if (!(k in seen)) { seen[k] = 1; order[++no] = k } }
  END { print "policy,density_target,density,rel_l2,cosine,mass_mean"
    for (i = 1; i <= no; i++) { k = order[i]
      printf "%s,%.6g,%.6g,%.6g,%.6g\n", k, dn[k] / n[k], e[k] / n[k], c[k] / n[k], m[k] / n[k] } }' \
  "$WORK/$run/metrics.csv" > "$RESULTS/peers.csv"
{
  echo "Peers beside MC-Sparse on a **synthetic** trace (post-warm-up units; E = mean rel_l2)."
  echo
  echo "| policy | target ρ | effective density | E (rel_l2) | cosine | retained mass |"
  echo "|---|---|---|---|---|---|"
  awk -F, 'NR > 1 { printf "| %s | %s | %.3f | %.4f | %.5f | %.3f |\n", $1, $2, $3, $4, $5, $6 }' "$RESULTS/peers.csv"
} > "$RESULTS/peers.md"
# figure: error against effective density, one series per policy
fig=$RESULTS/figures
mkdir -p "$fig"
rm -f "$fig"/peers_*.dat
awk -F, 'NR > 1 { gsub(/[\/:=]/, "_", $1); print $3, $4 > ("'"$fig"'/peers_" $1 ".dat") }' "$RESULTS/peers.csv"
{
  echo "load 'style.gp'"
  echo "set terminal pngcairo size 900,600; set output 'error_vs_density.png'"
  echo "set title 'peers vs MC-Sparse (synthetic trace): error against effective density'"
  echo "set xlabel 'effective density'; set ylabel 'mean rel\\_l2 (post-warm-up)'; set logscale y"
  echo "set key outside right"
  printf "plot "
  sep=""
  for f in "$fig"/peers_*.dat; do
    b=$(basename "$f" .dat); printf "%s'%s' using 1:2 with linespoints title '%s'" "$sep" "$b.dat" "${b#peers_}"; sep=", "
  done
  echo
  echo "set terminal pdfcairo; set output 'error_vs_density.pdf'; replot"
} > "$fig/error_vs_density.gp"
exp_gnuplot "$fig" error_vs_density.gp
exp_readme "# Peers beside MC-Sparse (synthetic trace)

Source: **synthetic** — a structured synthetic trace (\`synth: grid=5x16x32 heads=4 layers=2 steps=6
head_dim=64 seed=1\`: 2560 tokens; local, frame, sink and diffuse heads), not a model capture.
Policies: \`dense\`, \`baseline\`, \`mc-sparse\` and the eight peers (src/peers.h) at their published
defaults (svg2, spargeattn, xattention, radial, sta, ditfastattn run at their own density, whatever
--density says; chipmunk and pisa are top-k methods and follow it), plus the matched-density variants
\`xattention/budget=topk\`, \`spargeattn/theta=-0.1/budget=topk\` (SpargeAttn's top-k recipe) and
\`svg2/budget=topk\` (cluster top-k), at target densities 0.1, 0.15, 0.25; warm-up 2 steps (anchor at
step 1 for the anchor-based policies: mc-sparse, baseline, ditfastattn, chipmunk).
\`peers.md\`: effective density, E (mean rel_l2), cosine and retained mass per policy and target
density; \`figures/error_vs_density.png\`: E against the effective density each method ran at. The
peers' defaults were tuned for 30k-115k-token videos; on this 2560-token trace SpargeAttn's
self-similarity filter (theta 0.6) keeps every block, STA's 6x8x8 tiles cover most of the grid and
Radial keeps most blocks: their densities are reported as they are." "$RESULTS/run.json"

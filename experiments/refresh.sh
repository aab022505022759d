#!/usr/bin/env bash
# refresh.sh: experiment 3, the refresh interval (experiments/refresh.ini) -> results/refresh/:
# anchors.{csv,md,tex} and figures/error_vs_anchors.{png,pdf} (mean error vs number of anchors per
# policy), and per schedule RUN/ (figures/error_vs_staleness: error vs steps since the anchor,
# with 95% cluster-bootstrap intervals; metrics.csv; run.json); summary.{csv,md}.
# A synthetic trace and the bundled model's capture (14 steps; bundled.* runs and RESULTS/bundled/).
# 464 s on 2 shared CPU cores with the capture (README: times). Extra arguments go to dsgap run.
source "$(dirname "$0")/lib.sh"
exp_init refresh "$@"
exp_bundled_trace 14
exp_run
for run in {synthetic,bundled}.{a1,a2,a3,a6}; do
  "$DSGAP" plot "$WORK/$run"
  exp_collect $run "$RESULTS/$run"
  # one density: only the staleness figure says something here
  rm -f "$RESULTS/$run"/figures/error_vs_density.* "$RESULTS/$run"/figures/mass_distribution*.*
done

# error vs number of anchors, from summary.csv (means over the post-warm-up units, steps 2..13), per
# trace: anchors TRACE LABEL DEST
anchors() {
  local src=$1 label=$2 dest=$3 fig=$3/figures
  mkdir -p "$fig"
  awk -F, -v t="$src" 'NR > 1 && $2 == t && $8 != "dense" { print $7, $8, $10, $13, $14, $11 }' "$WORK/summary.csv" |
    sort -k2,2 -k1,1n > "$WORK/anchors.txt"
  {
    echo "n_anchors,reuse_interval,policy,units,rel_l2,cosine,rel_l1"
    awk '{ printf "%d,%d,%s,%d,%s,%s,%s\n", $1, 12 / $1, $2, $3, $4, $5, $6 }' "$WORK/anchors.txt"
  } > "$dest/anchors.csv"
  {
    echo "# Error vs number of anchors ($label)"
    echo
    echo "Mean over the 12 post-warm-up steps (2..13) of every (layer, head) cluster, density 0.15; anchors evenly spaced"
    echo "(an anchor step gives the dense output: its error is 0 and it costs a dense pass plus the metadata)."
    echo
    echo "| anchors | reuse interval | policy | units | E = mean rel_l2 | cosine |"
    echo "|--:|--:|:--|--:|--:|--:|"
    awk '{ printf "| %d | %d | %s | %d | %.3g | %.3g |\n", $1, 12 / $1, $2, $3, $4, $5 }' "$WORK/anchors.txt"
  } > "$dest/anchors.md"
  {
    echo "% anchors.tex: error vs number of anchors ($label), made by experiments/refresh.sh"
    echo "\\begin{tabular}{rrlrr}"
    echo "\\toprule"
    echo "anchors & reuse interval & policy & \$E\$ (mean rel.\\ \$L_2\$) & cosine \\\\"
    echo "\\midrule"
    awk '{ printf "%d & %d & \\texttt{%s} & %.3g & %.3g \\\\\n", $1, 12 / $1, $2, $4, $5 }' "$WORK/anchors.txt"
    echo "\\bottomrule"
    echo "\\end{tabular}"
  } > "$dest/anchors.tex"
  policies=$(awk '{ print $2 }' "$WORK/anchors.txt" | awk '!seen[$0]++' | tr '\n' ' ')
  {
    echo "# error_vs_anchors.dat: mean rel_l2 vs number of anchors, one block per policy (from summary.csv)"
    echo "# columns: n_anchors rel_l2"
    for p in $policies; do
      echo "# policy $p"
      awk -v p="$p" '$2 == p { print $1, $4 }' "$WORK/anchors.txt"
      printf '\n\n'
    done
  } > "$fig/error_vs_anchors.dat"
  {
    echo "# error_vs_anchors.gp: mean error vs number of anchors (12 reuse steps), $label"
    echo "# made by experiments/refresh.sh; re-render inside this directory: gnuplot error_vs_anchors.gp"
    echo "load 'style.gp'"
    echo "do for [fmt in \"pdf png\"] {"
    echo "if (fmt eq \"pdf\") { set terminal pdfcairo size 3.4in,2.4in font 'Liberation Sans,8' } else { set terminal pngcairo size 1020,720 font 'Liberation Sans,8' fontscale 3 linewidth 2 }"
    echo "set output 'error_vs_anchors.'.fmt"
    echo "set title 'error vs number of anchors ({/:Italic ρ} = 0.15, $label)'"
    echo "set xlabel 'anchors over 12 steps'"
    echo "set ylabel 'relative L_2 error (mean)'"
    echo "set logscale y"
    echo "set xtics (1, 2, 3, 6)"
    echo "set xrange [0.7:6.3]"
    echo "set key outside right top font ',7'"
    printf "plot "
    i=0
    for p in $policies; do
      [ $i -gt 0 ] && printf ", \\\\\n  "
      printf "'error_vs_anchors.dat' index %d using 1:2 with linespoints ls %d title '%s'" $i $((i + 1)) "$p"
      i=$((i + 1))
    done
    echo
    echo "unset output"
    echo "}"
  } > "$fig/error_vs_anchors.gp"
  exp_gnuplot "$fig" error_vs_anchors.gp
}
anchors synthetic "synthetic trace" "$RESULTS"
anchors bundled "the bundled model: one sample, cockatoo seed 1" "$RESULTS/bundled"

exp_readme "# Experiment 3: the refresh interval (synthetic trace; the bundled model in bundled*)

Source: **synthetic** — a structured synthetic trace (\`synth: grid=5x16x32 heads=4 layers=2 steps=14
head_dim=64 seed=1\`: 2560 tokens; local, frame, sink and diffuse heads), not a model capture.
Policies \`dense baseline mc-residual mc-gs mc-sparse\` (refresh=anchor) at density 0.15; warm-up 2
steps; four schedules with 1, 2, 3 and 6 evenly spaced anchors over the 12 reuse steps
(\`a1\`: anchor 1; \`a2\`: 1, 7; \`a3\`: 1, 5, 9; \`a6\`: 1, 3, 5, 7, 9, 11).
- Error vs steps since the anchor: \`synthetic.a1/figures/error_vs_staleness-rho*.png\` (one anchor, up to
  12 steps of reuse; 95% cluster-bootstrap intervals), and the same for every schedule.
- Error vs number of anchors: \`anchors.{md,tex,csv}\`, \`figures/error_vs_anchors.png\` (means over
  all post-warm-up units, anchor steps included with their zero error).
- The staleness figures' \"computed\" density counts the anchor steps, dense (density 1), with the
  reuse steps: 6 anchors over 12 steps at ρ 0.15 compute about half the pairs (0.504 on the synthetic
  trace).

Second source: **the bundled model** (\`data/model\`), its own attention captured by
\`exp_bundled_trace 14\` (experiments/lib.sh: class cockatoo, seed 1, 4096 tokens, layers 0/3/7 x 2
heads, 14 UniPC steps, CFG 3): the same schedules, \`bundled.aN/\` and \`bundled/anchors.*\`.
**One sample**: the bundled model's refresh numbers are this one capture's (intervals over its
(layer, head) clusters in the staleness figures; the anchors tables are plain means); how they vary
over prompts and seeds is not measured here (the 24-sample set, results/samples/, has 10-step
captures with one schedule)." "$RESULTS/synthetic.a1/run.json"

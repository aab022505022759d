#!/usr/bin/env bash
# kernel_speed.sh: experiment 5, attention speed vs density against dense and cuDNN ->
# results/kernel_speed/: speed.{csv,md,tex} and figures/speed_vs_density.{png,pdf,gp,dat}.
# Inputs: a kernel benchmark CSV (name,value,unit,device,date,commit) made on the H200 by
# scripts/device_all.sh with BENCHES="kernels torch" (its $OUT/kernels.csv, kept as
# results/bench/kernels-DATE.csv; dsgap-bench-kernels + scripts/gpu_bench_torch.py: our gather-KV
# sparse kernel, our dense flash kernel, cuDNN SDPA and FlexAttention block-sparse, bf16, d=128, 12 heads,
# N=32760, one device call; default the newest results/bench/kernels-*.csv, or KERNELS_CSV=FILE),
# and, when present, a `dsgap bench` CSV (the replay backend's dense, anchor and sparse passes;
# BENCH_CSV=FILE, or --measure to run `dsgap bench --device gpu` first on a GPU machine).
# Only tables and figures are made here (seconds, any machine); the timings are the CSVs'.
#   experiments/kernel_speed.sh [--measure] [--out DIR | --update-results]
# Speed against sequence length (issue 23): experiments/kernel_speed.sh --length CALLS.csv CUDNN.csv
# [--out DIR | --update-results]: the CSVs of scripts/device_all.sh's step `length` (dsgap callspeed and
# scripts/gpu_bench_torch.py --sweep, 1k..128k tokens, 12/24/40 heads) -> crossover.{csv,md,tex},
# length.csv, figures/speed_vs_length-PATH-PV.* (experiments/kernel_speed_length.sh), the two CSVs kept
# as callspeed.csv and cudnn_length.csv. CUDNN.csv `ours` (no cuDNN sweep measured): the same against
# our dense kernel, into DIR/length-ours-dense/ (callspeed.csv kept there). LENGTH_DIR=NAME: into
# DIR/NAME/ instead (a sweep on another card than the main tables').
# README.md keeps the hand-written text between <!-- length:begin --> and <!-- length:end --> when
# the speed-vs-density part rewrites it.
source "$(dirname "$0")/lib.sh"
if [ "${1:-}" = --length ]; then
  [ $# -ge 3 ] || { echo "kernel_speed.sh: --length CALLS.csv CUDNN.csv|ours [--out DIR | --update-results]" >&2; exit 2; }
  calls=$(realpath "$2") cudnn=$3
  [ "$cudnn" = ours ] || cudnn=$(realpath "$cudnn")
  shift 3
  exp_init kernel_speed "$@"
  # a sweep against our dense kernel, or LENGTH_DIR's (another card's): a folder of its own, so that
  # crossover.csv of DIR itself stays the main cuDNN one, which experiments/who_wins.sh reads
  sub=${LENGTH_DIR:-}
  [ "$cudnn" = ours ] && sub=${sub:-length-ours-dense}
  dest=$RESULTS${sub:+/$sub}
  mkdir -p "$dest"
  bash "$ROOT/experiments/kernel_speed_length.sh" "$calls" "$cudnn" "$dest"
  [ "$calls" -ef "$dest/callspeed.csv" ] || cp "$calls" "$dest/callspeed.csv"
  against="ours"
  if [ "$cudnn" != ours ]; then
    [ "$cudnn" -ef "$dest/cudnn_length.csv" ] || cp "$cudnn" "$dest/cudnn_length.csv"
    against=$(realpath --relative-to="$ROOT" "$dest/cudnn_length.csv")
  fi
  printf '\nRegenerate: `%sexperiments/kernel_speed.sh --length %s %s --update-results` (seconds, any machine); the timings: `STEPS=length scripts/device_all.sh` (`dsgap callspeed`, `scripts/gpu_bench_torch.py --sweep`). Made %s.\n' \
    "${LENGTH_DIR:+LENGTH_DIR=$LENGTH_DIR }" "$(realpath --relative-to="$ROOT" "$dest/callspeed.csv")" "$against" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$dest/crossover.md"
  exit 0
fi
measure=0
for a in "$@"; do [ "$a" = --measure ] && measure=1; done
exp_init kernel_speed "$@" # --out DIR / --update-results (--measure is left in EXP_ARGS, unused)
N=${TOKENS:-32760}
kcsv=${KERNELS_CSV:-$(ls "$ROOT"/results/bench/kernels-*.csv 2>/dev/null | sort | tail -1)}
[ -n "$kcsv" ] && [ -s "$kcsv" ] || { echo "kernel_speed.sh: no kernel CSV (results/bench/kernels-*.csv): run BENCHES=\"kernels torch\" scripts/device_all.sh on the H200 first" >&2; exit 1; }
bcsv=${BENCH_CSV:-}
if [ $measure = 1 ]; then
  mkdir -p "$WORK"
  bcsv=$WORK/bench.csv
  rm -f "$bcsv"
  "$DSGAP" bench --device "${DEVICE:-gpu}" --csv "$bcsv"
fi
fig=$RESULTS/figures
mkdir -p "$fig"
rm -f "$fig"/speed_vs_density.*
cp "$kcsv" "$RESULTS/kernels.csv"
[ -n "$bcsv" ] && [ -s "$bcsv" ] && cp "$bcsv" "$RESULTS/bench.csv"
val() { awk -F, -v n="$1" '$1 == n { v = $2 } END { print (v == "" ? "nan" : v) }' "$kcsv"; }
meta=$(awk -F, '$1 == "sparse_over_cudnn@0.15" || $1 == "dense_ms" { d = $4; t = $5; c = $6 } END { print d " | " t " | commit " c }' "$kcsv")
cudnn=$(val cudnn_ms) dense=$(val dense_ms)
densities=$(awk -F, '$1 ~ /^sparse_ms@/ { sub(/^sparse_ms@/, "", $1); print $1 }' "$kcsv" | sort -g -u)
{
  echo "density,keys,ideal_over_dense,sparse_ms,flex_ms,cudnn_ms,dense_ms,sparse_over_cudnn,flex_over_cudnn,sparse_over_dense,sparse_over_flex"
  for r in $densities; do
    # K = 128 ceil(rho N / 128) keys per group of 128 queries: the budget rule (README, Policies)
    awk -v r="$r" -v n="$N" -v s="$(val "sparse_ms@$r")" -v f="$(val "flex_ms@$r")" -v c="$cudnn" -v d="$dense" \
      -v soc="$(val "sparse_over_cudnn@$r")" -v foc="$(val "flex_over_cudnn@$r")" -v sod="$(val "sparse_over_dense@$r")" \
      -v sof="$(val "sparse_over_flex@$r")" 'BEGIN {
        k = 128 * int((r * n + 127) / 128); if (k > n) k = n
        printf "%s,%d,%.4g,%s,%s,%s,%s,%s,%s,%s,%s\n", r, k, n / k, s, f, c, d, soc, foc, sod, sof }'
  done
} > "$RESULTS/speed.csv"
{
  echo "# Experiment 5: attention speed vs density against dense and cuDNN"
  echo
  echo "Measured: $meta (from \`$(basename "$kcsv")\`). bf16, d=128, 12 heads, N=$N, non-causal; medians"
  echo "of timed launches (results/bench/BENCH.md). Speedups are cuDNN SDPA dense time (or our dense"
  echo "flash kernel's) over the sparse kernel's time; ideal = N / K, K = 128·⌈ρN/128⌉ keys per query group."
  echo
  echo "| ρ | keys K | ideal | ours sparse ms | Flex block-sparse ms | ours / cuDNN dense | Flex / cuDNN dense | ours / our dense | ours / Flex |"
  echo "|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  awk -F, "$EXP_AWK_SIG3"' NR > 1 { printf "| %s | %d | %sx | %s | %s | %sx | %sx | %sx | %sx |\n", $1, $2, sig3($3), sig3($4), sig3($5), sig3($8), sig3($9), sig3($10), sig3($11) }' "$RESULTS/speed.csv"
  echo
  echo "Dense: cuDNN SDPA $(exp_sig3 "$cudnn") ms, our flash kernel $(exp_sig3 "$dense") ms (dense_over_cudnn $(exp_sig3 "$(val dense_over_cudnn)")). Times and ratios to 3 significant figures (\`speed.csv\`: as measured)."
  if [ -s "$RESULTS/bench.csv" ]; then
    echo
    echo "Replay level (\`dsgap bench\`: the backend's passes, $(awk -F, 'NR == 1 { print $4 ", " $5 }' "$RESULTS/bench.csv")):"
    echo
    echo "| name | value | unit |"
    echo "|:--|--:|:--|"
    awk -F, "$EXP_AWK_SIG3"' { printf "| %s | %s | %s |\n", $1, sig3($2), $3 }' "$RESULTS/bench.csv"
  fi
} > "$RESULTS/speed.md"
{
  echo "% speed.tex: attention speed vs density ($meta), made by experiments/kernel_speed.sh"
  echo "\\begin{table*}[t]" # the page of a two-column paper (issue 49)
  echo "\\centering"
  echo "\\small"
  echo "\\caption{Attention speed against density: keys kept per query, the ideal speedup (1/\$\\rho\$), our sparse kernel's and FlexAttention's times and their speedups over cuDNN SDPA dense ($meta).}"
  echo "\\label{tab:speed}"
  echo "\\begin{tabular}{rrrrrrr}"
  echo "\\toprule"
  echo "\$\\rho\$ & keys & ideal & ours (ms) & Flex (ms) & ours/cuDNN & Flex/cuDNN \\\\"
  echo "\\midrule"
  awk -F, "$EXP_AWK_SIG3"' NR > 1 { printf "%s & %d & %s$\\times$ & %s & %s & %s$\\times$ & %s$\\times$ \\\\\n", $1, $2, sig3($3), sig3($4), sig3($5), sig3($8), sig3($9) }' "$RESULTS/speed.csv"
  echo "\\bottomrule"
  echo "\\end{tabular}"
  echo "\\end{table*}"
} > "$RESULTS/speed.tex"
{
  echo "# speed_vs_density.dat: speedup over cuDNN SDPA dense vs target density ($meta)"
  echo "# columns: density ideal sparse_over_cudnn flex_over_cudnn computed (computed = K / N, the keys a query group keeps)"
  awk -F, -v n="$N" 'NR > 1 { print $1, $3, $8, $9, sprintf("%.4g", $2 / n) }' "$RESULTS/speed.csv"
} > "$fig/speed_vs_density.dat"
cat > "$fig/speed_vs_density.gp" <<GP
# speed_vs_density.gp: attention speedup over cuDNN SDPA dense vs density ($meta)
# made by experiments/kernel_speed.sh; re-render inside this directory: gnuplot speed_vs_density.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 3.4in,2.9in font 'Liberation Sans,8' } else { set terminal pngcairo size 1020,870 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'speed_vs_density.'.fmt
set title 'attention speed vs density (H200, bf16, d=128, N=$N)'
set xtics (0.05, 0.1, 0.2, 0.3, 0.5)
set xlabel "target density {/:Italic ρ}\\ncomputed K/N: $(awk -F, -v n="$N" 'NR > 1 { printf "%s%.3g", (NR > 2 ? ", " : ""), $2 / n }' "$RESULTS/speed.csv")"
set ylabel 'speedup over cuDNN dense'
set logscale xy
set xrange [0.04:0.6]
set yrange [0.7:30]
set bmargin 9
set key at screen 0.5, screen 0.01 center bottom vertical Left reverse samplen 1.5 font ',7'
plot 'speed_vs_density.dat' using 1:2 with lines ls 9 dt 2 title 'ideal N/K', \\
  '' using 1:3 with linespoints ls 1 title 'ours: gather-KV sparse', \\
  '' using 1:4 with linespoints ls 2 title 'FlexAttention block-sparse', \\
  1 with lines ls 8 lw 1 dt 3 title 'cuDNN dense'
unset output
}
GP
exp_gnuplot "$fig" speed_vs_density.gp
secs=$(( $(date +%s) - T0 ))
# the length section (hand-written, about the --length outputs) survives the rewrite
length_sec=
[ -s "$RESULTS/README.md" ] && length_sec=$(awk '$0 == "<!-- length:begin -->" { on = 1 } on { print } $0 == "<!-- length:end -->" { on = 0 }' "$RESULTS/README.md")
{
  echo "# Experiment 5: attention speed vs density (H200)"
  echo
  echo "Timings from \`kernels.csv\` ($meta): made on the H200 by \`scripts/device_all.sh\` (our kernels,"
  echo "cuDNN SDPA and FlexAttention side by side in one device call; see \`results/bench/BENCH.md\`)."
  echo "\`speed.{md,tex,csv}\` and \`figures/speed_vs_density.png\`: speedup over cuDNN dense vs target density (the"
  echo "computed density K/N of each target in its x label)."
  [ -s "$RESULTS/bench.csv" ] && echo "\`bench.csv\`: \`dsgap bench\` (the replay backend's passes)."
  echo
  echo "Regenerate the tables and figure: \`experiments/kernel_speed.sh --update-results\` (seconds, any machine); the"
  echo "timings themselves: \`BENCHES=\"kernels torch\" scripts/device_all.sh\` on the H200 (and \`experiments/kernel_speed.sh --measure\` there"
  echo "for \`dsgap bench\`). Made $(date -u +%Y-%m-%dT%H:%M:%SZ) in $secs s, dsgap commit $("$DSGAP" --version | sed 's/.*commit \([0-9a-f+wip]*\).*/\1/')."
  if [ -n "$length_sec" ]; then echo; printf '%s\n' "$length_sec"; fi
} > "$RESULTS/README.md"
echo "kernel_speed: results in $RESULTS"

#!/usr/bin/env bash
# exp_closed_loop.sh: experiments/closed_loop.sh --cells DIR on a dsgap run folder made elsewhere
# (issue 19), here a synthetic one of the form of experiments/comparison.sh's fidelity/ folder
# (experiment.json, RUN/closed_loop.csv, RUN/run.json, summary.*; no cells, so no latents): 4 samples,
# dense, mc-sparse, est-block, pisa and a peer that cannot reach its density (radial, computed 0.75),
# at ρ 0.15 and 0.25. Checks: the tables (closed_loop.{md,tex,csv}, closed_loop-samples.{md,csv}),
# the figure and README.md land in --out; the intervals come from dsgap compare (closed_loop.csv's
# PSNR and interval are compare's); mc-sparse ahead of est-block in 3 of 4 samples and of pisa in 0 of
# 4 (as made); the paired difference mc-sparse − pisa is the mean of the per-sample differences and its
# interval excludes 0; radial "cannot reach ρ" and is not in the figure (one density whatever the
# target), a point more than 0.02 off its target is drawn hollow and named; the caption and README name
# the experiment that made the cells; an existing sheet.png is kept and called not remade, README
# describing it from its cells' rows (sheet-closed_loop.csv); the checkout's git status does not
# change; closed_loop_fig.sh refuses a per-sample csv; --sheet needs a run folder. Exit 77 (skipped)
# without gnuplot.
. "$(dirname "$0")/../lib.sh" exp-closed-loop
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
command -v gnuplot >/dev/null || { echo "skipped: no gnuplot"; exit 77; }
src=$DSGAP_SOURCE
state() { git -C "$src" status --porcelain --untracked-files=all 2>/dev/null; }
state > "$tmp/before"

# the cells: experiment "fidcheck", run m.w2, samples a..d seed 1
c=$tmp/cells
mkdir -p "$c/m.w2"
printf '{\n\t"format":\t"dsgap-experiment",\n\t"name":\t"fidcheck",\n\t"fingerprint":\t"0123456789abcdef",\n\t"config_path":\t"/x/experiments/fidcheck.ini",\n\t"kind":\t"closed-loop"\n}\n' > "$c/experiment.json"
printf '{\n\t"format":\t"dsgap-closed-loop",\n\t"date":\t"2026-01-02T03:04:05Z",\n\t"device":\t"gpu: Test GPU (sm_90)",\n\t"git_commit":\t"abcdef012345",\n\t"model":\t{\n\t\t"label":\t"toy",\n\t\t"path":\t"/x/model",\n\t\t"steps":\t10,\n\t\t"sampler":\t"unipc"\n\t},\n\t"schedule":\t{\n\t\t"label":\t"w2",\n\t\t"warmup":\t2,\n\t\t"dense_layers":\t[]\n\t},\n\t"timing":\t{\n\t\t"transformer_s":\t12.5\n\t}\n}\n' > "$c/m.w2/run.json"
{
  echo "prompt,seed,policy,density_target,density,psnr,ssim,psnr_min,ssim_min,transformer_s,total_s,speedup,rel_l2"
  # mc-sparse, est-block, pisa per sample (PSNR): est-block below mc-sparse in a, b, c; pisa above everywhere
  for row in "a 12 11 18" "b 13 12.5 17" "c 11 10 19" "d 10 14 16"; do
    set -- $row
    echo "$1,1,dense,1,1,inf,1,inf,1,0.1,0.1,1,0"
    for rho in 0.15 0.25; do
      up=$([ $rho = 0.25 ] && echo 2 || echo 0)
      d=$([ $rho = 0.15 ] && echo 0.325 || echo 0.4)
      echo "$1,1,mc-sparse,$rho,$d,$(awk "BEGIN { print $2 + $up }"),0.2,5,0.1,0.1,0.1,1,1"
      echo "$1,1,est-block,$rho,$d,$(awk "BEGIN { print $3 + $up }"),0.3,5,0.1,0.2,0.2,0.5,0.9"
      echo "$1,1,pisa,$rho,$d,$(awk "BEGIN { print $4 + $up }"),0.5,5,0.1,0.3,0.3,0.3,0.5"
      echo "$1,1,radial,$rho,0.75,30,0.9,20,0.5,0.1,0.1,1,0.1"
    done
  done
} > "$c/m.w2/closed_loop.csv"
echo "run,policy" > "$c/summary.csv"
echo "# summary" > "$c/summary.md"

out=$tmp/out
mkdir -p "$out" && echo "old sheet" > "$out/sheet.png" # a sheet of an earlier run, its cells' rows beside it
printf 'prompt,seed,policy,density_target,density,psnr\na,1,dense,1,1,inf\na,1,mc-sparse,0.15,0.325,9\nb,1,dense,1,1,inf\nb,1,mc-sparse,0.15,0.325,12\n' > "$out/sheet-closed_loop.csv"
bash "$src/experiments/closed_loop.sh" --out "$out" --cells "$c" > "$tmp/log" 2>&1
check "closed_loop.sh --cells DIR --out exits 0" test $? -eq 0 || tail -5 "$tmp/log"
check "tables, per-sample tables, figure and README in --out" bash -c "cd '$out' && test -s closed_loop.md -a -s closed_loop.tex \
  -a -s closed_loop.csv -a -s closed_loop-samples.md -a -s closed_loop-samples.csv -a -s figures/closed_loop.png -a -s README.md \
  -a -s m.w2/closed_loop.csv"
check "no dsgap run (the cells were made elsewhere)" bash -c "grep -q 'not run here' '$tmp/log' && ! grep -q 'dsgap run ' '$tmp/log'"
row() { awk -F, -v p="$1" -v t="$2" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $2 == p && $4 == t { print $c["'"$3"'"] }' "$out/closed_loop.csv"; }
check "mc-sparse ahead of est-block in 3 of 4 samples at 0.15" [ "$(row est-block 0.15 ahead)/$(row est-block 0.15 paired)" = 3/4 ]
check "mc-sparse ahead of pisa in 0 of 4 samples at 0.25" [ "$(row pisa 0.25 ahead)/$(row pisa 0.25 paired)" = 0/4 ]
# mc-sparse - pisa: -6 -4 -8 -6 -> mean -6; every resample's mean lies in [-8, -4]
check "mc-sparse - pisa: the mean of the per-sample differences, its interval below 0" \
  awk -v m="$(row pisa 0.15 dpsnr)" -v l="$(row pisa 0.15 dpsnr_lo)" -v h="$(row pisa 0.15 dpsnr_hi)" \
  'BEGIN { exit !(m == -6 && l >= -8 && h <= -4 && l <= m && m <= h && h < 0) }'
"$DSGAP" compare "$c/m.w2" --speed "$c/m.w2" --out "$tmp/cmp" > /dev/null 2>&1
check "PSNR and interval of mc-sparse at 0.15 are dsgap compare's" \
  [ "$(row mc-sparse 0.15 psnr),$(row mc-sparse 0.15 psnr_lo),$(row mc-sparse 0.15 psnr_hi)" = \
    "$(awk -F, '$1 == "mc-sparse" && $3 == 0.15 { print $8 "," $9 "," $10 }' "$tmp/cmp/comparison.csv")" ]
check "radial cannot reach ρ (closed_loop.md), is not drawn (figure: one density whatever the target)" bash -c "grep -q '\`radial\` | Radial Attention | 0.688 | cannot reach ρ' '$out/closed_loop.md' &&
  ! grep -q '# method radial' '$out/figures/closed_loop.dat' && grep -q 'radial (computed 0.688 at every ρ)' '$out/figures/closed_loop.gp'"
check "per sample: a row per sample, the best method of each (pisa in 4 of 4)" bash -c "grep -c '^| [abcd] seed 1 |' '$out/closed_loop-samples.md' | grep -qx 8 &&
  grep -q '^| best in | 0 of 4 | 0 of 4 | 4 of 4 |' '$out/closed_loop-samples.md'"
check "the caption and README name the experiment and device of the cells" bash -c "grep -q 'experiment fidcheck ([e]xperiments/fidcheck.ini' '$out/closed_loop.tex' &&
  grep -q 'Cells: experiment \`fidcheck\`.*gpu: Test GPU (sm_90), 2026-01-02T03:04:05Z, dsgap abcdef012345' '$out/README.md'"
check "4 samples in the titles" bash -c "grep -q '4 samples: 4 prompts × seed 1' '$out/closed_loop.md' && grep -q '4 samples: 4 prompts' '$out/figures/closed_loop.gp'"
check ".tex: no e-notation, no bare ρ or backticks" bash -c "! grep -qE '[0-9]e[-+][0-9]|ρ|\`' '$out/closed_loop.tex'"
if command -v pdflatex >/dev/null && kpsewhich booktabs.sty >/dev/null 2>&1; then
  cp "$out/closed_loop.tex" "$tmp/t.tex"
  printf '%s\n' '\documentclass[twocolumn]{article}' '\usepackage[T1]{fontenc}' '\usepackage{booktabs}' \
    '\usepackage[textwidth=7in,columnsep=0.33in,textheight=9in]{geometry}' '\begin{document}' '\input{t}' '\end{document}' > "$tmp/d.tex"
  (cd "$tmp" && pdflatex -interaction=nonstopmode -halt-on-error d.tex > d.out 2>&1)
  check "closed_loop.tex compiles (two-column article, booktabs)" test $? -eq 0
  check "closed_loop.tex fits the page of a two-column paper (no overfull box)" bash -c "! grep -q 'Overfull .hbox' '$tmp/d.log'"
fi
check "an earlier sheet.png is kept and called not remade" bash -c "grep -qx 'old sheet' '$out/sheet.png' && grep -q 'not remade by this run' '$out/README.md'"
check "README: what the kept sheet shows (its own cells' prompts, not the table's), a row's PSNR the mean of its shown frames" \
  grep -q 'sheet.png`: 8 evenly spaced frames of the dense run and mc-sparse at ρ 0.15 for 2 prompts with seed 1 (a, b).*the mean over its 8 shown frames' "$out/README.md"
# the figure's rule, the same for every method: est-block at 0.15 computed 0.2 (more than 0.02 off, as
# mc-sparse at 0.1 on 4096 tokens) is drawn hollow with a double dagger and named, not left out
awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i } NR > 1 && $c["policy"] == "est-block" && $c["density_target"] == 0.15 { $c["sparse_density"] = 0.2 } 1' \
  "$out/closed_loop.csv" > "$tmp/off.csv"
bash "$src/experiments/closed_loop_fig.sh" "$tmp/off" title "$tmp/off.csv" > /dev/null 2>&1
off_ok() { awk '/^# method/ { m = $3 } !/^#/ && NF { n[m, $10]++ } END { exit !(n["est-block", 1] == 1 && n["est-block", 0] == 1 && n["mc-sparse", 1] == 0) }' "$tmp/off/closed_loop.dat" &&
  grep -q 'hollow markers with ‡.*\\nρ 0.15: est-block (computed 0.200)' "$tmp/off/closed_loop.gp" && test -s "$tmp/off/closed_loop.png"; }
check "closed_loop_fig.sh: a point more than 0.02 off its target is drawn hollow with ‡ and named, whatever the method" off_ok
bash "$src/experiments/closed_loop_fig.sh" "$tmp/fig" title "$c/m.w2/closed_loop.csv" > /dev/null 2>&1
check "closed_loop_fig.sh refuses a per-sample closed_loop.csv" test $? -eq 2
bash "$src/experiments/closed_loop.sh" --out "$tmp/out2" --cells "$c" --sheet "$tmp/nowhere" > /dev/null 2>&1
check "--sheet DIR without cells/ is refused" test $? -eq 2
state > "$tmp/after"
check "git status unchanged" cmp -s "$tmp/before" "$tmp/after"
finish

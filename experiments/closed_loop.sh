#!/usr/bin/env bash
# closed_loop.sh: experiment 4, the closed loop (experiments/closed_loop.ini) -> results/closed_loop/
# (with --update-results; else --out DIR, lib.sh):
#   closed_loop.{md,tex,csv}  per method and target density: PSNR and SSIM of the final frames against
#       the dense run of the same prompt and noise, means over the samples (prompt x seed) with 95%
#       percentile bootstrap intervals over them (dsgap compare: src/analysis/bootstrap.c, one
#       replicate = the samples drawn with replacement, the same draw for every method); the computed
#       density (all calls, and past the warm-up: a peer more than 0.02 from its target "cannot reach
#       ρ" and gets no fidelity); the transformer speedup of the run's own times; and REF (mc-sparse)
#       against every other method: the paired PSNR difference REF − method with its interval (the
#       same bootstrap on the per-sample differences) and in how many samples REF's PSNR is higher.
#       Densities side by side, 3 significant figures.
#   closed_loop-samples.{md,csv}  every sample's PSNR per method and density, REF − method per
#       sample, the best method of each sample
#   figures/closed_loop.{png,pdf}  experiments/closed_loop_fig.sh: PSNR and SSIM per method against
#       the target density, 95% intervals over the samples; a point more than 0.02 off its target
#       hollow with a double dagger, whatever the method
#   RUN/{closed_loop.csv,run.json} (every sample), summary.{csv,md} (dsgap run's), README.md
#   sheet.{png,pdf}  contact sheet (pixel-space model: the latents are the frames): per prompt of
#       seed 1 the dense run, REF and the best other method at ρ 0.15, 8 frames each, every tile with
#       its PSNR; made from the latents of the cells (or --sheet DIR's), with sheet-run.json and
#       sheet-closed_loop.csv (the sheet cells' own rows) beside it; without latents an existing
#       sheet is kept and README.md says where it is from.
# Needs the bundled model in data/model (a cell is one whole generate run: about a minute on 2 CPU
# cores, well under a second on an H200 with --device gpu: the 44 cells of closed_loop.ini took 17 s
# there). Extra arguments go to dsgap run (e.g. --workers 2, --gpus all, --device gpu).
#   --cells DIR   a dsgap run folder made elsewhere (experiment.json, RUN/closed_loop.csv, RUN/run.json):
#                 this experiment's run from the GPU machine, or any closed-loop experiment of the same
#                 form, e.g. the fidelity/ folder of experiments/comparison.sh's pack (tar xzf
#                 comparison.tar.gz): the tables, figure and README name the experiment that made them
#   --sheet DIR   a dsgap run folder whose cells/RUN/PROMPT.s1.POLICY@0.15/latents.h5 the contact sheet
#                 is drawn from (default: the cells' own folder; a pack has no latents)
# EXP_INI=FILE runs another experiment file of the same form; CLOSED_LOOP_REF=POLICY compares the
# others against POLICY instead of mc-sparse.
source "$(dirname "$0")/lib.sh"
sheet_dir=""
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --sheet) [ $# -ge 2 ] && [ -d "$2/cells" ] || { echo "closed_loop.sh: --sheet needs a dsgap run folder (with cells/)" >&2; exit 2; }
      sheet_dir=$(cd "$2" && pwd); shift ;;
    --sheet=*) sheet_dir=$(cd "${1#--sheet=}" && pwd) ;;
    *) args+=("$1") ;;
  esac
  shift
done
exp_init closed_loop ${args[@]+"${args[@]}"}
exp_run
REF=${CLOSED_LOOP_REF:-mc-sparse}
runs=()
for d in "$WORK"/*/closed_loop.csv; do [ -e "$d" ] && runs+=("$(dirname "$d")"); done
[ ${#runs[@]} -gt 0 ] || { echo "closed_loop.sh: no merged run (RUN/closed_loop.csv) in $WORK" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/closed_loop.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# which experiment made the cells (experiment.json, the first run's run.json)
jstr() { sed -n "s/^[[:space:]]*\"$1\":[[:space:]]*\"\(.*\)\",*\$/\1/p" "$2" | head -1; }
xname=$(jstr name "$WORK/experiment.json")
xconf=$(jstr config_path "$WORK/experiment.json" | sed 's|.*/experiments/|experiments/|')
xfp=$(jstr fingerprint "$WORK/experiment.json")
rj=${runs[0]}/run.json
rdate=$(jstr date "$rj") rdev=$(jstr device "$rj") rcommit=$(jstr git_commit "$rj")
mlabel=$(jstr label "$rj")
model=$(jstr path "$rj")
steps=$(sed -n 's/^[[:space:]]*"steps":[[:space:]]*\([0-9]*\).*/\1/p' "$rj" | head -1)
warm=$(sed -n 's/^[[:space:]]*"warmup":[[:space:]]*\([0-9]*\).*/\1/p' "$rj" | head -1)
sampler=$(jstr sampler "$rj")

rm -rf "${RESULTS:?}"/*/ "${RESULTS:?}"/figures
rm -f "$RESULTS"/closed_loop.{csv,md,tex} "$RESULTS"/closed_loop-samples.{csv,md}

# per run: dsgap compare on the samples (marginal intervals) and on REF's per-sample differences
# (paired intervals: a method "d~P" whose PSNR is REF's minus P's in the same sample)
exp_say "intervals over the samples (dsgap compare, 1000 replicates) for ${#runs[@]} run(s)"
: > "$tmp/stats.csv"
: > "$tmp/samples.csv"
for r in "${runs[@]}"; do
  run=$(basename "$r")
  mkdir -p "$RESULTS/$run" "$tmp/$run/diff"
  cp "$r/closed_loop.csv" "$r/run.json" "$RESULTS/$run/"
  "$DSGAP" compare "$r" --speed "$r" --out "$tmp/$run/marg" --title "closed loop $run" > /dev/null
  cp "$r/run.json" "$tmp/$run/diff/"
  awk -F, -v ref="$REF" '
    NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i
      for (k in need) if (!(need[k] in c)) { print "closed_loop.sh: no column " need[k] > "/dev/stderr"; exit 2 }
      print "prompt,seed,policy,density_target,density,psnr,ssim,transformer_s,rel_l2"; next }
    { n++; P[n] = $c["prompt"]; S[n] = $c["seed"]; Q[n] = $c["policy"]; R[n] = $c["density_target"]
      D[n] = $c["density"]; X[n] = $c["psnr"]; Y[n] = $c["ssim"]; T[n] = $c["transformer_s"]; L[n] = $c["rel_l2"]
      if (Q[n] == ref) { rx[P[n], S[n], R[n]] = X[n]; ry[P[n], S[n], R[n]] = Y[n]; rl[P[n], S[n], R[n]] = L[n] } }
    END { for (i = 1; i <= n; i++) {
        if (Q[i] == "dense") { print P[i] "," S[i] ",dense," R[i] "," D[i] ",inf,1," T[i] ",0"; continue }
        k = P[i] SUBSEP S[i] SUBSEP R[i]
        if (Q[i] == ref || !(k in rx) || X[i] == "inf" || rx[k] == "inf") continue
        printf "%s,%s,d~%s,%s,%s,%.9g,%.9g,%s,%.9g\n", P[i], S[i], Q[i], R[i], D[i], rx[k] - X[i], ry[k] - Y[i], T[i], L[i] - rl[k] } }
    BEGIN { split("prompt seed policy density_target density psnr ssim transformer_s rel_l2", need, " ") }' \
    "$r/closed_loop.csv" > "$tmp/$run/diff/closed_loop.csv"
  if grep -q '^[^,]*,[^,]*,d~' "$tmp/$run/diff/closed_loop.csv"; then
    "$DSGAP" compare "$tmp/$run/diff" --speed "$tmp/$run/diff" --out "$tmp/$run/dout" --title "differences $run" > /dev/null
  else # no REF in this run: no paired columns
    mkdir -p "$tmp/$run/dout" && echo "policy" > "$tmp/$run/dout/comparison.csv"
  fi
  # the stats rows of this run: compare's columns, then REF − method and the sign counts
  awk -F, -v OFS=, -v run="$run" -v ref="$REF" '
    FILENAME == ARGV[1] { if (FNR > 1 && $1 ~ /^d~/) { p = substr($1, 3); dm[p, $3] = $8; dl[p, $3] = $9; dh[p, $3] = $10 }; next }
    FILENAME == ARGV[2] { if (FNR == 1) { for (i = 1; i <= NF; i++) c[$i] = i; next }
      q = $c["policy"]; if (q == "dense") next
      k = $c["prompt"] SUBSEP $c["seed"] SUBSEP $c["density_target"]
      x[q, k] = $c["psnr"]; if (q == ref) rx[k] = $c["psnr"]; keys[q, k] = 1; next }
    FNR == 1 { if (!hdr++) print "run," $0 ",dpsnr,dpsnr_lo,dpsnr_hi,ahead,paired"; next }
    { p = $1; t = $3; a = 0; m = 0
      if (p != "dense" && p != ref) for (kk in keys) { split(kk, s, SUBSEP); if (s[1] != p) continue
        k = s[2] SUBSEP s[3] SUBSEP s[4]; if (s[4] != t || !(k in rx)) continue
        m++; if (x[p, k] == "inf") continue; if (rx[k] == "inf" || rx[k] + 0 > x[p, k] + 0) a++ }
      d = (p, t) in dm ? dm[p, t] OFS dl[p, t] OFS dh[p, t] : "nan,nan,nan"
      print run, $0, d, (m ? a : "nan"), (m ? m : "nan") }' \
    "$tmp/$run/dout/comparison.csv" "$r/closed_loop.csv" "$tmp/$run/marg/comparison.csv" >> "$tmp/stats.csv"
  # every sample: REF − method, the best reached method of the sample at each density
  awk -F, -v OFS=, -v run="$run" -v ref="$REF" -v hdr="$([ -s "$tmp/samples.csv" ] && echo 1)" '
    FILENAME == ARGV[1] { if (FNR > 1) ok[$1, $3] = $7; next }
    FNR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { n++; P[n] = $c["prompt"]; S[n] = $c["seed"]; Q[n] = $c["policy"]; R[n] = $c["density_target"]
      D[n] = $c["density"]; X[n] = $c["psnr"]; Y[n] = $c["ssim"]; L[n] = ("rel_l2" in c) ? $c["rel_l2"] : "nan"
      k = P[n] SUBSEP S[n] SUBSEP R[n]
      if (Q[n] == ref) rx[k] = X[n]
      if (Q[n] != "dense" && ok[Q[n], R[n]] == 1 && X[n] != "inf" && (!(k in best) || X[n] + 0 > bx[k])) { best[k] = Q[n]; bx[k] = X[n] + 0 } }
    END { if (!hdr) print "run,prompt,seed,policy,density_target,density,psnr,ssim,rel_l2,reached,dpsnr,best"
      for (i = 1; i <= n; i++) { k = P[i] SUBSEP S[i] SUBSEP R[i]
        d = (Q[i] != "dense" && Q[i] != ref && (k in rx) && X[i] != "inf" && rx[k] != "inf") ? sprintf("%.6g", rx[k] - X[i]) : "nan"
        print run, P[i], S[i], Q[i], R[i], D[i], X[i], Y[i], L[i], (Q[i] == "dense" ? 1 : ok[Q[i], R[i]] + 0), d, (best[k] == Q[i] ? 1 : 0) } }' \
    "$tmp/$run/marg/comparison.csv" "$r/closed_loop.csv" >> "$tmp/samples.csv"
done
# one header per file (the runs' rows appended)
awk 'NR > 1 && /^run,policy,/ { next } { print }' "$tmp/stats.csv" > "$RESULTS/closed_loop.csv"
cp "$tmp/samples.csv" "$RESULTS/closed_loop-samples.csv"

# samples, prompts and seeds of the first run; the experiment's description for the captions
read -r nsamp nprompt seeds < <(awk -F, -v run="$(basename "${runs[0]}")" 'NR > 1 && $1 == run && $4 == "dense" { n++; p[$2] = 1; if (!($3 in s)) { s[$3] = 1; sl = sl (sl ? "," : "") $3 } }
  END { np = 0; for (k in p) np++; print n + 0, np, sl }' "$RESULTS/closed_loop-samples.csv")
samples_txt="$nsamp samples: $nprompt prompts × seed$( [ "${seeds//,/}" = "$seeds" ] || echo s) ${seeds//,/, }"
made_by="experiment \`$xname\` (\`$xconf\`, fingerprint $xfp) run on $rdev, $rdate, dsgap $rcommit"

# the tables
fmt='function f3(x,   a) { if (x == "" || x == "nan" || x == "-nan") return "—"; if (x == "inf") return "inf"
  if (x == "-inf") return "-inf"; x += 0; a = x < 0 ? -x : x
  if (a >= 100) return sprintf("%.0f", x); if (a >= 10) return sprintf("%.1f", x); if (a >= 1) return sprintf("%.2f", x)
  if (a >= 0.1 || a == 0) return sprintf("%.3f", x); if (a >= 0.01) return sprintf("%.4f", x); return sprintf("%.5f", x) }
function ci(l, h) { return "[" f3(l) ", " f3(h) "]" }
function tex(s) { gsub(/`/, "", s); gsub(/×/, "$\\times$", s); gsub(/–/, "--", s); gsub(/_/, "\\_", s); gsub(/%/, "\\%", s); gsub(/&/, "\\&", s); gsub(/#/, "\\#", s); return s }
function m(x) { x = f3(x); return x == "—" ? "---" : x == "inf" ? "$\\infty$" : "$" x "$" }
function load(   i) { if (FNR == 1) { for (i = 1; i <= NF; i++) c[$i] = i; return }
  r = $c["run"]; if (!(r in rseen)) { rseen[r] = 1; runs[++nr] = r }
  p = $c["policy"]; t = $c["density_target"]; if (p == "dense") return
  if (!((r, p) in pseen)) { pseen[r, p] = 1; pol[r, ++np[r]] = p; src[r, p] = $c["source"] }
  if (!((r, t) in tseen)) { tseen[r, t] = 1; rho[r, ++nt[r]] = t }
  for (i = 1; i <= NF; i++) v[r, p, t, i] = $i
  have[r, p, t] = 1 }
function V(r, p, t, name) { return v[r, p, t, c[name]] }
function dens(r, t,   j, p, lo, hi, x) { lo = 2; hi = -1
  for (j = 1; j <= np[r]; j++) { p = pol[r, j]; if (!have[r, p, t] || V(r, p, t, "reached") != 1) continue
    x = V(r, p, t, "sparse_density") + 0; lo = x < lo ? x : lo; hi = x > hi ? x : hi }
  return hi < 0 ? "" : sprintf(lo == hi || sprintf("%.3f", lo) == sprintf("%.3f", hi) ? "%.3f" : "%.3f–%.3f", lo, hi) }
function sortrho(r,   i, j, x) { for (i = 2; i <= nt[r]; i++) for (j = i; j > 1 && rho[r, j] + 0 < rho[r, j - 1] + 0; j--) { x = rho[r, j]; rho[r, j] = rho[r, j - 1]; rho[r, j - 1] = x } }'
awk -F, -v ref="$REF" -v made="$made_by" -v dev="$rdev" -v samp="$samples_txt" -v steps="$steps" -v warm="$warm" -v sampler="$sampler" \
  -v model="$mlabel" "$fmt"'
  { load() }
  END {
    printf "# Closed loop: end-to-end fidelity of every method at matched density (%s model, %s)\n\n", model, samp
    printf "Cells: %s. Each sample is generated densely and with each method inside every self-attention call of the denoising loop from the same noise (%s %s steps, the first %s dense: the warm-up). ", made, steps, sampler, warm
    printf "PSNR (dB) and SSIM of the final frames against the dense run of the same sample (per frame, averaged over its frames), means over the samples with 95%% percentile bootstrap intervals over them (`dsgap compare`: 1000 replicates, seed 1, the same resample for every method; each sample is one value here, so the two-level bootstrap of src/analysis/bootstrap.c has only its sample level). "
    printf "Density: computed pairs / N² over the calls past the warm-up (with the warm-up: `RUN/closed_loop.csv`); a peer more than 0.02 from its target cannot reach ρ and gets no fidelity (its rows: `closed_loop-samples.csv`). "
    printf "%s − method: the mean over the samples of the paired PSNR difference, with the same bootstrap over the samples; **%s ahead**: the samples in which %s'"'"'s PSNR is higher. Per sample: `closed_loop-samples.md`.\n\n", ref, ref, ref
    for (ri = 1; ri <= nr; ri++) { r = runs[ri]; sortrho(r)
      if (nr > 1) printf "## Run %s\n\n", r
      # findings
      printf "%s Signs over the samples\n\n", (nr > 1 ? "###" : "##")
      for (j = 1; j <= nt[r]; j++) { t = rho[r, j]; if (!have[r, ref, t]) continue
        line = ""; below = above = tot = 0
        for (i = 1; i <= np[r]; i++) { p = pol[r, i]; if (p == ref || !have[r, p, t] || V(r, p, t, "reached") != 1) continue
          tot++; if (V(r, p, t, "dpsnr_hi") != "nan" && V(r, p, t, "dpsnr_hi") + 0 < 0) below++
          if (V(r, p, t, "dpsnr_lo") != "nan" && V(r, p, t, "dpsnr_lo") + 0 > 0) above++
          line = line sprintf("%s`%s` %s %s, %s of %s", line == "" ? "" : "; ", p, f3(V(r, p, t, "dpsnr")), ci(V(r, p, t, "dpsnr_lo"), V(r, p, t, "dpsnr_hi")), V(r, p, t, "ahead"), V(r, p, t, "paired")) }
        sdr = V(r, ref, t, "sparse_density") + 0; off = sdr - t; off = off < 0 ? -off : off
        printf "- ρ %s (computed %s%s): `%s` %s dB %s. %s − method, paired (dB), and the samples in which `%s` is ahead: %s. %d of the %d other methods that reach ρ are ahead of `%s` with the interval of the difference below 0; `%s` is ahead of %d with it above 0.\n", t, f3(V(r, ref, t, "sparse_density")), (off > 0.02 ? ": above the target by more than the 0.02 that flags a peer" : ""), ref, f3(V(r, ref, t, "psnr")), ci(V(r, ref, t, "psnr_lo"), V(r, ref, t, "psnr_hi")), ref, ref, line == "" ? "no other method" : line, below, tot, ref, ref, above }
      printf "\n"
      # PSNR
      printf "%s PSNR (dB), densities side by side\n\n| method | source |", (nr > 1 ? "###" : "##")
      for (j = 1; j <= nt[r]; j++) printf " ρ %s: density | PSNR | 95%% CI |", rho[r, j]
      printf "\n|:--|:--|"; for (j = 1; j <= nt[r]; j++) printf "--:|--:|:-:|"; printf "\n"
      for (i = 1; i <= np[r]; i++) { p = pol[r, i]; printf "| `%s` | %s |", p, src[r, p]
        for (j = 1; j <= nt[r]; j++) { t = rho[r, j]
          if (!have[r, p, t]) printf " | | |"
          else if (V(r, p, t, "reached") != 1) printf " %s | cannot reach ρ | |", f3(V(r, p, t, "sparse_density"))
          else printf " %s | %s | %s |", f3(V(r, p, t, "sparse_density")), f3(V(r, p, t, "psnr")), ci(V(r, p, t, "psnr_lo"), V(r, p, t, "psnr_hi")) }
        printf "\n" }
      printf "\n%s SSIM\n\n| method |", (nr > 1 ? "###" : "##")
      for (j = 1; j <= nt[r]; j++) printf " ρ %s: SSIM | 95%% CI |", rho[r, j]
      printf "\n|:--|"; for (j = 1; j <= nt[r]; j++) printf "--:|:-:|"; printf "\n"
      for (i = 1; i <= np[r]; i++) { p = pol[r, i]; printf "| `%s` |", p
        for (j = 1; j <= nt[r]; j++) { t = rho[r, j]
          if (!have[r, p, t]) printf " | |"
          else if (V(r, p, t, "reached") != 1) printf " cannot reach ρ | |"
          else printf " %s | %s |", f3(V(r, p, t, "ssim")), ci(V(r, p, t, "ssim_lo"), V(r, p, t, "ssim_hi")) }
        printf "\n" }
      if (have[r, ref, rho[r, 1]] || have[r, ref, rho[r, nt[r]]]) {
        printf "\n%s `%s` against each method: PSNR difference and sign over the samples\n\n| method |", (nr > 1 ? "###" : "##"), ref
        for (j = 1; j <= nt[r]; j++) printf " ρ %s: %s − method (dB) | 95%% CI | %s ahead |", rho[r, j], ref, ref
        printf "\n|:--|"; for (j = 1; j <= nt[r]; j++) printf "--:|:-:|--:|"; printf "\n"
        for (i = 1; i <= np[r]; i++) { p = pol[r, i]; if (p == ref) continue; printf "| `%s` |", p
          for (j = 1; j <= nt[r]; j++) { t = rho[r, j]
            if (!have[r, p, t] || !have[r, ref, t]) printf " | | |"
            else if (V(r, p, t, "reached") != 1) printf " cannot reach ρ | | |"
            else printf " %s | %s | %s of %s |", f3(V(r, p, t, "dpsnr")), ci(V(r, p, t, "dpsnr_lo"), V(r, p, t, "dpsnr_hi")), V(r, p, t, "ahead"), V(r, p, t, "paired") }
          printf "\n" } }
      printf "\n%s Transformer speedup over dense (the run'"'"'s own times)\n\n", (nr > 1 ? "###" : "##")
      printf "Mean dense transformer time / the method'"'"'s, over the samples, on the device that ran the cells (%s); not a speed measurement (the cells ran side by side, and at 4096 tokens a GPU run is launch-bound: the speed runs are `speed-*.md` and `results/comparison/`).\n\n| method |", dev
      for (j = 1; j <= nt[r]; j++) printf " ρ %s |", rho[r, j]
      printf "\n|:--|"; for (j = 1; j <= nt[r]; j++) printf "--:|"; printf "\n"
      for (i = 1; i <= np[r]; i++) { p = pol[r, i]; printf "| `%s` |", p
        for (j = 1; j <= nt[r]; j++) { t = rho[r, j]; printf " %s |", have[r, p, t] ? f3(V(r, p, t, "speedup")) "×" : "" }
        printf "\n" }
      printf "\n" } }' "$RESULTS/closed_loop.csv" > "$RESULTS/closed_loop.md"

awk -F, -v ref="$REF" -v made="$made_by" -v samp="$samples_txt" -v model="$mlabel" -v commit="$("$DSGAP" --version | sed 's/.*commit \([0-9a-f+wip]*\).*/\1/')" "$fmt"'
  { load() }
  END { printf "%% closed_loop.tex: made by experiments/closed_loop.sh (dsgap %s) from dsgap compare'"'"'s intervals. Needs \\usepackage{booktabs}.\n", commit
    for (ri = 1; ri <= nr; ri++) { r = runs[ri]; sortrho(r)
      printf "\\begin{table*}[t]\n\\centering\n\\small\n\\caption{Closed loop, %s model, %s%s: PSNR (dB) of the final frames against the dense run of the same sample, means with 95\\%% percentile bootstrap intervals over the samples under them (1000 replicates, seed 1, paired across methods; $n=%d$ samples per row), at each target density $\\rho$ (in brackets the computed density past the warm-up). Ahead: the samples in which \\texttt{%s}'"'"'s PSNR is higher than the method'"'"'s. Cells: %s.}\n", tex(model), tex(samp), (nr > 1 ? ", run " tex(r) : ""), V(r, pol[r, 1], rho[r, 1], "samples"), tex(ref), tex(made)
      printf "\\label{tab:closed-loop%s}\n\\begin{tabular}{ll", (nr > 1 ? "-" r : "")
      for (j = 1; j <= nt[r]; j++) printf "rr" # the interval under the PSNR: the page of a two-column paper (issue 49)
      printf "}\n\\toprule\n &"
      for (j = 1; j <= nt[r]; j++) printf " & \\multicolumn{2}{c}{$\\rho=%s$ (%s)}", rho[r, j], dens(r, rho[r, j])
      printf " \\\\\n"
      for (j = 1; j <= nt[r]; j++) printf "\\cmidrule(lr){%d-%d}", 2 * j + 1, 2 * j + 2
      printf "\nMethod & Source"
      for (j = 1; j <= nt[r]; j++) printf " & PSNR & ahead"
      printf " \\\\\n\\midrule\n"
      for (i = 1; i <= np[r]; i++) { p = pol[r, i]; printf "\\texttt{%s} & %s", tex(p), tex(src[r, p])
        for (j = 1; j <= nt[r]; j++) { t = rho[r, j]
          if (!have[r, p, t]) printf " & &"
          else if (V(r, p, t, "reached") != 1) printf " & \\multicolumn{2}{l}{cannot reach $\\rho$ (%s)}", f3(V(r, p, t, "sparse_density"))
          else printf " & \\begin{tabular}[t]{@{}r@{}}%s\\\\{\\scriptsize$[%s, %s]$}\\end{tabular} & %s", m(V(r, p, t, "psnr")), f3(V(r, p, t, "psnr_lo")), f3(V(r, p, t, "psnr_hi")), (p == ref ? "---" : V(r, p, t, "ahead") " of " V(r, p, t, "paired")) }
        printf " \\\\\n" }
      printf "\\bottomrule\n\\end{tabular}\n\\end{table*}\n" } }' "$RESULTS/closed_loop.csv" > "$RESULTS/closed_loop.tex"

# every sample: a table per density, samples as rows, the methods that reach ρ as columns
awk -F, -v ref="$REF" "$fmt"'
  FILENAME == ARGV[1] { load(); next }
  FNR == 1 { for (i = 1; i <= NF; i++) s[$i] = i; next }
  { r = $s["run"]; k = $s["prompt"] " seed " $s["seed"]; if (!((r, k) in kseen)) { kseen[r, k] = 1; smp[r, ++ns[r]] = k }
    x[r, k, $s["policy"], $s["density_target"]] = $s["psnr"]; if ($s["best"] == 1) { bst[r, k, $s["density_target"]] = $s["policy"]; nb[r, $s["policy"], $s["density_target"]]++ } }
  END { printf "# Closed loop, every sample: PSNR (dB) of the final frames against the dense run of the same sample\n\n"
    printf "One row per sample (prompt, seed), one column per method that reaches ρ (closed_loop.md: the means and intervals); **bold**: the best method of the sample; last rows: the mean over the samples, in how many samples `%s` is ahead of the column'"'"'s method, and in how many the method is the best.\n", ref
    for (ri = 1; ri <= nr; ri++) { r = runs[ri]; sortrho(r)
      for (j = 1; j <= nt[r]; j++) { t = rho[r, j]; nc = 0
        for (i = 1; i <= np[r]; i++) { p = pol[r, i]; if (have[r, p, t] && V(r, p, t, "reached") == 1) col[++nc] = p }
        printf "\n## %sρ %s (computed %s)\n\n| sample |", (nr > 1 ? "run " r ", " : ""), t, dens(r, t)
        for (i = 1; i <= nc; i++) printf " `%s` |", col[i]
        printf "\n|:--|"; for (i = 1; i <= nc; i++) printf "--:|"; printf "\n"
        for (q = 1; q <= ns[r]; q++) { k = smp[r, q]; printf "| %s |", k
          for (i = 1; i <= nc; i++) { y = f3(x[r, k, col[i], t]); printf " %s |", bst[r, k, t] == col[i] ? "**" y "**" : y }
          printf "\n" }
        printf "| mean [95%% CI] |"; for (i = 1; i <= nc; i++) printf " %s %s |", f3(V(r, col[i], t, "psnr")), ci(V(r, col[i], t, "psnr_lo"), V(r, col[i], t, "psnr_hi"))
        printf "\n| `%s` ahead |", ref; for (i = 1; i <= nc; i++) printf " %s |", col[i] == ref ? "—" : V(r, col[i], t, "ahead") " of " V(r, col[i], t, "paired")
        printf "\n| best in |"; for (i = 1; i <= nc; i++) printf " %d of %d |", nb[r, col[i], t], ns[r]
        printf "\n"
        un = ""; for (i = 1; i <= np[r]; i++) { p = pol[r, i]; if (have[r, p, t] && V(r, p, t, "reached") != 1) un = un (un ? ", " : "") "`" p "` (computed " f3(V(r, p, t, "sparse_density")) ")" }
        if (un) printf "\nCannot reach ρ %s (not shown): %s.\n", t, un } } }' \
  "$RESULTS/closed_loop.csv" "$RESULTS/closed_loop-samples.csv" > "$RESULTS/closed_loop-samples.md"

# figure: PSNR and SSIM per method against the target density, 95% intervals over the samples
exp_say "closed-loop figure"
for r in "${runs[@]}"; do
  run=$(basename "$r")
  name=closed_loop; [ ${#runs[@]} -eq 1 ] || name=closed_loop-$run
  bash "$ROOT/experiments/closed_loop_fig.sh" "$RESULTS/figures" "$mlabel model, $samples_txt; cells: experiment $xname ($xconf) on ${rdev%% (*}, ${rdate%%T*}" \
    "$RESULTS/closed_loop.csv" "$run" "$name" "$REF"
done

# contact sheet: per prompt of seed 1, the dense run, REF and the best other method at 0.15
sheet_from=${sheet_dir:-$WORK}
best=$(awk -F, -v run="$(basename "${runs[0]}")" -v ref="$REF" 'NR > 1 && $1 == run && $4 == 0.15 && $8 == 1 && $2 != ref && $2 != "dense" && $9 != "inf" && (b == "" || $9 + 0 > bx) { b = $2; bx = $9 + 0 } END { print b }' "$RESULTS/closed_loop.csv")
sheet=()
srun=""
for c in "$sheet_from"/cells/*/; do
  [ -d "$c" ] || continue
  for p in $(ls "$c" | sed -n 's/\.s1\.dense$//p'); do
    for spec in dense@1 "$REF@0.15" ${best:+"$best@0.15"}; do
      pol=${spec%@*} rho=${spec##*@}
      cell=$p.s1.${pol//\//_}; [ "$pol" = dense ] || cell=$cell@$rho
      lab=$(echo "$pol" | sed 's|/budget=matched| matched|; s|[_/=]| |g')
      lab="$p seed 1: $lab"; [ "$pol" = dense ] || lab="$lab ρ $rho"
      [ -f "$c/$cell/latents.h5" ] || continue
      sheet+=("$lab=$c/$cell/latents.h5")
      echo "$p,1,$pol,$rho" >> "$tmp/sheet-rows.csv" # what the sheet shows, for README.md
    done
  done
  srun=$(basename "$c")
  break
done
sheet_note=""
if [ ${#sheet[@]} -gt 0 ]; then
  exp_say "contact sheet: ${#sheet[@]} rows from $sheet_from"
  rm -f "$RESULTS"/sheet.{png,pdf} "$RESULTS"/sheet-run.json "$RESULTS"/sheet-closed_loop.csv "$RESULTS"/sheet-experiment.json
  if ! "$DSGAP" sheet --out "$tmp/sheet" "${sheet[@]}" > /dev/null; then
    exp_say "no contact sheet: dsgap sheet failed on the latents of $sheet_from (a pixel-space model's only)"
  elif cp "$tmp"/sheet.{png,pdf} "$RESULTS/" && [ -s "$sheet_from/$srun/run.json" ]; then
    cp "$sheet_from/$srun/run.json" "$RESULTS/sheet-run.json"
    cp "$sheet_from/$srun/closed_loop.csv" "$RESULTS/sheet-closed_loop.csv"
    [ "$sheet_from" = "$WORK" ] || cp "$sheet_from/experiment.json" "$RESULTS/sheet-experiment.json"
    sdev=$(jstr device "$RESULTS/sheet-run.json") sdate=$(jstr date "$RESULTS/sheet-run.json") scommit=$(jstr git_commit "$RESULTS/sheet-run.json")
    # the sheet cells' PSNR against the table's for the same samples (the sheet's cells may be a rerun)
    agree=$(awk -F, 'FNR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
      { k = $c["prompt"] SUBSEP $c["seed"] SUBSEP $c["policy"] SUBSEP $c["density_target"] }
      FILENAME == ARGV[1] { x[k] = $c["psnr"]; next }
      $c["policy"] != "dense" && (k in x) { n++; d = $c["psnr"] - x[k]; d = d < 0 ? -d : d; m = d > m ? d : m }
      END { if (n) printf "%d of its cells are in the table'"'"'s run; their PSNR differs from the table'"'"'s by at most %.2f dB", n, m }' \
      "${runs[0]}/closed_loop.csv" "$RESULTS/sheet-closed_loop.csv")
    sheet_note="from a separate run of the sheet's cells (\`sheet-experiment.json\`: its experiment, \`$(jstr name "$sheet_from/experiment.json")\`; \`sheet-run.json\`: $sdev, $sdate, dsgap $scommit; \`sheet-closed_loop.csv\`: their PSNR over all frames${agree:+; $agree})"
    [ "$sheet_from" = "$WORK" ] && sheet_note="from the latents of the table's own cells"
  else
    sheet_note="from the latents of \`$sheet_from\`"
  fi
elif [ -e "$RESULTS/sheet.png" ]; then
  if [ -s "$RESULTS/sheet-run.json" ]; then
    sheet_note="**not remade by this run** (its cells have no latents): from an earlier run (\`sheet-run.json\`: $(jstr device "$RESULTS/sheet-run.json"), $(jstr date "$RESULTS/sheet-run.json"))"
  else
    sheet_note="**not remade by this run** (its cells have no latents), and from an earlier run of unknown cells (\`git log -- sheet.png\`)"
  fi
  # what the kept sheet shows: the seed-1 rows of its cells
  [ ! -s "$RESULTS/sheet-closed_loop.csv" ] || awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    $c["seed"] == 1 { print $c["prompt"] ",1," $c["policy"] "," $c["density_target"] }' "$RESULTS/sheet-closed_loop.csv" > "$tmp/sheet-rows.csv"
fi

# what the sheet shows: "the dense run, P1 and P2 at ρ 0.15 for 2 prompts with seed 1 (a, b)"
sheet_what=$([ -s "$tmp/sheet-rows.csv" ] && awk -F, '!($1 in ps) { ps[$1] = 1; pl = pl (np++ ? ", " : "") $1 }
  $3 != "dense" && !(($3, $4) in ms) { ms[$3, $4] = 1; m[++nm] = $3; r[nm] = $4 }
  END { s = "the dense run"; for (i = 1; i <= nm; i++) s = s (i < nm ? ", " : " and ") m[i] (i == nm || r[i] != r[i + 1] ? " at ρ " r[i] : "")
    printf "%s for %d prompt%s with seed 1 (%s)", s, np, (np > 1 ? "s" : ""), pl }' "$tmp/sheet-rows.csv" ||
  echo "the dense run and the methods its row labels name")
first=$(ls -d "$RESULTS"/*/run.json | head -1)
title="Experiment 4: the closed loop"
[ -n "${EXP_INI:-}" ] && title="The closed loop of \`$(basename "$EXP_INI")\`"
exp_readme "# $title ($mlabel model, $samples_txt)

Source: **model** \`$model\` (label $mlabel); cells: $made_by.
Every sample (prompt, seed) is generated densely and with each method inside every self-attention
call of the denoising loop (\`dsgap run\`: one cell per sample x method x density, the dense reference
once per sample); the final frames are compared with the dense run's at merge time.
\`closed_loop.md\` (also \`.tex\`, \`.csv\`): per method and target density, the computed density, PSNR and
SSIM with 95% bootstrap intervals over the samples (\`dsgap compare\`), $REF against every other method
(the paired PSNR difference with its interval, and in how many samples $REF is ahead), and the run's own
transformer speedup; \`closed_loop-samples.md\` (also \`.csv\`): every sample's PSNR per method, the best
method of each sample; \`RUN/closed_loop.csv\`: the cells' rows. Figure: \`figures/closed_loop.png\`
(PSNR and SSIM per method at each target density, 95% intervals over the samples; one rule for
every method, $REF included: a point whose computed density is more than 0.02 from its target is drawn
hollow with ‡ (the tables say \"cannot reach ρ\" of such a peer, and give $REF's and est-block's
values with their computed density); a method that runs at one density whatever the target is not
drawn; both are listed under the plot).
$([ -n "$sheet_note" ] && echo "\`sheet.png\`: 8 evenly spaced frames of $sheet_what, every tile with its PSNR against the dense frame; the PSNR beside a row is the mean over its 8 shown frames, not the clip's over all its frames (the tables', and \`sheet-closed_loop.csv\`'s); $sheet_note.")" "$first"

# another experiment file: say how to make it again
if [ -n "${EXP_INI:-}" ] && [ -z "$EXP_CELLS" ]; then
  regen="EXP_INI=${EXP_INI#$ROOT/}${CLOSED_LOOP_REF:+ CLOSED_LOOP_REF=$CLOSED_LOOP_REF} experiments/closed_loop.sh --out DIR"
  awk -v r="$regen" '/^Regenerate: / { printf "Regenerate: `%s` (DIR outside results/; the cells go to the scratch folder `build/experiments/closed_loop/`).\n", r; next } { print }' \
    "$RESULTS/README.md" > "$tmp/README.md" && cp "$tmp/README.md" "$RESULTS/README.md"
fi
# a run made elsewhere: say so where exp_readme speaks of this machine
if [ -n "$EXP_CELLS" ]; then
  sheet_opt="" sheet_doc=""
  if [ -n "$sheet_dir" ]; then
    sheet_opt=" --sheet DIR2"
    sheet_doc="; DIR2 a dsgap run folder with the sheet cells (\`sheet-experiment.json\`: its experiment file in config_text)"
  fi
  awk -v conf="$xconf" -v made="$made_by" -v now="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    -v local="$("$DSGAP" --version | sed 's/.*commit \([0-9a-f+wip]*\).*/\1/')" -v secs="$(( $(date +%s) - T0 ))" \
    -v sheet="$sheet_opt" -v sheetdoc="$sheet_doc" '
    /^Regenerate: / { printf "Regenerate: `experiments/closed_loop.sh --update-results --cells DIR%s`, DIR a dsgap run folder of `%s`", sheet, conf
      if (conf ~ /comparison/) printf " (the fidelity/ folder of the pack of `experiments/comparison.sh --stage gpu`: tar xzf comparison.tar.gz)"
      printf "%s; `experiments/closed_loop.sh --update-results` alone runs `experiments/closed_loop.ini` here instead.\n", sheetdoc; next }
    /^Last run: / { printf "Cells: %s (`RUN/run.json`): %s s of transformer time summed over them. Tables, figure and sheet made here: %s, dsgap %s, this invocation %s s.\n", made, cs, now, local, secs; next }
    { print }' cs="$(awk '/"transformer_s"/ { gsub(/[^0-9.e+-]/, "", $2); s += $2 } END { printf "%.0f", s }' "$WORK"/*/run.json)" \
    "$RESULTS/README.md" > "$tmp/README.md" && cp "$tmp/README.md" "$RESULTS/README.md"
fi

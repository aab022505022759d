#!/usr/bin/env bash
# cli_closed_decompose.sh: the closed loop's decomposition (issue 50, items 3 and 7) end to end on the
# CPU: dsgap run of a tiny closed-loop experiment (the random-weight Wan model of tests/wan_ref.py
# derive: 2 layers, 2 heads of 64, 384 tokens, 3 UniPC steps with warm-up 1, 2 seeds; the oracle ladder
# and the MC-Sparse factorial at one density), then dsgap decompose --closed on its run folder. Every
# number of the new tables is recomputed here by awk from closed_loop.csv alone: E of each policy
# (mean rel-L2, minus the mean PSNR), selection, query grouping, key blocking, lost contributions, the
# paired differences, the Shapley shares from their explicit 3-component formula, the interactions, the
# per-sample estimates and sign counts, the computed density past the warm-up; with 2 samples every
# 95% interval of these linear statistics is exactly [min, max] of the two samples' own values (each
# extreme is drawn in a quarter of the replicates). Also: experiments/closed_ladder.ini expands to its
# grid, the "few samples" mark, and bad input (one line, nothing written).
# Run: ctest -R cli_closed_decompose (needs $DSGAP, $DSGAP_SOURCE and the wan_models fixture).
. "$(dirname "$0")/../lib.sh" closed_decompose
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
MODELS=${WAN_MODELS:-$PWD/wan_models}
FIX=$DSGAP_SOURCE/tests/fixtures/wan
[ -d "$MODELS/orig_hd64" ] || { echo "no test models in $MODELS (run: ctest -R wan_models)"; exit 1; }

# --- the experiment the coordinator runs: its grid -------------------------------------------------
n=$("$DSGAP" run "$DSGAP_SOURCE/experiments/closed_ladder.ini" --list --out "$tmp/cl_list" 2> "$tmp/list.err" | wc -l)
check "experiments/closed_ladder.ini: 24 samples x (dense + 14 policies x 2 densities) = 696 cells ($n)" [ "$n" -eq 696 ] || cat "$tmp/list.err"
check "closed_ladder.ini: 50 steps, warm-up 10, the ladder and the factorial" \
  eval 'grep -qx "steps = 50" "$DSGAP_SOURCE/experiments/closed_ladder.ini" && grep -qx "w10 = warmup=10" "$DSGAP_SOURCE/experiments/closed_ladder.ini" && grep -qx "list = ladder, factorial" "$DSGAP_SOURCE/experiments/closed_ladder.ini"'

# --- a tiny closed loop ----------------------------------------------------------------------------
printf '[experiment]\nname = tiny_ladder\n[model]\npath = %s/orig_hd64\nlabel = tiny\nlatent = 4x16x24\nsteps = 3\nshift = 3\nguidance = 2\nseeds = 3, 4\n[prompts]\nfix = %s/text.safetensors\n[policies]\nlist = ladder, factorial\n[densities]\nlist = 0.3\n[schedules]\nw1 = warmup=1\n[device]\ndevice = cpu\n' \
  "$MODELS" "$FIX" > "$tmp/tiny.ini"
"$DSGAP" run "$tmp/tiny.ini" --out "$tmp/run" --quiet > "$tmp/run.log" 2>&1
check "dsgap run: the tiny closed loop (ladder + factorial, 2 samples)" [ $? -eq 0 -a -s "$tmp/run/tiny.w1/closed_loop.csv" ] || cat "$tmp/run.log"
cl=$tmp/run/tiny.w1/closed_loop.csv
out=$tmp/tables
"$DSGAP" decompose --closed "$tmp/run/tiny.w1" --out "$out" --boot 400 --seed 3 > "$tmp/dec.log" 2> "$tmp/dec.err"
check "decompose --closed: exit 0, nothing on stderr" [ $? -eq 0 -a ! -s "$tmp/dec.err" ] || cat "$tmp/dec.log" "$tmp/dec.err"
for f in decomposition ablation decomposition-psnr ablation-psnr; do
  check "$f.{csv,md,tex} and $f-samples.csv written" [ -s "$out/$f.csv" -a -s "$out/$f.md" -a -s "$out/$f.tex" -a -s "$out/$f-samples.csv" ]
done

# the independent computation: per sample (prompt/seed) and policy the measure from closed_loop.csv;
# every table quantity from the E's by its formula; printed as "scope quantity value" (scope: all, or
# the sample "fix-sN" as -samples.csv names... here the label prompt/seed)
expect() { # expect MEASURE(rel_l2|psnr) KIND(ladder|ablation)
  awk -F, -v m="$1" -v kind="$2" '
  NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
  $c["policy"] != "dense" {
    s = $c["prompt"] "/" $c["seed"]; v = m == "psnr" ? -$c["psnr"] : $c["rel_l2"]
    sum["all", $c["policy"]] += v; cnt["all", $c["policy"]]++
    sum[s, $c["policy"]] += v; cnt[s, $c["policy"]]++; scope[s] = 1
  }
  function E(sc, p) { return sum[sc, p] / cnt[sc, p] }
  function emit(sc, q, x) { printf "%s %s %.12g\n", sc, q, x }
  END {
    scope["all"] = 1
    for (sc in scope) {
      if (kind == "ladder") {
        est = E(sc, "est-block"); ob = E(sc, "oracle-block"); ot = E(sc, "oracle-tile")
        op = E(sc, "oracle-pca"); o = E(sc, "oracle"); orr = E(sc, "oracle+res")
        sel = est - ob; grp = ob - o; qg = ot - o; kb = ob - ot
        emit(sc, "E(est-block)", est); emit(sc, "selection", sel); emit(sc, "grouping", grp)
        emit(sc, "query_grouping", qg); emit(sc, "key_blocking", kb); emit(sc, "lost", o)
        emit(sc, "lost-grouping", o - grp); emit(sc, "lost-selection", o - sel)
        emit(sc, "grouping-selection", grp - sel); emit(sc, "query_grouping-key_blocking", qg - kb)
        emit(sc, "residual_recovers", o - orr); emit(sc, "pca_over_raster", ot - op)
        emit(sc, "E(oracle-block)", ob); emit(sc, "E(oracle-tile)", ot); emit(sc, "E(oracle-pca)", op)
        emit(sc, "E(oracle)", o); emit(sc, "E(oracle+res)", orr)
      } else {
        e0 = E(sc, "baseline"); g = E(sc, "mc-grouping"); s1 = E(sc, "mc-selection"); r = E(sc, "mc-residual")
        gs = E(sc, "mc-gs"); gr = E(sc, "mc-gr"); sr = E(sc, "mc-sr"); gsr = E(sc, "mc-sparse")
        # Shapley: 1/3 alone, 1/6 after each single other, 1/3 after both others
        pg = (e0 - g) / 3 + ((s1 - gs) + (r - gr)) / 6 + (sr - gsr) / 3
        ps = (e0 - s1) / 3 + ((g - gs) + (r - sr)) / 6 + (gr - gsr) / 3
        pr = (e0 - r) / 3 + ((g - gr) + (s1 - sr)) / 6 + (gs - gsr) / 3
        emit(sc, "E(baseline)", e0); emit(sc, "E(mc-grouping)", g); emit(sc, "E(mc-selection)", s1)
        emit(sc, "E(mc-gs)", gs); emit(sc, "E(mc-residual)", r); emit(sc, "E(mc-gr)", gr)
        emit(sc, "E(mc-sr)", sr); emit(sc, "E(mc-sparse)", gsr); emit(sc, "total_reduction", e0 - gsr)
        emit(sc, "shapley_G", pg); emit(sc, "shapley_S", ps); emit(sc, "shapley_R", pr)
        emit(sc, "I_GS", gs - g - s1 + e0); emit(sc, "I_GR", gr - g - r + e0); emit(sc, "I_SR", sr - s1 - r + e0)
        emit(sc, "I_GSR", gsr - gs - gr - sr + g + s1 + r - e0)
        emit(sc, "shapley_R-shapley_G", pr - pg); emit(sc, "shapley_R-shapley_S", pr - ps)
        emit(sc, "shapley_G-shapley_S", pg - ps)
      }
    }
  }' "$cl"
}
# compare: every expected value with the table's (all: NAME.csv; a sample: NAME-samples.csv); the
# interval of "all" equal to [min, max] of the samples' own values; n_positive the samples' count > 0
verify() { # verify MEASURE KIND STEM
  expect "$1" "$2" > "$tmp/want.$3"
  awk -v OFS=' ' 'function abs(x) { return x < 0 ? -x : x }
    function close_(a, b) { return abs(a - b) <= 1e-9 * (1 + abs(b)) }
    FILENAME ~ /want/ { want[$1, $2] = $3; if ($1 != "all") { n[$2]++; if ($3 > 0) pos[$2]++
        if (!($2 in mn) || $3 < mn[$2]) mn[$2] = $3; if (!($2 in mx) || $3 > mx[$2]) mx[$2] = $3 }
      nq += $1 == "all"; next }
    FILENAME ~ /-samples.csv$/ { if (FNR > 1) { split($0, f, ","); k = f[1] SUBSEP f[4]; seen++
        if (!(k in want) || !close_(f[5], want[k])) { bad++; print "sample", f[1], f[4], f[5], want[k] > "/dev/stderr" } } next }
    FNR > 1 { split($0, f, ","); if (f[3] ~ /^peer:/) next; k = "all" SUBSEP f[3]; rows++
      if (!(k in want) || !close_(f[4], want[k])) { bad++; print "est", f[3], f[4], want[k] > "/dev/stderr" }
      if (!close_(f[5], mn[f[3]]) || !close_(f[6], mx[f[3]])) { bad++; print "ci", f[3], f[5], f[6], mn[f[3]], mx[f[3]] > "/dev/stderr" }
      if (f[11] != pos[f[3]] + 0 || f[9] != 2 || f[7] != 2 || f[8] != 2) { bad++; print "counts", f[3], f[7], f[8], f[9], f[11], pos[f[3]] > "/dev/stderr" } }
    END { print bad + 0, rows + 0, nq + 0, seen + 0 }' "$tmp/want.$3" "$out/$3.csv" "$out/$3-samples.csv"
}
for case in "rel_l2 ladder decomposition" "rel_l2 ablation ablation" "psnr ladder decomposition-psnr" "psnr ablation ablation-psnr"; do
  read -r m k stem <<<"$case"
  read -r nbad rows nq seen < <(verify $m $k $stem 2> "$tmp/why.$stem")
  check "$stem.csv: all $nq quantities as recomputed from closed_loop.csv ($rows rows, $seen per-sample values), intervals [min, max] of the 2 samples, sign counts ($nbad wrong)" \
    [ "$nbad" -eq 0 -a "$rows" -eq "$nq" -a "$seen" -eq $((2 * nq)) -a "$nq" -ge 17 ] || head -5 "$tmp/why.$stem"
done
check "decomposition.csv: one row per quantity at the one density, no per-layer rows" \
  [ "$(awk -F, 'NR > 1 && $2 != "all"' "$out/decomposition.csv" | wc -l)" -eq 0 ]
# the computed density past the warm-up: (mean density - 1/3) / (2/3) of est-block's rows
want=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c["policy"] == "est-block" { s += $c["density"]; n++ }
  END { printf "%.6g", (s / n - 1 / 3) / (2 / 3) }' "$cl")
check "decomposition.csv: the computed density is est-block's past the warm-up ($want)" \
  awk -F, -v w="$want" 'NR > 1 { d = $10 - w; if (d > 1e-5 || d < -1e-5) exit 1 }' "$out/decomposition.csv"
check "the sources sum to E(est-block); query grouping + key blocking = grouping (csv)" awk -F, 'NR > 1 { v[$3] = $4 }
  END { a = v["selection"] + v["grouping"] + v["lost"] - v["E(est-block)"]; b = v["query_grouping"] + v["key_blocking"] - v["grouping"]
        exit !(a < 1e-12 && a > -1e-12 && b < 1e-12 && b > -1e-12) }' "$out/decomposition.csv"
md=$out/decomposition.md
check "decomposition.md: closed-loop preamble, what each oracle groups by, paired rows, the few-samples mark" \
  eval 'grep -q "^# Sources of the dense–sparse gap (oracle ladder) in the closed loop" "$md" &&
    grep -q "E(oracle-tile): raster query groups (runs of 128 in token order, not 3D tiles)" "$md" &&
    grep -q "| paired: query grouping − key blocking |" "$md" && grep -q "n = 2 samples §" "$md" &&
    grep -q "^§ an interval from fewer than 5 resampled samples" "$md" && grep -q "bootstrap over the 2 samples" "$md"'
check "decomposition-psnr.md: E is minus the PSNR, no shares of it" \
  eval 'grep -q "E(p) = −(mean over the samples of the PSNR in dB" "$out/decomposition-psnr.md" && ! grep -q "| 100% |" "$out/decomposition-psnr.md"'
check "ablation.md: Shapley shares and their paired differences" \
  eval 'grep -q "| paired: φ_R − φ_G |" "$out/ablation.md" && grep -q "^# MC-Sparse factorial ablation: Shapley attribution in the closed loop" "$out/ablation.md"'
check "the .tex tables: closed-loop labels, no e-notation" \
  eval 'grep -q "label{tab:closed-decomposition-0\.[0-9]*}" "$out/decomposition.tex" && grep -q "label{tab:closed-ablation-psnr-0\.[0-9]*}" "$out/ablation-psnr.tex" && ! grep -q "[0-9]e-[0-9]" "$out"/*.tex'
if command -v pdflatex > /dev/null; then
  for f in decomposition ablation-psnr; do
    printf '\\documentclass{article}\\usepackage{booktabs}\\usepackage[utf8]{inputenc}\\begin{document}\n\\input{%s}\n\\end{document}\n' "$out/$f.tex" > "$tmp/doc_$f.tex"
    (cd "$tmp" && timeout 120 pdflatex -interaction=nonstopmode -halt-on-error "doc_$f.tex" > "$tmp/tex_$f.log" 2>&1)
    check "$f.tex compiles in a minimal document" [ $? -eq 0 ] || tail -20 "$tmp/tex_$f.log"
  done
fi
cp "$out/decomposition.csv" "$tmp/first.csv"
"$DSGAP" decompose --closed "$tmp/run/tiny.w1" --out "$out" --boot 400 --seed 3 > /dev/null 2>&1
check "the same seed reproduces the tables" cmp -s "$out/decomposition.csv" "$tmp/first.csv"

# --- bad input: one line, nothing written ---------------------------------------------------------
refused "decompose --closed: a folder without closed_loop.csv" "cannot read" "$tmp/bad1" \
  "$DSGAP" decompose --closed "$tmp/nothing" --out "$tmp/bad1"
mkdir -p "$tmp/old"; cp "$tmp/run/tiny.w1/run.json" "$tmp/old/"; cut -d, -f1-12 "$cl" > "$tmp/old/closed_loop.csv"
refused "decompose --closed: a closed_loop.csv without rel_l2" "no column rel_l2" "$tmp/bad2" \
  "$DSGAP" decompose --closed "$tmp/old" --out "$tmp/bad2"
refused "decompose --closed: the same run twice (every sample again)" "twice" "$tmp/bad3" \
  "$DSGAP" decompose --closed "$tmp/run/tiny.w1" "$tmp/run/tiny.w1" --out "$tmp/bad3"
mkdir -p "$tmp/dense"; cp "$tmp/run/tiny.w1/run.json" "$tmp/dense/"; grep -E '^prompt|,dense,' "$cl" > "$tmp/dense/closed_loop.csv"
rc=0; "$DSGAP" decompose --closed "$tmp/dense" --out "$tmp/bad4" > /dev/null 2> "$tmp/bad4.err" || rc=$?
check "decompose --closed: dense rows only is an error (nothing to decompose), no tables" \
  eval '[ $rc -eq 1 ] && grep -q "nothing to decompose" "$tmp/bad4.err" && [ -z "$(find "$tmp/bad4" -type f 2>/dev/null)" ]'

finish

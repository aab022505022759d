#!/bin/bash
# cli_decompose.sh: dsgap decompose and dsgap plot end to end on a metrics.csv + run.json written
# here with awk (no trace needed): table formats and numbers (checked against awk's own means and
# sums), figures (.dat .gp .png .pdf, re-rendered by gnuplot alone), reproducibility of the
# bootstrap, and bad input: one line "dsgap: error: ..." naming file:line, a non-zero exit and
# no partial output (no *.tmp.* files, no figures directory).
#   DSGAP=build-cpu/dsgap bash tests/cli/cli_decompose.sh
. "$(dirname "$0")/../lib.sh" decompose
set -e
# no_partial DIR: no temporary file or directory and no table or figure left in DIR
no_partial() {
	if [ -n "$(find "$1" -name '*.tmp.*')" ] || [ -e "$1/figures" ] ||
		compgen -G "$1/decomposition.*" >/dev/null || compgen -G "$1/ablation.*" >/dev/null; then
		bad "no partial output in $(basename "$1"): $(ls "$1")"
	else
		ok "no partial output in $(basename "$1")"
	fi
}

# write_results DIR POLICIES...: warm-up 2 steps, layer 0 dense, layers 0-3, heads 0-2, steps 0-5,
# densities 0.1 and 0.3; rel_l2 from a fixed awk generator (base error per policy, noise per unit)
write_results() {
	local out=$1
	shift
	mkdir -p "$out"
	cat >"$out/run.json" <<'EOF'
{
  "schedule": {"warmup": 2, "anchors": [1], "dense_layers": [0]},
  "densities": [0.1, 0.3],
  "trace": {"path": "data/my_trace_#1.h5", "model": "wan-mini", "source": "synthetic"},
  "git_commit": "0123abcd", "device": "cpu: test", "date": "2026-12-02T14:00:00Z",
  "policies": [{"name": "est-block"}]
}
EOF
	awk -v policies="$*" 'BEGIN {
		srand(11)
		print "policy,density_target,density,step,layer,head,rel_l1,rel_l2,cosine,psnr,mass_mean,mass_p5,staleness,time_ms"
		n = split(policies, pol, " ")
		split("dense 0 est-block 0.2 oracle-block 0.14 oracle-tile 0.1 oracle-pca 0.085 oracle 0.06 " \
		      "oracle+res 0.02 baseline 0.22 mc-grouping 0.16 mc-selection 0.17 mc-residual 0.12 " \
		      "mc-gs 0.11 mc-gr 0.08 mc-sr 0.09 mc-sparse 0.05 mc-sparse/budget=topp:0.9 0.045", kv, " ")
		for (i = 1; i < 32; i += 2) base[kv[i]] = kv[i + 1]
		for (i = 1; i <= n; i++) for (d = 1; d <= 2; d++) for (s = 0; s < 6; s++)
		for (l = 0; l < 4; l++) for (h = 0; h < 3; h++) {
			p = pol[i]; rho = d == 1 ? 0.1 : 0.3
			dense = p == "dense" || s < 2 || l == 0
			anchor = p ~ /^(baseline|mc-)/
			st = anchor ? s - 1 : 0
			e = dense ? 0 : base[p] * (0.15 / rho) ^ 0.7 * (1 + 0.1 * l) * (0.8 + 0.4 * rand())
			m = dense ? 1 : 1 - e * (0.5 + rand())
			printf "%s,%g,%g,%d,%d,%d,%.6g,%.6g,%.6g,%s,%.5g,%.5g,%d,%.3f\n", p, rho,
				dense ? 1 : rho * 1.02, s, l, h, e * 1.1, e, 1 - e * e / 2,
				dense ? "inf" : sprintf("%.3f", -20 * log(e) / log(10)), m, m - 0.05,
				dense ? 0 : st, 0.5
		}
	}' >"$out/metrics.csv"
}

all="dense est-block oracle-block oracle-tile oracle-pca oracle oracle+res baseline mc-grouping
mc-selection mc-residual mc-gs mc-gr mc-sr mc-sparse mc-sparse/budget=topp:0.9"
r=$tmp/r
write_results "$r" $all

# --- decompose -----------------------------------------------------------------------------------
if $DSGAP decompose "$r" --boot 300 --seed 5 >"$tmp/stdout" 2>"$tmp/stderr" && [ ! -s "$tmp/stderr" ]; then
	ok "decompose exits 0 with nothing on stderr"
else
	bad "decompose: $(cat "$tmp/stdout" "$tmp/stderr")"
fi
check "decompose prints the sum checks" grep -q "sources sum to E(est-block) within" "$tmp/stdout"
for f in decomposition ablation; do
	for ext in csv md tex; do
		check "$f.$ext written" test -s "$r/$f.$ext"
	done
	check "$f.csv header" test "$(head -1 "$r/$f.csv")" = "density_target,layer,quantity,estimate,lo,hi,n_units,n_clusters,n_samples,density,n_positive"
	check "$f.csv: 11 fields, numbers, lo <= hi, layer all or 1-3" awk -F, 'NR > 1 {
		if (NF != 11 || $4 !~ /^-?[0-9.e+-]+$/ || $5 + 0 > $6 + 0) exit 1
		if ($2 != "all" && ($2 < 1 || $2 > 3)) exit 1 }' "$r/$f.csv"
	check "$f.tex: booktabs table per density with caption and label" bash -c "grep -q '\\\\begin{table\*}' '$r/$f.tex' &&
		grep -q '\\\\toprule' '$r/$f.tex' && grep -q '\\\\caption{' '$r/$f.tex' && grep -q '\\\\label{tab:$f-0.1}' '$r/$f.tex' &&
		grep -q '\\\\label{tab:$f-layers-0.1}' '$r/$f.tex' && ! grep -q '[0-9]e-[0-9]' '$r/$f.tex'"
	check "$f.tex escapes TeX specials of the trace path" grep -qF 'data/my\_trace\_\#1.h5' "$r/$f.tex"
	check "$f.md caption: units, clusters, replicates, seed, trace" bash -c \
		"grep -qF 'n = 36 units in 9 clusters' '$r/$f.md' && grep -qF '300 replicates, seed 5' '$r/$f.md' && grep -qF 'trace \`data/my_trace_#1.h5\`' '$r/$f.md'"
done
rows=$(awk -F, 'NR > 1' "$r/decomposition.csv" | wc -l)
check "decomposition.csv: 2 densities x (all + 3 layers) x 17 quantities = 136 rows (got $rows)" test "$rows" -eq 136
rows=$(awk -F, 'NR > 1' "$r/ablation.csv" | wc -l)
check "ablation.csv: 2 densities x 4 scopes x 19 quantities = 152 rows (got $rows)" test "$rows" -eq 152
check "decomposition.md names the sources and prints the check" bash -c \
	"grep -q 'lost contributions = E(oracle)' '$r/decomposition.md' && grep -q '^Shares: .*Check: |selection + grouping + lost' '$r/decomposition.md'"
check "ablation.md: the 8 cells, Shapley shares, interactions" bash -c \
	"grep -q '^| mc-gs | ✓ | ✓ |  |' '$r/ablation.md' && grep -q 'φ_R' '$r/ablation.md' && grep -q 'interaction I_GSR' '$r/ablation.md'"

# E(est-block) of all layers at 0.1 against awk's own mean over post-warm-up units
want=$(awk -F, '$1 == "est-block" && $2 == 0.1 && $4 >= 2 && $5 != 0 { s += $8; n++ } END { printf "%.10g", s / n }' "$r/metrics.csv")
got=$(awk -F, '$1 == 0.1 && $2 == "all" && $3 == "E(est-block)" { print $4 }' "$r/decomposition.csv")
check "E(est-block) at 0.1 is the mean over post-warm-up units ($got vs awk $want)" \
	awk -v a="$got" -v b="$want" 'BEGIN { exit !(a - b < 1e-9 && b - a < 1e-9) }'
check "every row: selection + grouping + lost = E(est-block)" awk -F, 'NR > 1 {
		k = $1 "," $2; v[k, $3] = $4; keys[k] = 1 }
	END { for (k in keys) { d = v[k, "selection"] + v[k, "grouping"] + v[k, "lost"] - v[k, "E(est-block)"]
		if (d > 1e-9 || d < -1e-9) exit 1 } }' "$r/decomposition.csv"
# query grouping, key blocking and the paired rows of every scope against awk's own means of the
# post-warm-up units of metrics.csv (layer 0 dense, warm-up 2)
check "every scope: query grouping, key blocking, the paired rows, PCA over raster from metrics.csv's units" awk -F, '
	NR == FNR { if (FNR > 1 && $4 >= 2 && $5 != 0) for (sc = 0; sc < 2; sc++) { k = $2 "," (sc ? $5 : "all")
		s[k, $1] += $8; n[k, $1]++ }; next }
	FNR > 1 { k = $1 "," $2; v[k, $3] = $4; keys[k] = 1 }
	function E(k, p) { return s[k, p] / n[k, p] }
	function bad(a, b) { return a - b > 1e-9 || b - a > 1e-9 }
	END { for (k in keys) { qg = E(k, "oracle-tile") - E(k, "oracle"); kb = E(k, "oracle-block") - E(k, "oracle-tile")
		sel = E(k, "est-block") - E(k, "oracle-block"); grp = E(k, "oracle-block") - E(k, "oracle"); lost = E(k, "oracle")
		if (bad(v[k, "query_grouping"], qg) || bad(v[k, "key_blocking"], kb) || bad(v[k, "lost-grouping"], lost - grp) ||
		    bad(v[k, "lost-selection"], lost - sel) || bad(v[k, "grouping-selection"], grp - sel) ||
		    bad(v[k, "query_grouping-key_blocking"], qg - kb) || bad(v[k, "pca_over_raster"], E(k, "oracle-tile") - E(k, "oracle-pca"))) exit 1
		m++ } exit !(m == 8) }' "$r/metrics.csv" "$r/decomposition.csv"
check "ablation: the paired differences of the Shapley shares" awk -F, 'NR > 1 { k = $1 "," $2; v[k, $3] = $4; keys[k] = 1 }
	END { for (k in keys) { d = v[k, "shapley_R-shapley_G"] - v[k, "shapley_R"] + v[k, "shapley_G"]
		e = v[k, "shapley_G-shapley_S"] - v[k, "shapley_G"] + v[k, "shapley_S"]
		if (d > 1e-9 || d < -1e-9 || e > 1e-9 || e < -1e-9) exit 1 } }' "$r/ablation.csv"
check "decomposition.md: per-layer rows of 3 heads marked § with the note; the all-layers row (9 clusters) not" bash -c \
	"grep -q '^| 1 § | 12 | 3 |' '$r/decomposition.md' && grep -q '^§ an interval from fewer than 5' '$r/decomposition.md' && ! grep -q '9 clusters §' '$r/decomposition.md'"
check "decomposition.md: what each oracle groups by" grep -q "E(oracle-tile): raster query groups (runs of 128 in token order, not 3D tiles), single keys" "$r/decomposition.md"
check "every row: shapley_G + shapley_S + shapley_R = total_reduction" awk -F, 'NR > 1 {
		k = $1 "," $2; v[k, $3] = $4; keys[k] = 1 }
	END { for (k in keys) { d = v[k, "shapley_G"] + v[k, "shapley_S"] + v[k, "shapley_R"] - v[k, "total_reduction"]
		if (d > 1e-9 || d < -1e-9) exit 1 } }' "$r/ablation.csv"
cp "$r/decomposition.csv" "$tmp/first.csv"
$DSGAP decompose "$r" --boot 300 --seed 5 >/dev/null
check "the same seed reproduces the tables" cmp -s "$r/decomposition.csv" "$tmp/first.csv"
$DSGAP decompose "$r" --boot 300 --seed 6 >/dev/null
check "another seed changes the intervals only" bash -c "! cmp -s '$r/decomposition.csv' '$tmp/first.csv' &&
	diff <(cut -d, -f1-4 '$r/decomposition.csv') <(cut -d, -f1-4 '$tmp/first.csv') >/dev/null"
check "decompose leaves no temporary file" test -z "$(find "$r" -name '*.tmp.*')"

# --- plot ----------------------------------------------------------------------------------------
figs="error_vs_density sources_per_layer-rho0.1 ablation-rho0.1 shapley error_vs_staleness-rho0.1 mass_distribution-rho0.1"
if $DSGAP plot "$r" --boot 200 >"$tmp/stdout" 2>"$tmp/stderr" && [ ! -s "$tmp/stderr" ]; then
	ok "plot exits 0 with nothing on stderr"
else
	bad "plot: $(cat "$tmp/stdout" "$tmp/stderr")"
fi
check "plot says where the figures are" grep -q "plot: 6 figures in $r/figures/" "$tmp/stdout"
check "figures/style.gp is the compiled-in style" grep -q "^set style line 1 " "$r/figures/style.gp"
for f in $figs; do
	check "$f: .dat .gp .png .pdf" test -s "$r/figures/$f.dat" -a -s "$r/figures/$f.gp" -a -s "$r/figures/$f.png" -a -s "$r/figures/$f.pdf"
	check "$f.png is a PNG" test "$(head -c 8 "$r/figures/$f.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a"
	check "$f.pdf is a PDF" test "$(head -c 5 "$r/figures/$f.pdf")" = "%PDF-"
	check "$f.dat: provenance header (trace, commits, date) and numeric rows" bash -c "
		grep -q '^# trace data/my_trace_#1.h5 (model wan-mini, source synthetic); metrics by commit 0123abcd on cpu: test, 2026-12-02T14:00:00Z' '$r/figures/$f.dat' &&
		grep -q '^# made by dsgap plot' '$r/figures/$f.dat' &&
		awk '!/^#/ && NF { if (\$1 !~ /^-?[0-9.e+-]+\$/) exit 1; n++ } END { exit !(n > 0) }' '$r/figures/$f.dat'"
	check "$f.gp loads style.gp and sets both terminals" bash -c "grep -q \"^load 'style.gp'\" '$r/figures/$f.gp' &&
		grep -q 'pdfcairo size' '$r/figures/$f.gp' && grep -q 'pngcairo size' '$r/figures/$f.gp'"
done
check "sources_per_layer is at the density closest to 0.15 (0.1), computed density beside it" grep -q "ρ} = 0.1, computed" "$r/figures/sources_per_layer-rho0.1.gp"
check "error_vs_density: each point at its policy's computed density (the fixture's 1.02 x target), the target beside it" \
	awk '!/^#/ && NF { n++; if ($1 - 1.02 * $6 > 1e-6 || 1.02 * $6 - $1 > 1e-6) exit 1 } END { exit !(n > 0) }' "$r/figures/error_vs_density.dat"
check "shapley: the computed density under each target on the x axis" grep -qF '"0.1\n(0.102)" 0' "$r/figures/shapley.gp"
check "sources_per_layer.dat: layers 1-3 and all, sources sum to E(est-block), diverging stacks" awk '!/^#/ && NF {
	n++; d = $13 + $14 + $15 - $9; if (d > 1e-6 || d < -1e-6) exit 1; last = $2
	for (k = 3; k <= 7; k += 2) if (($k < 0 && $(k + 1) > 0) || $k > $(k + 1)) exit 1 }
	END { exit !(n == 4 && last == "all") }' "$r/figures/sources_per_layer-rho0.1.dat"
if command -v gnuplot >/dev/null; then
	rm "$r/figures/ablation-rho0.1.png" "$r/figures/ablation-rho0.1.pdf"
	check "a .gp re-renders standalone inside figures/" bash -c "cd '$r/figures' && gnuplot ablation-rho0.1.gp 2>/dev/null &&
		test -s ablation-rho0.1.png -a -s ablation-rho0.1.pdf"
fi
$DSGAP plot "$r" --density 0.3 --boot 0 >/dev/null 2>&1
check "--density 0.3 picks that density" grep -q "ρ} = 0.3, computed" "$r/figures/ablation-rho0.3.gp"
check "--density 0.3 keeps the figures of 0.1" test -s "$r/figures/ablation-rho0.1.png" -a -s "$r/figures/sources_per_layer-rho0.1.png"
check "--boot 0: no error bars" bash -c "! grep -q yerror '$r/figures/error_vs_density.gp'"
check "plot leaves no temporary directory" test -z "$(find "$tmp" -name '*.tmp.*')"

# a results directory with only the ladder: no ablation table, no factorial figures (warnings)
write_results "$tmp/ladder" dense est-block oracle-block oracle
$DSGAP decompose "$tmp/ladder" --boot 50 >/dev/null 2>"$tmp/stderr"
check "ladder only: decomposition written, ablation skipped with a warning" bash -c "test -s '$tmp/ladder/decomposition.csv' &&
	test ! -e '$tmp/ladder/ablation.csv' && grep -q '^dsgap: warning: .*ablation' '$tmp/stderr'"
check "ladder only: optional rungs left out of the csv" bash -c "! grep -q 'pca_over_raster\|query_grouping\|key_blocking' '$tmp/ladder/decomposition.csv'"
$DSGAP plot "$tmp/ladder" --boot 50 >/dev/null 2>"$tmp/stderr"
check "ladder only: factorial figures skipped with warnings" bash -c "ls '$tmp'/ladder/figures/sources_per_layer-rho*.png >/dev/null &&
	! ls '$tmp'/ladder/figures/ablation*.gp 2>/dev/null && grep -q '^dsgap: warning: plot: ablation-rho.* skipped' '$tmp/stderr'"

# --- bad input -----------------------------------------------------------------------------------
refused "decompose: missing directory" "$tmp/nope/run.json" - $DSGAP decompose "$tmp/nope"
refused "plot: missing directory" "$tmp/nope/run.json" - $DSGAP plot "$tmp/nope"

bad=$tmp/bad1
write_results "$bad" est-block oracle-block oracle
corrupt() { # corrupt FILE LINE FIELD VALUE
	awk -F, -v OFS=, -v line="$2" -v field="$3" -v value="$4" 'NR == line { $field = value } 1' "$1" >"$1.new"
	mv "$1.new" "$1"
}
corrupt "$bad/metrics.csv" 5 8 abc
refused "decompose: malformed number" "$bad/metrics.csv:5: bad rel_l2 'abc'" - $DSGAP decompose "$bad"
no_partial "$bad"
refused "plot: malformed number" "$bad/metrics.csv:5: bad rel_l2 'abc'" - $DSGAP plot "$bad"
no_partial "$bad"

damaged() { # damaged NAME FILE SED-SCRIPT DESCRIPTION WANT: a good results folder, FILE edited, refused
	bad=$tmp/$1
	write_results "$bad" est-block oracle-block oracle
	sed -i "$3" "$bad/$2"
	refused "decompose: $4" "$5" - $DSGAP decompose "$bad"
	no_partial "$bad"
}
damaged bad2 metrics.csv '7s/,[^,]*$//' "a line with 13 fields" "$tmp/bad2/metrics.csv:7: expected 14 fields, found 13"
damaged bad3 metrics.csv '1s/rel_l2/rel_l3/' "wrong header" "$tmp/bad3/metrics.csv:1: not a dsgap metrics header"
damaged bad4 run.json '2s/"anchors"/anchors/' "invalid run.json" "$tmp/bad4/run.json:2: invalid JSON"
# cJSON alone took the first of two keys (Python's json the last) and bytes after the value
damaged bad4b run.json '0,/"schedule"/s/"schedule"/"schedule": {"warmup": 5, "dense_layers": []}, "schedule"/' \
	"a key twice in run.json" "$tmp/bad4b/run.json: the key \"schedule\" twice in one object"
damaged bad4c run.json '$a {}' "bytes after run.json's JSON" "bytes after the JSON value"

bad=$tmp/bad5
write_results "$bad" est-block oracle-block oracle
sed -n 9p "$bad/metrics.csv" >>"$bad/metrics.csv"
refused "decompose: duplicate unit" "duplicate unit" - $DSGAP decompose "$bad"
no_partial "$bad"

bad=$tmp/bad6
write_results "$bad" est-block oracle-block oracle
sed -i '2s/^est-block,0.1,/est-block,nan,/' "$bad/metrics.csv"
refused "decompose: NaN density_target" "$bad/metrics.csv:2: bad density_target 'nan'" - $DSGAP decompose "$bad"
no_partial "$bad"

# finite but out of a metric's range: refused by decompose, plot and refreshstats alike (results.c)
n=8
for fv in "2 1e308 density_target" "2 0 density_target" "3 1.5 density" "8 -0.1 rel_l2" "9 1.2 cosine" \
	"10 -inf psnr" "10 1e300 psnr" "11 2 mass_mean" "12 -1 mass_p5" "13 -1 staleness" "14 1e300 time_ms"; do
	read -r field value name <<<"$fv"
	bad=$tmp/bad$((n++))r
	write_results "$bad" est-block oracle-block oracle
	corrupt "$bad/metrics.csv" 4 "$field" "$value"
	refused "decompose: $name $value" "$bad/metrics.csv:4: bad $name '$value'" - $DSGAP decompose "$bad"
	no_partial "$bad"
done
refused "plot: density_target 1e308" "$tmp/bad8r/metrics.csv:4: bad density_target '1e308'" - $DSGAP plot "$tmp/bad8r"
cp -r "$tmp/bad8r" "$tmp/rsx.a1"
write_results "$tmp/rsx.a2" est-block oracle-block oracle
refused "refreshstats: density_target 1e308" "$tmp/rsx.a1/metrics.csv:4: bad density_target '1e308'" - \
	$DSGAP refreshstats --schedules a1,a2 --out "$tmp/rs_bad" "$tmp/rsx"
check "refreshstats: nothing written" test ! -e "$tmp/rs_bad"

bad=$tmp/bad7
write_results "$bad" dense
rc=0
$DSGAP decompose "$bad" >/dev/null 2>"$tmp/stderr" || rc=$?
check "decompose: dense only is an error (nothing to decompose)" bash -c "test $rc -ne 0 && grep -q '^dsgap: error: decompose: .*nothing to decompose' '$tmp/stderr'"
rc=0
$DSGAP plot "$bad" >/dev/null 2>"$tmp/stderr" || rc=$?
check "plot: dense only is an error (no figure)" bash -c "test $rc -ne 0 && grep -q '^dsgap: error: plot: .*no figure' '$tmp/stderr'"
no_partial "$bad"

# a failed plot keeps the figures of an earlier run
corrupt "$r/metrics.csv" 5 8 abc
$DSGAP plot "$r" >/dev/null 2>&1 || true
check "a failed plot leaves the older figures in place" test -s "$r/figures/ablation-rho0.3.png"

refused "plot: a density not in the results" "no density_target 0.2 in" - $DSGAP plot "$tmp/ladder" --density 0.2
refused "decompose: bad --boot" "bad --boot '-3'" - $DSGAP decompose "$tmp/ladder" --boot -3
refused "plot: bad --density" "bad --density 'x'" - $DSGAP plot "$tmp/ladder" --density x
write_results "$tmp/fresh" $all
cp -r "$tmp/fresh" "$tmp/fresh2" # two samples: two folders (one folder twice is refused)
refused "decompose: a sample label with a line break" "control character" "$tmp/nl" \
  $DSGAP decompose "$(printf 'a\nb')=$tmp/fresh" "c=$tmp/fresh2" --boot 20 --out "$tmp/nl"
# a label with a comma and a quote is one CSV field (RFC 4180), every row 5 fields
$DSGAP decompose "a,\"b=$tmp/fresh" "c=$tmp/fresh2" --boot 20 --out "$tmp/comma" >"$tmp/stdout" 2>"$tmp/stderr" || cat "$tmp/stderr"
f=$tmp/comma/decomposition-samples.csv
check "decompose: a label with a comma and a quote stays one field of decomposition-samples.csv" \
  eval '[ -s "$f" ] && sed -n 2p "$f" | grep -q "^\"a,\"\"b\"," &&
    [ -z "$(sed "s/^\"a,\"\"b\"//" "$f" | awk -F, "NF != 5")" ]'

finish

#!/usr/bin/env bash
# exp_out.sh: an experiment script run with --out DIR writes DIR and its scratch folder and nothing
# in the checkout (issue 19): `git status` (tracked and untracked files, and ignored files under
# results/) is the same before and after experiments/ladder.sh, experiments/ablation.sh and
# experiments/peers.sh, each run on a tiny experiment file of its form (EXP_INI: a 256-token synthetic trace); their tables,
# figures and README land in DIR; --cells DIR (the cells made elsewhere) gives the same tables without
# running them; --out inside results/ is refused before anything is written.
# Exit 77 (skipped) outside a git checkout or without gnuplot.
set -uo pipefail
DSGAP=${DSGAP:?DSGAP: the dsgap binary}
SRC=${DSGAP_SOURCE:?DSGAP_SOURCE: the source tree}
git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "skipped: $SRC is not a git checkout"; exit 77; }
command -v gnuplot >/dev/null || { echo "skipped: no gnuplot"; exit 77; }
tmp=$(mktemp -d /tmp/dsgap-expout.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { local d=$1; shift; if "$@"; then pass=$((pass + 1)); echo "ok   $d"; else fail=$((fail + 1)); echo "FAIL $d"; return 1; fi; }
state() { git -C "$SRC" status --porcelain --untracked-files=all; git -C "$SRC" status --porcelain --ignored -- results; }
tiny() { # tiny NAME SCHEDULE POLICIES: the experiment's labels (trace synthetic, its schedule) on 256 tokens
  printf '[experiment]\nname = %s\n[traces]\nsynthetic = synth: grid=2x8x16 heads=2 layers=2 steps=5 head_dim=32 seed=3\n' "$1"
  printf '[policies]\nlist = %s\n[densities]\nlist = 0.25, 0.5\n[schedules]\n%s\n[device]\ndevice = cpu\n' "$3" "$2"
}
tiny ladder "w2 = warmup=2" "ladder, pisa" > "$tmp/ladder.ini"
tiny ablation "w3 = warmup=3" "dense, factorial" > "$tmp/ablation.ini"
tiny peers "w2 = warmup=2" "dense, mc-sparse, pisa, svg2/budget=matched, sta" > "$tmp/peers.ini"
state > "$tmp/before"
for x in ladder:decomposition ablation:ablation peers:peers; do
  name=${x%%:*} table=${x#*:}
  EXP_INI=$tmp/$name.ini DSGAP=$DSGAP DSGAP_WORK=$tmp/work bash "$SRC/experiments/$name.sh" --out "$tmp/out-$name" \
    >"$tmp/$name.log" 2>&1
  check "$name.sh --out exits 0" test $? -eq 0 || tail -5 "$tmp/$name.log"
  check "$name.sh: $table.{md,tex,csv}, README.md and a figure in --out" bash -c "test -s '$tmp/out-$name/$table.md' -a \
    -s '$tmp/out-$name/$table.tex' -a -s '$tmp/out-$name/$table.csv' -a -s '$tmp/out-$name/README.md' &&
    ls '$tmp/out-$name'/figures/*.png >/dev/null"
done
DSGAP=$DSGAP bash "$SRC/experiments/ladder.sh" --out "$tmp/out-cells" --cells "$tmp/work/ladder" >"$tmp/cells.log" 2>&1
check "ladder.sh --cells DIR: the same table, no cell run" bash -c "cmp -s '$tmp/out-ladder/decomposition.csv' \
  '$tmp/out-cells/decomposition.csv' && grep -q 'not run here' '$tmp/cells.log' && ! grep -q 'dsgap run' '$tmp/cells.log'"
state > "$tmp/after"
check "git status unchanged by the runs" cmp -s "$tmp/before" "$tmp/after" || diff "$tmp/before" "$tmp/after" | head -10
EXP_INI=$tmp/ladder.ini DSGAP=$DSGAP DSGAP_WORK=$tmp/work bash "$SRC/experiments/ladder.sh" \
  --out "$SRC/results/exp-out-test" >/dev/null 2>"$tmp/err"
check "--out inside results/: refused (exit 2), nothing made" bash -c "test $? -eq 2 && test ! -e '$SRC/results/exp-out-test' &&
  grep -q 'only --update-results' '$tmp/err'"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]

#!/usr/bin/env bash
# findings.sh: results/README.md, the findings, is what experiments/findings.sh makes from the
# committed results (issue 49: every number quoted there comes from a results file), and the script
# reads them: one number changed in a copy of the results changes its output there.
#   bash tests/experiments/findings.sh        (ctest sets $DSGAP and $DSGAP_SOURCE)
. "$(dirname "$0")/../lib.sh" findings
src=$DSGAP_SOURCE
bash "$src/experiments/findings.sh" --out "$tmp/README.md" 2> "$tmp/err"
check "findings.sh ran ($(head -c 300 "$tmp/err"))" test -s "$tmp/README.md"
d=$(diff "$src/results/README.md" "$tmp/README.md" | head -8)
check "results/README.md is up to date with experiments/findings.sh${d:+ (rerun it): $d}" [ -z "$d" ]
check "the placeholder for the closed loop across schedules is there" grep -qx '## Closed loop across schedules' "$tmp/README.md"
# a copy of the results with mc-sparse's total reduction at 0.15 changed: the output follows
cp -r "$src/results" "$tmp/results"
awk -F, -v OFS=, '$1 == "0.15" && $2 == "all" && $3 == "total_reduction" { $4 = 0.0123 } 1' "$src/results/samples/ablation.csv" > "$tmp/results/samples/ablation.csv"
bash "$src/experiments/findings.sh" --results "$tmp/results" --out "$tmp/R2.md" 2> /dev/null
check "a changed number in results/samples/ablation.csv shows in the output" \
  eval 'grep -q "| 0.15 | .* | 0.0123 \[" "$tmp/R2.md" && ! grep -q "| 0.15 | .* | 0.0123 \[" "$tmp/README.md"'
rm -f "$tmp/results/refresh/trends.csv"
check "a missing source is refused, naming it, and nothing is written" \
  eval '! bash "$src/experiments/findings.sh" --results "$tmp/results" --out "$tmp/R3.md" 2> "$tmp/err3" && grep -q "results/refresh/trends.csv: missing" "$tmp/err3" && [ ! -e "$tmp/R3.md" ]'
finish

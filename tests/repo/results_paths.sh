#!/usr/bin/env bash
# results_paths.sh: committed results name no directory of the machine that made them (issue 49):
# no text file tracked under results/ holds an absolute path under /work/, /root/, /home/, /tmp/ or
# /opt/; and the writers show such paths relative to the working directory or by their last name
# (dg_path_shown): replay's run.json, decompose's tables, plot's files and an experiment's merged
# run.json and summary.csv, made here from traces under this test's /tmp folder, hold none.
#   bash tests/repo/results_paths.sh        (needs $DSGAP, $DSGAP_SOURCE: ctest sets them)
. "$(dirname "$0")/../lib.sh" results_paths
pat='(^|[^A-Za-z0-9_.~-])/(work|root|home|tmp|opt)/'
scan() { # scan FILE...: "FILE:LINE: TEXT" of each absolute path in the text files given
  local f
  for f in "$@"; do
    grep -Iq . "$f" 2>/dev/null || continue # binary or empty
    grep -nE "$pat" "$f" | cut -c1-160 | sed "s|^|$f:|"
  done
}
# --- the committed results ------------------------------------------------------------------------
cd "$DSGAP_SOURCE"
if git rev-parse --git-dir >/dev/null 2>&1; then
  found=$(git grep -nIE "$pat" -- results | cut -c1-200)
else # a tree without git: every file
  found=$(grep -rnIE "$pat" results | cut -c1-200)
fi
check "the files under results/ name no absolute path of a machine${found:+: $(head -5 <<<"$found")}" [ -z "$found" ]
# --- the check finds one --------------------------------------------------------------------------
printf 'a,b\nx,/work/main/data/model\n' > "$tmp/bad.csv"
printf 'made from `results/refresh` and /tmpfoo/x\n' > "$tmp/good.md"
check "the scan finds /work/main in a csv and passes a relative path" \
  eval '[ -n "$(scan "$tmp/bad.csv")" ] && [ -z "$(scan "$tmp/good.md")" ]'
# --- the writers ------------------------------------------------------------------------------------
mkdir -p "$tmp/cwd"
cd "$tmp/cwd"
"$DSGAP" synth --out "$tmp/t.h5" --grid 2x4x8 --heads 2 --layers 2 --steps 4 --seed 3 >/dev/null 2>&1
"$DSGAP" replay "$tmp/t.h5" --out "$tmp/r" --policies ladder --density 0.25 --quiet >/dev/null 2>&1
"$DSGAP" decompose "$tmp/r" >/dev/null 2>&1
"$DSGAP" plot "$tmp/r" >/dev/null 2>&1
check "replay, decompose and plot ran (outside the working directory)" test -s "$tmp/r/decomposition.md"
found=$(scan "$tmp/r"/*.* "$tmp/r"/figures/*.gp "$tmp/r"/figures/*.dat)
check "their run.json, tables and figure files name no /tmp path${found:+: $(head -3 <<<"$found")}" [ -z "$found" ]
check "outside it: by the last name" grep -qE '"command":\s*"dsgap replay --out r [^"]* t\.h5",' "$tmp/r/run.json"
cd "$tmp"
"$DSGAP" replay "$tmp/t.h5" --out "$tmp/sub/r2" --policies dense --density 0.25 --quiet >/dev/null 2>&1
check "under the working directory: relative to it" grep -qE '"command":\s*"dsgap replay --out sub/r2 [^"]* t\.h5",' "$tmp/sub/r2/run.json"
cat > "$tmp/x.ini" <<INI
[experiment]
name = paths
[traces]
t = $tmp/t.h5
[policies]
list = dense, oracle-block
[densities]
list = 0.25
[schedules]
w1 = warmup=1
INI
cd "$tmp/cwd"
"$DSGAP" run "$tmp/x.ini" --out "$tmp/e" --quiet >/dev/null 2>&1
check "dsgap run made its summary" test -s "$tmp/e/summary.csv"
found=$(scan $(find "$tmp/e" -maxdepth 2 -type f \( -name '*.csv' -o -name '*.md' -o -name run.json \)))
check "the experiment's merged run.json and summaries name no /tmp path${found:+: $(head -3 <<<"$found")}" [ -z "$found" ]
finish


#!/usr/bin/env bash
# cli_run.sh: batch experiments end to end (dsgap run / merge, experiments/smoke.ini):
#   bad experiment files (one line "dsgap: error: FILE:LINE: ...", non-zero exit, nothing written);
#   the merged rows of a run equal `dsgap replay` of the whole trace (all columns but time_ms);
#   shard slices disjoint and covering; merges of 2 and 3 shards identical to the unsharded run;
#   merge refuses incomplete or foreign folders; a rerun skips finished cells; a changed experiment
#   in the same folder is refused; --workers 2 equals one process; a worker killed with SIGKILL
#   mid-run loses only its unfinished cell and a rerun completes the batch; decompose and plot
#   read the merged folders.
# Run: ctest -R cli_run (needs $DSGAP, the dsgap binary, and $DSGAP_SOURCE, the source tree).
. "$(dirname "$0")/../lib.sh" run
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
rows() { cut -d, -f1-13 "$1"; } # every column but time_ms, the one measured value
same_rows() { cmp -s <(rows "$1") <(rows "$2"); }
smoke=$DSGAP_SOURCE/experiments/smoke.ini
runs="synthetic.w1 synthetic.w2"

# --- bad experiment files -------------------------------------------------------------------------
T='[traces]\nt = synth: grid=2x8x16 heads=2 layers=1 steps=4 head_dim=32\n'
B=$tmp/bad.ini
if ! command -v nvidia-smi >/dev/null 2>&1; then # no GPU here: refused before anything is written
  refused "run --device gpu without a GPU" "no CUDA device answers" "$tmp/nogpu" \
    "$DSGAP" run "$smoke" --device gpu --out "$tmp/nogpu" --quiet
fi
bad_ini "unknown policy" "$B:4: unknown policy 'nope'" "${T}[policies]\nlist = dense, nope\n"
bad_ini "bad policy switch" "$B:5: policy 'mc-sparse/group=hex': bad switch 'group=hex'" "${T}[policies]\nlist = dense\nlist = mc-sparse/group=hex\n"
bad_ini "density out of range" "$B:4: density 1.5 is outside (0, 1]" "${T}[densities]\nlist = 0.1, 1.5\n"
bad_ini "density not a number" "$B:5: density 'abc' is not a number" "${T}[densities]\nlist = 0.1,\n  abc\n"
bad_ini "density twice" "$B:4: density 0.10 is listed twice" "${T}[densities]\nlist = 0.1, 0.10\n"
bad_ini "bad schedule" "$B:4: schedule 'a': bad warmup 'x'" "${T}[schedules]\na = warmup=x\n"
bad_ini "anchor not in the trace" "$B:5: schedule 'b' on trace 't': anchor step 9 is not in the trace (its steps: 0..3)" "${T}[schedules]\na = warmup=1\nb = warmup=2,anchors=9\n"
bad_ini "unknown section" "$B:4: unknown section [foo]" "${T}[foo]\nx = 1\n"
bad_ini "unknown key" "$B:4: unknown key 'gpu' in [device]" "${T}[device]\ngpu = 1\n"
bad_ini "unknown device" "$B:4: unknown device 'tpu' (cpu or gpu)" "${T}[device]\ndevice = tpu\n"
bad_ini "syntax error" "$B:3: syntax error" "$T""this is not a key\n"
bad_ini "unterminated section" "$B:3: syntax error" "${T}[policies\n"
bad_ini "trace defined twice" "$B:3: trace 't' is defined twice (first at line 2)" "$T""t = synth:\n"
bad_ini "bad trace label" "$B:2: bad trace label 'a/b'" "[traces]\na/b = synth:\n"
bad_ini "bad synth spec" "$B:2: trace 't': synth: bad grid '2x8'" "[traces]\nt = synth: grid=2x8\n"
bad_ini "synth option out of range" "$B:2: trace 't': synth: heads 0 out of range 1..128" "[traces]\nt = synth: grid=2x8x16\n  heads=0\n"
bad_ini "unknown synth key" "$B:2: trace 't': synth: unknown key 'size'" "[traces]\nt = synth: size=3\n"
bad_ini "missing trace file" "$B:2: trace 'x': cannot open $tmp/none.h5: No such file or directory" "[traces]\nx = none.h5\n"
echo "not hdf5" > "$tmp/junk.h5"
bad_ini "trace not HDF5" "$B:2: trace 'x': $tmp/junk.h5: not an HDF5 file" "[traces]\nx = junk.h5\n"
long=$(printf 'dense,%.0s' $(seq 40))
bad_ini "line longer than inih reads" "$B:4: line is 247 characters long, at most 197" "${T}[policies]\nlist = $long\n"
bad_ini "no traces" "$B: no traces" "[policies]\nlist = dense\n"
bad_ini "list key" "$B:4: [policies] has one key, list (got 'lst')" "${T}[policies]\nlst = dense\n"

# --- the unsharded run, against dsgap replay of the whole trace --------------------------------------
"$DSGAP" run "$smoke" --out "$tmp/full" --quiet
check "dsgap run smoke.ini exits 0" test $? -eq 0
trace=$(ls "$tmp"/full/traces/synthetic-*.h5)
check "the synthetic trace is generated into OUT/traces" test -s "$trace"
"$DSGAP" replay "$trace" --policies ladder,factorial --density 0.25,0.5 --schedule warmup=1 --out "$tmp/rp1" --quiet
"$DSGAP" replay "$trace" --policies ladder,factorial --density 0.25,0.5 --schedule 'warmup=2,anchors=1;2,dense_layers=0' --out "$tmp/rp2" --quiet
check "run w1: merged rows = dsgap replay of the whole trace (all but time_ms)" same_rows "$tmp/full/synthetic.w1/metrics.csv" "$tmp/rp1/metrics.csv"
check "run w2: merged rows = dsgap replay of the whole trace (all but time_ms)" same_rows "$tmp/full/synthetic.w2/metrics.csv" "$tmp/rp2/metrics.csv"
check "8 cells, each a folder with metrics.csv and run.json" test "$(ls -d "$tmp"/full/cells/*/l*-h*/ | wc -l)" -eq 8
check "summary.csv: one line per run x policy x density (2 x 15 x 2 + header)" test "$(wc -l < "$tmp/full/summary.csv")" -eq 61
check "summary labels the source synthetic" grep -q ',synthetic,synthetic,w2,2,1;2,2,mc-sparse,0.5,' "$tmp/full/summary.csv"
check "run.json names the synth spec and the experiment" grep -q '"path":.*"synth: grid=2x8x32 heads=2 layers=2 steps=4 head_dim=32 seed=3"' "$tmp/full/synthetic.w1/run.json"
check "the two densities give two different columns (128 and 256 of 512 keys): every sparse policy" \
  awk -F, 'NR > 1 && $8 != "dense" { d[$1 "," $8 "," $9] = $11 }
    END { n = 0; for (k in d) { split(k, a, ","); if (a[3] == "0.25") { n++; if (d[a[1] "," a[2] ",0.5"] == d[k]) exit 1 } }
          exit n != 28 }' "$tmp/full/summary.csv"
check "no temporary files left" test -z "$(find "$tmp/full" -name '*.tmp.*')"

# --- shards ----------------------------------------------------------------------------------------
"$DSGAP" run "$smoke" --list 2>/dev/null > "$tmp/all.txt"
check "--list gives 8 cells" test "$(wc -l < "$tmp/all.txt")" -eq 8
for n in 2 3 5; do
  : > "$tmp/union.txt"
  for ((i = 0; i < n; i++)); do "$DSGAP" run "$smoke" --list --shard $i/$n 2>/dev/null >> "$tmp/union.txt"; done
  check "shards of $n: disjoint (no cell twice)" test -z "$(sort "$tmp/union.txt" | uniq -d)"
  check "shards of $n: covering (every cell once)" cmp -s <(sort "$tmp/union.txt") <(sort "$tmp/all.txt")
done
check "shard 1/3 is round-robin: cells 1, 4, 7" test "$("$DSGAP" run "$smoke" --list --shard 1/3 2>/dev/null | cut -d' ' -f1 | tr '\n' ' ')" = "1 4 7 "
for n in 2 3; do
  dirs=()
  for ((i = 0; i < n; i++)); do
    "$DSGAP" run "$smoke" --shard $i/$n --out "$tmp/s$n-$i" --quiet
    dirs+=("$tmp/s$n-$i")
  done
  check "shard 0/$n holds only its cells" test "$(ls -d "$tmp"/s$n-0/cells/*/l*-h*/ | wc -l)" -eq $(( (8 + n - 1) / n ))
  check "a shard alone does not write merged results" test ! -e "$tmp/s$n-0/synthetic.w1/metrics.csv"
  "$DSGAP" merge "${dirs[@]}" --out "$tmp/m$n" --quiet
  check "merge of $n shards exits 0" test $? -eq 0
  for r in $runs; do
    check "merge of $n shards: $r rows identical to the unsharded run" same_rows "$tmp/m$n/$r/metrics.csv" "$tmp/full/$r/metrics.csv"
  done
  check "merge of $n shards: summary.csv byte-identical" cmp -s "$tmp/m$n/summary.csv" "$tmp/full/summary.csv"
done
"$DSGAP" merge "$tmp/s3-0" "$tmp/s3-2" --out "$tmp/mbad" 2>"$tmp/err.txt"
check "merge of an incomplete set fails in one line, writes nothing" \
  bash -c "[ \$(wc -l < '$tmp/err.txt') -eq 1 ] && grep -q 'merge: 3 of 8 cells are missing' '$tmp/err.txt' && [ ! -e '$tmp/mbad/summary.csv' ] && [ -z \"\$(find '$tmp/mbad' -type f 2>/dev/null)\" ]"
cp -r "$tmp/s2-0" "$tmp/c2-0" # a cell's run.json broken: the merge fails after the first run's folder
c=$(ls -d "$tmp"/c2-0/cells/synthetic.w2/* | head -1)
echo '{' > "$c/run.json"
"$DSGAP" merge "$tmp/c2-0" "$tmp/s2-1" --out "$tmp/mbad3" 2>"$tmp/err.txt"
rc=$?
check "merge failing on a broken cell: one line naming it, no folder left" \
  bash -c "[ $rc -eq 1 ] && [ \$(wc -l < '$tmp/err.txt') -eq 1 ] && grep -q 'run.json:[0-9]*: invalid JSON' '$tmp/err.txt' && [ ! -e '$tmp/mbad3' ]"
cp "$tmp/s2-0/cells/synthetic.w2/$(basename "$c")/run.json" "$c/run.json" && echo '{}' >> "$c/run.json"
"$DSGAP" merge "$tmp/c2-0" "$tmp/s2-1" --out "$tmp/mbad3" 2>"$tmp/err.txt"
rc=$?
check "merge refuses a cell's run.json with bytes after its JSON (cJSON read the first value)" \
  bash -c "[ $rc -eq 1 ] && [ \$(wc -l < '$tmp/err.txt') -eq 1 ] && grep -q 'run.json:[0-9]*: bytes after the JSON value' '$tmp/err.txt' && [ ! -e '$tmp/mbad3' ]"
for bad in "8 0.0x]9 rel_l2" "11 1e999 mass_mean" "4 nan step"; do # a garbled cell row: merged once (atof)
  read -r field value name <<<"$bad"
  rm -rf "$tmp/c2-1" "$tmp/mbad4"
  cp -r "$tmp/s2-0" "$tmp/c2-1"
  c=$(ls -d "$tmp"/c2-1/cells/synthetic.w1/* | head -1)
  awk -F, -v OFS=, -v f="$field" -v v="$value" 'NR == 3 { $f = v } 1' "$c/metrics.csv" > "$c/m.new" && mv "$c/m.new" "$c/metrics.csv"
  "$DSGAP" merge "$tmp/c2-1" "$tmp/s2-1" --out "$tmp/mbad4" 2>"$tmp/err.txt"
  rc=$?
  check "merge refuses a cell row with $name '$value' in one line naming the file and line, no folder left" \
    bash -c "[ $rc -eq 1 ] && [ \$(wc -l < '$tmp/err.txt') -eq 1 ] && grep -q 'metrics.csv:3: bad $name' '$tmp/err.txt' && [ ! -e '$tmp/mbad4' ]"
done
printf '[traces]\nt = synth: grid=2x8x16 heads=2 layers=1 steps=4 head_dim=32\n[policies]\nlist = dense\n' > "$tmp/other.ini"
"$DSGAP" run "$tmp/other.ini" --out "$tmp/other" --quiet
"$DSGAP" merge "$tmp/s2-0" "$tmp/other" --out "$tmp/mbad2" 2>"$tmp/err.txt"
check "merge refuses folders of another experiment" grep -q 'holds another experiment' "$tmp/err.txt"

# --- rerun, changed experiment ------------------------------------------------------------------------
cp "$tmp/full/synthetic.w1/metrics.csv" "$tmp/before.csv"
"$DSGAP" run "$smoke" --out "$tmp/full" 2>"$tmp/err.txt"
check "a rerun skips every finished cell" grep -q '8 of 8 cells already done, 0 to run' "$tmp/err.txt"
check "a rerun leaves the rows as they were (time_ms too)" cmp -s "$tmp/before.csv" "$tmp/full/synthetic.w1/metrics.csv"
sed 's/^list = 0.25, 0.5/list = 0.25/' "$smoke" > "$tmp/changed.ini"
"$DSGAP" run "$tmp/changed.ini" --out "$tmp/full" 2>"$tmp/err.txt"
check "another experiment in the same folder is refused" grep -q "was made by another experiment" "$tmp/err.txt"

# --- workers --------------------------------------------------------------------------------------
"$DSGAP" run "$smoke" --workers 2 --out "$tmp/w2" 2>"$tmp/err.txt"
check "--workers 2 exits 0" test $? -eq 0
check "--workers 2 reports both workers" test "$(grep -c 'run: worker [01] (pid [0-9]*, [0-9]* cells) exited with status 0' "$tmp/err.txt")" -eq 2
for r in $runs; do
  check "--workers 2: $r rows identical to one process" same_rows "$tmp/w2/$r/metrics.csv" "$tmp/full/$r/metrics.csv"
done
check "--gpus without GPUs is refused, pointing at --workers" \
  bash -c "CUDA_VISIBLE_DEVICES= '$DSGAP' run '$smoke' --gpus all --out '$tmp/g' 2>&1 | grep -q 'workers N runs CPU processes'"

# --- a worker killed mid-run -------------------------------------------------------------------------
cat > "$tmp/kill.ini" <<'EOF'
[traces]
t = synth: grid=4x16x32 heads=4 layers=2 steps=6 head_dim=32 seed=5
[policies]
list = ladder, mc-sparse
[densities]
list = 0.25
[schedules]
w = warmup=2
EOF
"$DSGAP" run "$tmp/kill.ini" --out "$tmp/kref" --quiet
OMP_NUM_THREADS=1 "$DSGAP" run "$tmp/kill.ini" --workers 2 --out "$tmp/k" 2>"$tmp/kerr.txt" &
parent=$!
victim=
for _ in $(seq 600); do # wait for the first finished cell (at most 60 s)
  if [ -n "$(ls -d "$tmp"/k/cells/t.w/l*-h* 2>/dev/null)" ]; then
    victim=$(pgrep -P $parent | tail -1)
    break
  fi
  sleep 0.1
done
[ -n "$victim" ] && kill -9 "$victim"
wait $parent
prc=$?
done_after=$(ls -d "$tmp"/k/cells/t.w/l*-h* 2>/dev/null | wc -l)
check "killed a worker (pid ${victim:-none}) mid-run: the run fails (rc $prc)" test -n "$victim" -a $prc -ne 0
check "the parent names the killed worker" grep -q "was killed (SIGKILL, " "$tmp/kerr.txt"
check "some cells finished, not all ($done_after of 8): no merged results" test "$done_after" -lt 8 -a "$done_after" -ge 1 -a ! -e "$tmp/k/t.w/metrics.csv"
check "finished cells are complete (metrics.csv + run.json each)" \
  bash -c "for d in '$tmp'/k/cells/t.w/l*-h*; do [ -s \$d/metrics.csv ] && [ -s \$d/run.json ] || exit 1; done"
# the surviving worker did all of its part: only the killed one's cells can be missing
w0=$("$DSGAP" run "$tmp/kill.ini" --list --worker 0/2 2>/dev/null | cut -d' ' -f2 | tr '\n' ' ')
w1=$("$DSGAP" run "$tmp/kill.ini" --list --worker 1/2 2>/dev/null | cut -d' ' -f2 | tr '\n' ' ')
check "the other worker finished its part" bash -c "all_there() { for c in \"\$@\"; do [ -e '$tmp/k/cells/'\$c/run.json ] || return 1; done; }; all_there $w0 || all_there $w1"
"$DSGAP" run "$tmp/kill.ini" --out "$tmp/k" 2>"$tmp/err.txt"
check "the rerun finishes the batch" test $? -eq 0 -a -s "$tmp/k/t.w/metrics.csv"
check "the rerun ran only the missing cells ($((8 - done_after)))" grep -q "$done_after of 8 cells already done, $((8 - done_after)) to run" "$tmp/err.txt"
check "after the kill and the rerun: rows identical to an uninterrupted run" same_rows "$tmp/k/t.w/metrics.csv" "$tmp/kref/t.w/metrics.csv"
check "no temporary folders left" test -z "$(find "$tmp/k" -name '*.tmp.*')"

# --- the merged folders are results directories --------------------------------------------------------
"$DSGAP" decompose "$tmp/m3/synthetic.w1" >/dev/null 2>&1
check "dsgap decompose reads a merged run" test -s "$tmp/m3/synthetic.w1/decomposition.md" -a -s "$tmp/m3/synthetic.w1/ablation.tex"
"$DSGAP" plot "$tmp/m3/synthetic.w1" >/dev/null 2>&1
check "dsgap plot reads a merged run" test -s "$tmp/m3/synthetic.w1/figures/error_vs_density.png"

finish

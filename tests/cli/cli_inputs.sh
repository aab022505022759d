#!/usr/bin/env bash
# cli_inputs.sh: the second bad-input campaign (issue 52), one case per line of its reproductions.
# Each bad case: a non-zero exit, one line "dsgap: error: ..." that names the item and the range or
# the fix, and nothing left behind (no output folder, no temporary, inputs unchanged):
#   an output folder that is, holds or lies inside an input (decompose --samples, refreshstats,
#   generate, attnstats: one check, util/files.h); the same sample folder twice, a FIFO as a sample
#   list; empty or repeated list items; merge of a shard computed before its trace changed or
#   whose experiment file changed since;
#   index vectors of a million entries (no pairwise check) and work past DSGAP_MAX_HOURS (replay,
#   attnstats, callspeed: refused at once from the headers); run with a synthetic trace and
#   decompose --samples past a file-size limit (no folder left); policy switches out of range;
#   --out ''; control characters in a message; memory sizes that read as 0.0; limits of address
#   space from the binary's floor to 500 MB above (an answer or one line, no hang, no folder left).
# Run: ctest -R cli_inputs (needs $DSGAP; /usr/bin/python3 with h5py for the big-index traces);
# argument: tests/util/faultfs.c's faultfs.so, for the full-disk case.
. "$(dirname "$0")/../lib.sh" inputs
PY=/usr/bin/python3
in=$tmp/in
mkdir -p "$in"
t=$in/t.h5
"$DSGAP" synth --out "$t" --grid 2x8x16 --heads 2 --layers 2 --steps 3 --head-dim 32 --seed 3 >/dev/null || { echo "FAIL synth"; exit 1; }
for s in a1 a2; do
  "$DSGAP" replay "$t" --out "$in/x.$s" --policies ladder --density 0.5 --schedule warmup=1 --quiet >/dev/null 2>&1 ||
    { echo "FAIL replay"; exit 1; }
done
cp -r "$in/x.a1" "$in/y.a1"
mkdir -p "$in/model"
echo x > "$in/text.safetensors"
printf 'a=x.a1\nb=y.a1\n' > "$in/list"
sums() { (cd "$1" && find . -type f | sort | xargs md5sum); }
before=$(sums "$in")
fresh() { rm -rf "$tmp/o"; } # the output the next case must not leave

# --- one output-folder check: no --out is, holds or lies inside an input ---------------------------
refused "decompose --samples --out a listed run" "decompose: --out $in/x.a1 holds the input" - \
  "$DSGAP" decompose --samples "$in/list" --out "$in/x.a1" --boot 10
refused "refreshstats --out an input run" "refreshstats: --out $in/x.a1 holds the input" - \
  "$DSGAP" refreshstats --schedules a1,a2 --boot 10 --out "$in/x.a1" "$in/x"
refused "attnstats --out the folder of its trace" "attnstats: --out $in holds the input $t" - \
  "$DSGAP" attnstats --out "$in" --quiet a="$t"
refused "generate --out MODEL_DIR" "generate: --out $in/model is the input $in/model" - \
  "$DSGAP" generate --model "$in/model" --text "$in/text.safetensors" --seed 1 --latent 1x4x4 --out "$in/model"
refused "generate --out inside MODEL_DIR" "generate: --out $in/model/g lies inside the input folder $in/model" \
  "$in/model/g" "$DSGAP" generate --model "$in/model" --text "$in/text.safetensors" --seed 1 --latent 1x4x4 \
  --out "$in/model/g"
refused "capture --out a new file inside MODEL_DIR" "refusing to write $in/model/t.h5: it lies inside the input folder $in/model" \
  "$in/model/t.h5" "$DSGAP" capture --model "$in/model" --text "$in/text.safetensors" --seed 1 --latent 1x4x4 \
  --out "$in/model/t.h5"
check "the inputs are unchanged" [ "$(sums "$in")" = "$before" ]

# --- lists checked before work ---------------------------------------------------------------------
printf 'a=x.a1\nb=./x.a1/\n' > "$in/twice"
refused "a sample folder listed twice under two labels" "samples a and b are the same folder" "$tmp/o" \
  "$DSGAP" decompose --samples "$in/twice" --out "$tmp/o"
mkfifo "$tmp/fifo"
refused "a FIFO as the sample list (answers at once)" "$tmp/fifo: cannot open the sample list: not a regular file" \
  "$tmp/o" "$DSGAP" decompose --samples "$tmp/fifo" --out "$tmp/o"
refused "attnstats: one trace twice in a source" "attnstats: source a lists sample t twice (traces 1 and 2)" "$tmp/o" \
  "$DSGAP" attnstats --out "$tmp/o" --quiet "a=$t,$in/../in/t.h5"
refused "attnstats: two sources with one label" "attnstats: two sources labelled a" "$tmp/o" \
  "$DSGAP" attnstats --out "$tmp/o" --quiet "a=$t" "a=$t"
refused "compare: a fidelity run twice" "compare: the fidelity run $in/./x.a1 is given twice" "$tmp/o" \
  "$DSGAP" compare "$in/x.a1" "$in/./x.a1" --out "$tmp/o"
refused "drift: a run twice" "drift: the run $in/x.a1/ is given twice (as $in/x.a1)" "$tmp/o" \
  "$DSGAP" drift "$in/x.a1" "$in/x.a1/" --out "$tmp/o"
refused "callspeed: a grid twice" "callspeed: --grids '1x8x16,1x8x16': '1x8x16' is listed twice" "$tmp/cs3.csv" \
  "$DSGAP" callspeed --device cpu --grids 1x8x16,1x8x16 --csv "$tmp/cs3.csv"
refused "callspeed: a head count twice" "callspeed: --heads '2,1,2': 2 is listed twice (items 1 and 3)" "$tmp/cs3.csv" \
  "$DSGAP" callspeed --device cpu --grids 1x8x16 --heads 2,1,2 --csv "$tmp/cs3.csv"
refused "refreshstats --schedules with an empty item" "--schedules 'a1,,a2': item 2 is empty" "$tmp/o" \
  "$DSGAP" refreshstats --schedules a1,,a2 --out "$tmp/o" "$in/x"
refused "refreshstats --schedules with a repeat" "--schedules 'a1,a1': 'a1' is listed twice" "$tmp/o" \
  "$DSGAP" refreshstats --schedules a1,a1 --out "$tmp/o" "$in/x"
T='[traces]\nt = synth: grid=1x8x16 heads=1 layers=2 steps=3 head_dim=32 seed=3\n[schedules]\n'
bad_ini "run: dense_layers=99 on a 2-layer trace (replay's rule)" \
  "$tmp/bad.ini:4: schedule 'a' on trace 't': dense layer 99 is not in the trace (its layers: 0,1)" "${T}a = dense_layers=99\n"
bad_ini "run: warmup=5 on a 3-step trace (replay's rule)" \
  "$tmp/bad.ini:4: schedule 'a' on trace 't': warmup=5 covers every step of the trace (its steps: 0..2)" "${T}a = warmup=5\n"
refused "replay: the same rule, the same words" "$t: schedule warmup=5 covers every step of the trace (its steps: 0..2)" \
  "$tmp/o" "$DSGAP" replay "$t" --schedule warmup=5 --out "$tmp/o"
refused "--policies ',,,'" "policy list ',,,': item 1 is empty" "$tmp/o" \
  "$DSGAP" replay "$t" --policies ,,, --out "$tmp/o"
refused "sta/window=-3 says the range" "bad switch 'window=-3' (window= takes an integer in [0, 1048576])" "$tmp/o" \
  "$DSGAP" replay "$t" --policies sta/window=-3 --out "$tmp/o"
refused "mc-sparse/groups=0 names the keys" "bad switch 'groups=0' (no key 'groups'; keys: group kv" "$tmp/o" \
  "$DSGAP" replay "$t" --policies mc-sparse/groups=0 --out "$tmp/o"
refused "mc-sparse/group=hex names the values" "(group= takes raster|tile3d|pca|query|kmeans|voxel)" "$tmp/o" \
  "$DSGAP" replay "$t" --policies mc-sparse/group=hex --out "$tmp/o"
for cmd in "replay $t" "run $in/none.ini" "merge $in" "synth" "decompose --samples $in/list"; do
  # shellcheck disable=SC2086 # the command and its operand, split on purpose
  refused "${cmd%% *} --out ''" "${cmd%% *}: --out '' names no file or folder" - "$DSGAP" $cmd --out ''
done

# --- merge checks each shard's input.sum as run does -------------------------------------------------
cp "$t" "$in/m.h5"
printf '[traces]\nm = m.h5\n[policies]\nlist = dense, oracle\n[densities]\nlist = 0.5\n[schedules]\na = warmup=1\n' > "$in/m.ini"
"$DSGAP" run "$in/m.ini" --shard 0/2 --out "$tmp/s0" --quiet >/dev/null 2>&1
"$DSGAP" run "$in/m.ini" --shard 1/2 --out "$tmp/s1" --quiet >/dev/null 2>&1
"$DSGAP" merge "$tmp/s0" "$tmp/s1" --out "$tmp/m_ok" --quiet 2>"$tmp/err"
check "merge of shards of one trace: exit 0, the merged rows" eval '[ $? -eq 0 ] && [ -s "$tmp/m_ok/m.a/metrics.csv" ]'
rm -f "$in/m.h5"
"$DSGAP" synth --out "$in/m.h5" --grid 2x8x16 --heads 2 --layers 2 --steps 3 --head-dim 32 --seed 4 >/dev/null
rm -rf "$tmp/s1"
"$DSGAP" run "$in/m.ini" --shard 1/2 --out "$tmp/s1" --quiet >/dev/null 2>&1
refused "merge of a shard made before its trace changed" \
  "merge: cell m.a/l0-h0 in $tmp/s0 was computed from other contents of $in/m.h5 (it changed since): rerun dsgap run with --out $tmp/s0" \
  "$tmp/m_stale" "$DSGAP" merge "$tmp/s0" "$tmp/s1" --out "$tmp/m_stale" --quiet
# the experiment file changed since the shards ran (another density): refused as run refuses its --out
rm -rf "$tmp/s0" && "$DSGAP" run "$in/m.ini" --shard 0/2 --out "$tmp/s0" --quiet >/dev/null 2>&1
sed -i 's/list = 0.5/list = 0.25/' "$in/m.ini"
refused "merge of shards whose experiment file changed since" \
  "merge: $in/m.ini changed since the shards in $tmp/s0 were run (fingerprint" \
  "$tmp/m_ini" "$DSGAP" merge "$tmp/s0" "$tmp/s1" --out "$tmp/m_ini" --quiet
sed -i 's/list = 0.25/list = 0.5/' "$in/m.ini"
"$DSGAP" merge "$tmp/s0" "$tmp/s1" --out "$tmp/m_back" --quiet 2>"$tmp/err"
check "the file as the shards ran it: the merge goes through" eval '[ $? -eq 0 ] && [ -s "$tmp/m_back/m.a/metrics.csv" ]'
mv "$in/m.ini" "$in/m.moved"
"$DSGAP" merge "$tmp/s0" "$tmp/s1" --out "$tmp/m_gone" --quiet 2>"$tmp/err"
check "the experiment file gone: merged from the shards' record, with a warning" \
  eval '[ $? -eq 0 ] && grep -q "experiment file $in/m.ini of $tmp/s0 is not here" "$tmp/err"'
mv "$in/m.moved" "$in/m.ini"

# --- work bounded before it starts -------------------------------------------------------------------
# big N DST NAME: a copy of t.h5 whose /NAME_index has N entries (q, k, v declared to match, never
# written); REPEAT=1: its last entry repeats its first
big() {
  REPEAT=${REPEAT:-0} "$PY" - "$t" "$2" "$3" "$1" <<'PYEOF'
import h5py, numpy as np, os, sys
src, dst, what, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
s = h5py.File(src, 'r'); d = h5py.File(dst, 'w')
for k, v in s.attrs.items(): d.attrs[k] = v
shape = list(s['q'].shape); axis = {'step': 0, 'layer': 1, 'head': 2}[what]; shape[axis] = n
for name in ('q', 'k', 'v'):
    d.create_dataset(name, shape=tuple(shape), dtype='f4', chunks=(1, 1, 1, shape[3], shape[4]))
for name in s.keys():
    if name in ('q', 'k', 'v'): continue
    a = s[name][...]
    if name == what + '_index':
        a = np.arange(n, dtype=a.dtype)
        if os.environ['REPEAT'] == '1': a[-1] = a[0]
    elif name in ('timestep', 'sigma') and axis == 0:
        a = np.resize(a, n)
    d[name] = a
d.close()
PYEOF
}
if "$PY" -c 'import h5py' 2>/dev/null; then
  REPEAT=1 big 1000000 "$in/heads_dup.h5" head
  start=$(date +%s)
  refused "a million heads, one repeated: found at once (no pairwise check)" \
    "head index 0 appears twice in /head_index (positions 0 and 999999)" "$tmp/o" \
    "$DSGAP" replay "$in/heads_dup.h5" --out "$tmp/o" --quiet
  check "  ... within 10 s ($(( $(date +%s) - start )) s)" [ $(( $(date +%s) - start )) -lt 10 ]
  REPEAT=1 big 1000000 "$in/steps_dup.h5" step
  refused "a million steps, one repeated: found at once" "step index 0 appears twice" "$tmp/o" \
    "$DSGAP" replay "$in/steps_dup.h5" --out "$tmp/o" --quiet
  big 1000000 "$in/heads.h5" head
  refused "a replay of 6 million units: refused from the header, with the limit and what helps" \
    "replay: $in/heads.h5: 6000000 units of 256 tokens" "$tmp/o" env DSGAP_MAX_HOURS=1 OMP_NUM_THREADS=2 "$DSGAP" replay "$in/heads.h5" --out "$tmp/o" --quiet
  check "  ... naming the limit and the options that help" grep -q "past the limit of 60 min: --device gpu, or dsgap run" "$tmp/stderr"
else
  echo "skip the big-index traces (no h5py)"
fi
refused "attnstats past DSGAP_MAX_HOURS: refused before any unit" "attnstats: 12 units of up to 256 tokens" "$tmp/o" \
  env DSGAP_MAX_HOURS=1e-9 "$DSGAP" attnstats --out "$tmp/o" --quiet a="$t"
refused "callspeed --device cpu 16x64x64 x 12 heads: refused from its grids, no CSV made" \
  "callspeed: 1 grid x 1 head count" "$tmp/cs.csv" env DSGAP_MAX_HOURS=1 OMP_NUM_THREADS=2 \
  "$DSGAP" callspeed --device cpu --grids 16x64x64 --heads 12 --csv "$tmp/cs.csv"
check "  ... naming what helps" grep -q "smaller --grids or --heads, --budget S, or --device gpu" "$tmp/stderr"
timeout 60 "$DSGAP" callspeed --device cpu --grids 1x8x16 --heads 1 --policies mc-sparse --reps 2 --csv "$tmp/cs2.csv" \
  >/dev/null 2>"$tmp/err"
check "callspeed --device cpu shows its progress with an ETA" eval '[ $? -eq 0 ] && grep -q "ETA" "$tmp/err"'

# --- a CSV that bench or callspeed appends to is one of its own ------------------------------------
B=(--device cpu --tokens 256 --heads 1 --reps 1 --layer-step none)
"$DSGAP" bench "${B[@]}" --csv "$tmp/bench.csv" >/dev/null 2>&1
"$DSGAP" bench "${B[@]}" --csv "$tmp/bench.csv" >/dev/null 2>"$tmp/err"
check "bench appends to its own CSV (exit 0, rows twice)" \
  eval '[ $? -eq 0 ] && [ $(grep -c "^replay_dense_ms," "$tmp/bench.csv") -eq 2 ]'
cs=$(md5sum < "$tmp/cs2.csv") bs=$(md5sum < "$tmp/bench.csv")
refused "bench --csv a callspeed CSV" "bench: $tmp/cs2.csv is not a bench CSV of this version" - \
  "$DSGAP" bench "${B[@]}" --csv "$tmp/cs2.csv"
refused "callspeed --csv a bench CSV" "callspeed: $tmp/bench.csv is not a callspeed CSV of this version" - \
  "$DSGAP" callspeed --device cpu --grids 1x8x16 --heads 1 --csv "$tmp/bench.csv"
check "  ... both files unchanged" [ "$(md5sum < "$tmp/cs2.csv")" = "$cs" -a "$(md5sum < "$tmp/bench.csv")" = "$bs" ]
refused "bench --csv a FIFO (answers at once)" "bench: $tmp/fifo is not a regular file; nothing written" - \
  "$DSGAP" bench "${B[@]}" --csv "$tmp/fifo"

# --- nothing partial on a failure ----------------------------------------------------------------------
printf '[traces]\nt = synth: grid=1x8x16 heads=1 layers=1 steps=3 head_dim=32 seed=3\n[policies]\nlist = dense, oracle\n[densities]\nlist = 0.5\n[schedules]\na = warmup=1\n' > "$in/s.ini"
refused "run with a synthetic trace past ulimit -f: no output folder" "File too large" "$tmp/rf" \
  bash -c 'ulimit -f 4; exec "$0" "$@"' "$DSGAP" run "$in/s.ini" --out "$tmp/rf" --quiet
if [ -n "${1:-}" ]; then # a full disk (tests/util/faultfs.c) at each of the run's first write calls
  left=""
  for n in 1 2 3 4 5 6 8 10 12 16 20 24; do
    rm -rf "$tmp/w"; mkdir -p "$tmp/w"
    FAULTFS_DIR=$tmp/w FAULTFS_N=$n LD_PRELOAD=$1 "$DSGAP" run "$in/s.ini" --out "$tmp/w/o" --quiet >/dev/null 2>"$tmp/err" &&
      left="$left call $n: exit 0;"
    [ -e "$tmp/w/o" ] && left="$left call $n: $(find "$tmp/w/o" | head -3 | tr '\n' ' ');"
  done
  check "run with a synthetic trace on a full disk leaves no output folder${left:+ ($left)}" [ -z "$left" ]
fi
refused "decompose --samples past ulimit -f: no empty --out" "File too large" "$tmp/dz" \
  bash -c 'ulimit -f 1; exec "$0" "$@"' "$DSGAP" decompose --samples "$in/list" --out "$tmp/dz" --boot 10

# --- under an address-space limit (ulimit -v): a result or one line, never a hang or a partial folder --
# (OpenBLAS retries forever where its work buffers do not fit: dsgap probes and takes them first, runs
# OpenBLAS without its own threads under a limit, whose start would otherwise block the first fork).
# The limits count from the binary's own floor, the least (in steps of 25 MB) at which `dsgap info`
# loads and answers: a CUDA build maps about 600 MB of libraries before main.
"$DSGAP" synth --out "$in/v.h5" --grid 4x32x32 --heads 2 --layers 1 --steps 2 --head-dim 64 --seed 4 >/dev/null
floor=""
for kib in $(seq 50000 25000 4000000); do
  (ulimit -v $kib; exec "$DSGAP" info "$in/v.h5") >/dev/null 2>&1 && { floor=$kib; break; }
done
oom=0 ok=0 bad=""
[ -n "$floor" ] || bad="info never answers under 4 GB;"
for off in 0 50000 150000 250000 300000 310000 320000 330000 340000 350000 360000 400000 500000; do
  [ -n "$floor" ] || break
  kib=$((floor + off))
  rm -rf "$tmp/v"
  (ulimit -v $kib; exec env OMP_NUM_THREADS=2 timeout 30 "$DSGAP" info "$in/v.h5") >/dev/null 2>"$tmp/err" ||
    bad="$bad info at $kib KiB: status $? $(head -c 120 "$tmp/err");"
  (ulimit -v $kib; exec env OMP_NUM_THREADS=2 timeout 30 "$DSGAP" replay "$in/v.h5" --policies dense,mc-sparse \
    --out "$tmp/v" --quiet) >/dev/null 2>"$tmp/err"
  st=$?
  if [ $st -eq 0 ] && [ -s "$tmp/v/metrics.csv" ]; then ok=$((ok + 1))
  elif [ $st -eq 1 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && [ ! -e "$tmp/v" ] &&
       grep -q "^dsgap: \(fatal: out of memory: .* wanted .*while reading\|error:\) $in/v.h5" "$tmp/err" &&
       ! grep -q " 0\.0*0 \(Gi\|Mi\|Ki\)\?B" "$tmp/err"; then oom=$((oom + 1))
  else bad="$bad replay at $kib KiB: status $st, $(head -c 160 "$tmp/err" | tr '\n' ' ')$( [ -e "$tmp/v" ] && echo ", left $(ls -A "$tmp/v")");"; fi
done
check "ulimit -v from the floor ($floor KiB) to 500 MB above: info answers; replay gives its rows or one line naming the input, no folder left (ok $ok, out of memory $oom)${bad:+:$bad}" \
  eval '[ -z "$bad" ] && [ $ok -ge 1 ] && [ $oom -ge 1 ]'

# --- messages -----------------------------------------------------------------------------------------
esc=$(printf '\033')
refused "a control character in a path is shown escaped" "cannot open $tmp/t\\x1b[2J.h5" "$tmp/o" \
  "$DSGAP" replay "$tmp/t${esc}[2J.h5" --out "$tmp/o"
check "  ... and never written raw" eval '! grep -q "$esc" "$tmp/stderr"'
(cd "$tmp" && DSGAP_MEM_LIMIT_GIB=0.000001 "$DSGAP" generate --out o --plan-only --arch wan2.1-1.3b --latent 4x16x16 \
  --policies mc-sparse) >"$tmp/stdout" 2>"$tmp/stderr"
check "a memory plan past a tiny limit says its sizes (not 0.0 GB ... 0.0 GiB)" \
  eval '[ $? -eq 1 ] && grep -q "needs 3.49 GiB on the device, which has 1.05 KiB" "$tmp/stderr" && ! grep -q " 0\.0 Gi\?B" "$tmp/stderr" "$tmp/stdout"'
# a CSV that callspeed appends to is replaced whole at the end: a run killed midway leaves it as it
# was (byte for byte) and no temporary beside it
cp "$tmp/cs2.csv" "$tmp/cs2.before"
"$DSGAP" callspeed --device cpu --grids 1x8x16,16x32x32 --heads 1,2 --policies mc-sparse --csv "$tmp/cs2.csv" \
  >/dev/null 2>&1 &
cs_pid=$!
for _ in $(seq 50); do [ -n "$(ls "$tmp"/cs2.csv.tmp.* 2>/dev/null)" ] && break; sleep 0.1; done
sleep 0.5
kill -TERM $cs_pid 2>/dev/null
wait $cs_pid
check "callspeed killed midway: its CSV as before, no temporary left" \
  eval 'cmp -s "$tmp/cs2.csv" "$tmp/cs2.before" && [ -z "$(ls "$tmp"/cs2.csv.tmp.* 2>/dev/null)" ]'
finish

#!/usr/bin/env bash
# faults.sh: nothing lost, nothing silently wrong (issue 18), for every command that writes files.
#   full disk: each writer runs under tests/util/faultfs.c (LD_PRELOAD) with its Nth write-level call
#     failing with ENOSPC: every N up to the cap (FAULTS_CAP, default 12; 0: every call of every
#     writer), then every k-th (k: about (calls - cap) / cap) and the last call; each failure must exit non-zero (never a crash) with exactly one line on
#     stderr naming a file, leave no file and no empty folder behind and leave its inputs unchanged;
#   SIGTERM at random points of replay and run: no temporaries left, a rerun gives the same output;
#   the reproductions: 1 (--out names an input), 2 (segfault on a full disk: the loops), 7 (stale
#     tables after a replay), 10 (SIGTERM / ulimit -f temporaries, a partial decompose), 12 (two
#     writers on one folder).
# Run: ctest -R faults (needs $DSGAP, $DSGAP_SOURCE, the wan_models fixture); argument: faultfs.so
. "$(dirname "$0")/../lib.sh" faults
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
FAULTFS=${1:?usage: faults.sh faultfs.so}
MODELS=${WAN_MODELS:-$PWD/wan_models}
FIX=$DSGAP_SOURCE/tests/fixtures/wan
CAP=${FAULTS_CAP:-12} # every write call up to CAP, then about CAP more evenly spaced (0: all)
# the loops below give slow writers (one run: seconds) a smaller cap, scaled from this one
scaled() { if [ "$CAP" -eq 0 ]; then echo 0; else echo $(( (CAP * $1 + 11) / 12 )); fi; }
rows() { cut -d, -f1-13 "$1"; } # every column of metrics.csv but time_ms
sums() { (cd "$1" && find . -type f ! -name '.dsgap.lock' -print0 | sort -z | xargs -0 -r md5sum); }
tree() { (cd "$1" && find . ! -name '.dsgap.lock' | sort); }

IN=$tmp/in
mkdir -p "$IN"
"$DSGAP" synth --out "$IN/t.h5" --grid 2x8x16 --heads 2 --layers 1 --steps 3 --head-dim 32 >/dev/null || exit 1
"$DSGAP" replay "$IN/t.h5" --out "$IN/res" --policies ladder,factorial --density 0.25,0.5 --quiet >/dev/null 2>&1 || exit 1
HAVE_MODELS=0
[ -d "$MODELS/orig_hd64" ] && HAVE_MODELS=1

# --- full disk ------------------------------------------------------------------------------------
# fault_loop NAME SETUP-FUNCTION COMMAND...: W is the writable folder (FAULTFS_DIR); SETUP fills it
fault_loop() {
  local name=$1 setup=$2; shift 2
  W=$tmp/w
  rm -rf "$W"; mkdir -p "$W"; $setup
  rm -f "$tmp/count"
  FAULTFS_DIR=$W FAULTFS_COUNT=$tmp/count LD_PRELOAD=$FAULTFS "$@" >/dev/null 2>"$tmp/err0"
  local rc=$? total
  total=$(awk 'NR == 1 { print $2 }' "$tmp/count" 2>/dev/null)
  if [ $rc -ne 0 ] || [ -z "$total" ]; then
    bad "$name: runs under the interposer (rc $rc)"; cat "$tmp/err0"; return
  fi
  # every call up to the cap, then every step-th, then the last
  local ns="" n first=$CAP step=1
  if [ "$CAP" -gt 0 ] && [ "$total" -gt "$CAP" ]; then
    step=$(( (total - CAP + CAP - 1) / CAP ))
  else
    first=$total
  fi
  for ((n = 1; n <= first; n++)); do ns="$ns $n"; done
  for ((n = first + step; n < total; n += step)); do ns="$ns $n"; done
  [ "$first" -lt "$total" ] && ns="$ns $total"
  local errs=0 tried=0 why=""
  for n in $ns; do
    rm -rf "$W"; mkdir -p "$W"; $setup
    local before inputs
    before=$(tree "$W"); inputs=$(inputs_of "$W")
    FAULTFS_DIR=$W FAULTFS_N=$n LD_PRELOAD=$FAULTFS "$@" >/dev/null 2>"$tmp/err"
    rc=$?
    tried=$((tried + 1))
    local lines; lines=$(wc -l < "$tmp/err")
    if [ $rc -eq 0 ]; then why="call $n of $total: exit 0 under a failing write"
    elif [ $rc -gt 128 ]; then why="call $n of $total: killed by signal $((rc - 128))"
    elif [ "$lines" -ne 1 ]; then why="call $n of $total: $lines lines on stderr: $(head -c 600 "$tmp/err")"
    elif ! grep -q "^dsgap: error: .*$W" "$tmp/err"; then why="call $n of $total: the line names no file of $W: $(cat "$tmp/err")"
    elif [ -n "$(find "$W" -name '*.tmp.*' -o -name .dsgap.lock | head -3)" ]; then why="call $n of $total: temporaries left: $(find "$W" -name '*.tmp.*' -o -name .dsgap.lock | head -3 | tr '\n' ' ')"
    elif [ -z "${RESUMABLE:-}" ] && [ "$(tree "$W")" != "$before" ]; then why="call $n of $total: left behind: $(diff <(echo "$before") <(tree "$W") | grep '^>' | head -5 | tr '\n' ' ')"
    elif [ "$(inputs_of "$W")" != "$inputs" ]; then why="call $n of $total: an input changed"
    else continue; fi
    errs=$((errs + 1)); break
  done
  if [ $errs -eq 0 ]; then ok "$name: full disk at $tried of $total write calls: one line, exit 1, nothing left, inputs unchanged"
  else bad "$name: $why"; fi
}

none() { :; }
inputs_of() { if [ -n "${RESUMABLE:-}" ]; then sums "$IN"; else sums "$1"; sums "$IN"; fi; }
res_copy() { cp -r "$IN/res" "$W/res"; }
fault_loop "synth" none "$DSGAP" synth --out "$tmp/w/t.h5" --grid 2x8x16 --heads 2 --layers 1 --steps 3 --head-dim 32
fault_loop "replay" none "$DSGAP" replay "$IN/t.h5" --out "$tmp/w/rep" --policies dense,oracle,mc-sparse --density 0.5 --quiet
fault_loop "decompose" res_copy "$DSGAP" decompose "$tmp/w/res" --boot 20
if command -v gnuplot >/dev/null; then
  CAP=$(scaled 6) fault_loop "plot" res_copy "$DSGAP" plot "$tmp/w/res" --boot 20
fi
if [ $HAVE_MODELS -eq 1 ]; then
  CAP=$(scaled 6) fault_loop "capture" none "$DSGAP" capture --model "$MODELS/orig_hd64" --text "$FIX/text.safetensors" \
    --latent 4x16x24 --seed 1 --steps 2 --guidance 1 --quiet --out "$tmp/w/trace.h5"
  # generate publishes generate.csv, generate.json and every latents file together, or none
  CAP=$(scaled 6) fault_loop "generate" none "$DSGAP" generate --model "$MODELS/orig_hd64" --text "$FIX/text.safetensors" \
    --latent 4x16x24 --seed 1 --steps 2 --guidance 1 --policies dense,mc-sparse --density 0.5 --quiet --out "$tmp/w/gen/x"
fi

printf '[traces]\nt = synth: grid=2x8x16 heads=2 layers=1 steps=3 head_dim=32 seed=3\n[policies]\nlist = dense, oracle, mc-sparse\n[densities]\nlist = 0.5\n[schedules]\nw1 = warmup=1\n' > "$IN/x.ini"
"$DSGAP" run "$IN/x.ini" --shard 0/2 --out "$IN/s0" --quiet >/dev/null 2>&1
"$DSGAP" run "$IN/x.ini" --shard 1/2 --out "$IN/s1" --quiet >/dev/null 2>&1
# run keeps what it needs to resume (experiment.json, traces, finished cells): no temporaries, though
RESUMABLE=1 CAP=$(scaled 8) fault_loop "run (resumable state kept)" none "$DSGAP" run "$IN/x.ini" --out "$tmp/w/run" --quiet
RESUMABLE=1 CAP=$(scaled 8) fault_loop "merge (no temporaries)" none "$DSGAP" merge "$IN/s0" "$IN/s1" --out "$tmp/w/m" --quiet

# --- reproduction 1: an output that names an input ------------------------------------------------
if [ $HAVE_MODELS -eq 1 ]; then
  cp -r "$MODELS/orig_hd64" "$tmp/m"; cp "$FIX/text.safetensors" "$tmp/text.st"
  before=$(sums "$tmp/m"; md5sum < "$tmp/text.st")
  ck=$(cd "$tmp/m" && ls *.safetensors | head -1)
  "$DSGAP" capture --model "$tmp/m" --text "$tmp/text.st" --latent 4x16x24 --steps 2 --quiet --out "$tmp/m/$ck" 2>"$tmp/err"
  check "repro 1: capture --out = the checkpoint is refused in one line naming both" \
    test $? -eq 1 -a "$(wc -l < "$tmp/err")" -eq 1 -a -n "$(grep "refusing to write $tmp/m/$ck: .*input $tmp/m" "$tmp/err")"
  "$DSGAP" capture --model "$tmp/m" --text "$tmp/text.st" --latent 4x16x24 --steps 2 --quiet --out "$tmp/text.st" 2>"$tmp/err"
  check "repro 1: capture --out = --text is refused" test $? -eq 1 -a -n "$(grep "refusing to write $tmp/text.st: it is the input $tmp/text.st" "$tmp/err")"
  ln -s text.st "$tmp/link.st"
  "$DSGAP" capture --model "$tmp/m" --text "$tmp/link.st" --latent 4x16x24 --steps 2 --quiet --out "$tmp/text.st" 2>/dev/null
  check "repro 1: an input reached through a symbolic link is recognised" test $? -eq 1
  check "repro 1: the checkpoint and the prompt are unchanged" test "$(sums "$tmp/m"; md5sum < "$tmp/text.st")" = "$before"
fi
cp "$IN/t.h5" "$tmp/t2.h5"
"$DSGAP" synth --out "$tmp/t2.h5" --grid 2x8x16 --heads 2 --layers 1 --steps 2 >/dev/null 2>&1
check "synth may overwrite a trace that is not its input" test $? -eq 0
mkdir -p "$tmp/rin"; cp "$IN/t.h5" "$tmp/rin/metrics.csv"
"$DSGAP" replay "$tmp/rin/metrics.csv" --out "$tmp/rin" --policies dense --density 0.5 --quiet 2>"$tmp/err"
check "replay refuses an --out folder whose metrics.csv is the trace" \
  test $? -ne 0 -a -n "$(grep "refusing to write $tmp/rin/metrics.csv" "$tmp/err")" -a "$(md5sum < "$tmp/rin/metrics.csv")" = "$(md5sum < "$IN/t.h5")"

# --- reproduction 7: derived tables of an earlier replay ------------------------------------------
cp -r "$IN/res" "$tmp/r7"
"$DSGAP" decompose "$tmp/r7" --boot 10 >/dev/null 2>&1
"$DSGAP" replay "$IN/t.h5" --out "$tmp/r7" --policies ladder,factorial --density 0.25,0.5 --quiet >/dev/null 2>"$tmp/err"
check "repro 7: a replay removes the stale decomposition.* and ablation.* and says so in one warning" \
  test $? -eq 0 -a ! -e "$tmp/r7/decomposition.csv" -a ! -e "$tmp/r7/ablation.md" -a "$(grep -c 'warning: replay: removed decomposition.csv' "$tmp/err")" -eq 1
check "the replay's rows are those of the first replay (all but time_ms)" cmp -s <(rows "$tmp/r7/metrics.csv") <(rows "$IN/res/metrics.csv")

# --- reproduction 12: two writers on one folder ---------------------------------------------------
"$DSGAP" synth --out "$tmp/big.h5" --grid 4x16x16 --heads 4 --layers 2 --steps 6 --head-dim 64 >/dev/null
"$DSGAP" replay "$tmp/big.h5" --out "$tmp/r12" --policies all --density 0.1,0.2,0.3 --quiet >/dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/r12/.dsgap.lock" ] && break; sleep 0.05; done
"$DSGAP" replay "$IN/t.h5" --out "$tmp/r12" --policies dense --density 0.5 --quiet 2>"$tmp/err"
rc=$?
check "repro 12: a second replay into a folder in use is refused, naming the holder's pid" \
  test $rc -eq 1 -a -n "$(grep "$tmp/r12 is in use by another dsgap (pid $pid on" "$tmp/err")"
wait $pid
check "repro 12: the first replay completes and removes its lock" test $? -eq 0 -a -s "$tmp/r12/metrics.csv" -a ! -e "$tmp/r12/.dsgap.lock"
cp "$tmp/r12/metrics.csv" "$tmp/r12.ref"

# --- reproductions 11 and 12 for run: a second run on one --out; workers die with their parent --
printf '[traces]\nt = synth: grid=4x16x16 heads=2 layers=2 steps=4 head_dim=64 seed=3\n[policies]\nlist = ladder\n[densities]\nlist = 0.1, 0.3\n[schedules]\nw1 = warmup=1\n' > "$tmp/slow.ini"
"$DSGAP" run "$tmp/slow.ini" --out "$tmp/run12" --quiet >/dev/null 2>&1 &
pid=$!
for _ in $(seq 200); do [ -s "$tmp/run12/.dsgap.lock" ] && break; sleep 0.05; done
"$DSGAP" run "$tmp/slow.ini" --out "$tmp/run12" --quiet 2>"$tmp/err"
rc=$?
check "repro 12: a second run on one --out is refused, naming the first one's pid" \
  test $rc -ne 0 -a -n "$(grep "$tmp/run12 is in use by another dsgap (pid $pid on" "$tmp/err")"
"$DSGAP" merge "$IN/s0" "$IN/s1" --out "$tmp/run12" --quiet 2>"$tmp/err"
check "repro 12: a merge into a folder that a run holds is refused" test $? -ne 0 -a -n "$(grep 'is in use by another dsgap' "$tmp/err")"
wait $pid
check "repro 12: the first run completes and leaves no lock" test $? -eq 0 -a -s "$tmp/run12/summary.csv" -a ! -e "$tmp/run12/.dsgap.lock"
"$DSGAP" run "$tmp/slow.ini" --out "$tmp/run11" --workers 2 --quiet >/dev/null 2>&1 &
pid=$!
kids=""
for _ in $(seq 100); do kids=$(pgrep -P $pid | tr '\n' ' '); [ -n "$kids" ] && break; sleep 0.05; done
sleep 0.3
kill -9 $pid; wait $pid 2>/dev/null
sleep 0.5
alive=0
for k in $kids; do [ -e /proc/$k ] && ! grep -q '^State:.*Z' /proc/$k/status 2>/dev/null && alive=1; done
check "repro 11: kill -9 of run --workers 2 takes its workers with it (workers: ${kids:-none seen})" test -n "$kids" -a $alive -eq 0
"$DSGAP" run "$tmp/slow.ini" --out "$tmp/run11" --quiet >/dev/null 2>&1
check "repro 11: a rerun after it completes the experiment" test $? -eq 0 -a -s "$tmp/run11/summary.csv"
same=1 clean=1
for delay in 0.4; do
  rm -rf "$tmp/run10"
  "$DSGAP" run "$tmp/slow.ini" --out "$tmp/run10" --quiet >/dev/null 2>&1 &
  pid=$!; sleep $delay; kill -TERM $pid 2>/dev/null; wait $pid
  [ -d "$tmp/run10" ] && [ -n "$(find "$tmp/run10" -name '*.tmp.*' -o -name .dsgap.lock | head -1)" ] && clean=0
  "$DSGAP" run "$tmp/slow.ini" --out "$tmp/run10" --quiet >/dev/null 2>&1 || same=0
  cmp -s "$tmp/run10/summary.csv" "$tmp/run12/summary.csv" || same=0
done
check "SIGTERM during a run leaves no temporary and no lock" test $clean -eq 1
check "a rerun after each SIGTERM of run gives the same summary.csv" test $same -eq 1
clean=1 same=1
for delay in 0.1; do
  rm -rf "$tmp/m10"
  "$DSGAP" merge "$IN/s0" "$IN/s1" --out "$tmp/m10" --quiet >/dev/null 2>&1 &
  pid=$!; sleep $delay; kill -TERM $pid 2>/dev/null; wait $pid
  [ -d "$tmp/m10" ] && [ -n "$(find "$tmp/m10" -name '*.tmp.*' -o -name .dsgap.lock | head -1)" ] && clean=0
  "$DSGAP" merge "$IN/s0" "$IN/s1" --out "$tmp/m10" --quiet >/dev/null 2>&1 || same=0
done
check "SIGTERM of merge leaves no temporary; a rerun completes" test $clean -eq 1 -a $same -eq 1

# --- reproduction 10: temporaries on SIGTERM, SIGINT and ulimit -f --------------------------------
leftovers() { find "$1" -name '*.tmp.*' | head -3; }
clean=1 same=1
for delay in 0.2 0.6; do
  rm -rf "$tmp/r10"
  "$DSGAP" replay "$tmp/big.h5" --out "$tmp/r10" --policies all --density 0.1,0.2,0.3 --quiet >/dev/null 2>&1 &
  pid=$!; sleep $delay; kill -TERM $pid 2>/dev/null; wait $pid
  [ -d "$tmp/r10" ] && [ -n "$(leftovers "$tmp/r10")" ] && clean=0
  "$DSGAP" replay "$tmp/big.h5" --out "$tmp/r10" --policies all --density 0.1,0.2,0.3 --quiet >/dev/null 2>&1 || same=0
  cmp -s <(rows "$tmp/r10/metrics.csv") <(rows "$tmp/r12.ref") || same=0
done
check "repro 10: SIGTERM at 2 points of a replay leaves no temporary" test $clean -eq 1
check "repro 10: a rerun after each SIGTERM gives the same rows" test $same -eq 1
"$DSGAP" synth --out "$tmp/sig.h5" --grid 8x16x16 --heads 8 --layers 4 --steps 8 >/dev/null 2>&1 &
pid=$!; sleep 0.3; kill -TERM $pid; wait $pid
check "repro 10: SIGTERM during synth leaves no temporary" test -z "$(find "$tmp" -maxdepth 1 -name 'sig.h5*')"
mkdir -p "$tmp/stale"; : > "$tmp/stale/t.h5.tmp.999999999"; : > "$tmp/stale/other.tmp.999999999"; : > "$tmp/stale/keep.tmp.$$"
"$DSGAP" synth --out "$tmp/stale/t.h5" --grid 2x8x16 --heads 2 --layers 1 --steps 2 >/dev/null
check "repro 10: a stale temporary of a dead process is removed by the next write of that file" \
  test ! -e "$tmp/stale/t.h5.tmp.999999999" -a -e "$tmp/stale/keep.tmp.$$"
"$DSGAP" replay "$IN/t.h5" --out "$tmp/stale" --policies dense --density 0.5 --quiet >/dev/null 2>&1
check "repro 10: a replay into the folder removes every stale temporary of dead processes (not of live ones)" \
  test ! -e "$tmp/stale/other.tmp.999999999" -a -e "$tmp/stale/keep.tmp.$$"
(ulimit -f 64; exec "$DSGAP" synth --out "$tmp/fsz.h5" --grid 4x16x16 --heads 4 --layers 2 --steps 4) >/dev/null 2>"$tmp/err"
rc=$?
check "repro 10: past ulimit -f: exit 1 (no SIGXFSZ), one line with the reason, no temporary" \
  test $rc -eq 1 -a "$(wc -l < "$tmp/err")" -eq 1 -a -n "$(grep 'File too large' "$tmp/err")" -a -z "$(find "$tmp" -maxdepth 1 -name 'fsz.h5*')"
cp -r "$IN/res" "$tmp/d10"
FAULTFS_DIR=$tmp/d10 FAULTFS_N=4 LD_PRELOAD=$FAULTFS "$DSGAP" decompose "$tmp/d10" --boot 10 >/dev/null 2>&1
check "repro 10: decompose on a full disk publishes no table at all" \
  test -z "$(find "$tmp/d10" -name 'decomposition.*' -o -name 'ablation.*')"
FAULTFS_DIR=$tmp FAULTFS_N=5 LD_PRELOAD=$FAULTFS "$DSGAP" replay "$IN/t.h5" --out "$tmp/deep/er/dir" --policies dense --density 0.5 --quiet >/dev/null 2>&1
check "repro 10: a failed replay leaves no empty folder" test ! -e "$tmp/deep"

finish

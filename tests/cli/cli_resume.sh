#!/usr/bin/env bash
# cli_resume.sh: resume is exact (issue 18, item 5; reproductions 3 and 4).
#   repro 3: a trace whose Q or K is changed in place with h5py (same shape, same attributes)
#     between `run --shard 0/2` and `run`: the cells that read a changed unit are removed with one
#     warning naming the run, the cells and the trace, and recomputed; the others are kept; the
#     merged rows are those of `dsgap replay` of the changed trace;
#   repro 4: a cell that lost its run.json (or metrics.csv, or input.sum) is recomputed and
#     installed: exit 0, the batch completes, merged output equal to an undamaged run's;
#   a rerun of a complete batch recomputes nothing.
# Run: ctest -R cli_resume (needs $DSGAP, $DSGAP_SOURCE; /usr/bin/python3 with h5py, else skipped).
. "$(dirname "$0")/../lib.sh" resume
PY=${DSGAP_PYTHON:-/usr/bin/python3}
"$PY" -c 'import h5py' 2>/dev/null || { echo "skipped: $PY has no h5py"; exit 77; }
rows() { cut -d, -f1-13 "$1"; } # every column but time_ms
same_rows() { cmp -s <(rows "$1") <(rows "$2"); }
cd "$tmp" || exit 1
"$DSGAP" synth --out t.h5 --grid 2x8x16 --heads 2 --layers 2 --steps 3 --head-dim 32 --seed 5 >/dev/null || exit 1
printf '[traces]\nt = t.h5\n[policies]\nlist = dense, oracle, mc-sparse\n[densities]\nlist = 0.5\n[schedules]\nw1 = warmup=1\n' > x.ini
RUN=t.w1
C=x/cells/$RUN

# --- reproduction 3: Q/K changed in place between two runs ------------------------------------------
"$DSGAP" run x.ini --out x --shard 0/2 --quiet 2>err.txt
check "shard 0/2 runs its cells (l0-h0, l1-h0), each with input.sum" \
  test $? -eq 0 -a -s $C/l0-h0/input.sum -a -s $C/l1-h0/input.sum -a ! -e $C/l0-h1
cp $C/l0-h0/metrics.csv l0h0.before
attrs() { "$PY" -c 'import h5py,sys; f=h5py.File(sys.argv[1],"r"); print(sorted((k,str(v)) for k,v in f.attrs.items()), f["q"].shape)' "$1"; }
a0=$(attrs t.h5)
# layer 1 of Q scaled, layer 0 head 1 of K reversed along the tokens: cells l1-h0, l1-h1, l0-h1
"$PY" - <<'PYEOF' || exit 1
import h5py, numpy as np
with h5py.File("t.h5", "r+") as f:
    q = f["q"][:, 1, :, :, :]
    f["q"][:, 1, :, :, :] = (q * np.float32(0.5)).astype(q.dtype)
    k = f["k"][:, 0, 1, :, :]
    f["k"][:, 0, 1, :, :] = k[:, ::-1, :]
PYEOF
check "the trace changed in place with the same attributes and shape" test "$(attrs t.h5)" = "$a0"
"$DSGAP" run x.ini --out x --quiet 2>err.txt
rc=$?
cat err.txt
check "repro 3: the full run after the change exits 0" test $rc -eq 0
check "repro 3: one warning names the changed cell of shard 0 (l1-h0) and the trace" \
  test "$(grep -c "run: 1 cell of run $RUN (l1-h0) was computed from other contents of $tmp/t.h5" err.txt)" -eq 1
check "repro 3: the unchanged cell l0-h0 is kept as it was" cmp -s $C/l0-h0/metrics.csv l0h0.before
"$DSGAP" replay t.h5 --out ref --policies dense,oracle,mc-sparse --density 0.5 --schedule warmup=1 --quiet
check "repro 3: the merged rows are dsgap replay's of the changed trace (all but time_ms)" \
  same_rows x/$RUN/metrics.csv ref/metrics.csv
cp x/summary.csv summary.ref
cp -r x x.undamaged

# --- a second change after a complete run: every changed cell of the run, named in one line ------
"$PY" - <<'PYEOF' || exit 1
import h5py
with h5py.File("t.h5", "r+") as f:
    for l in range(2):
        q = f["q"][:, l, 0, :, :]
        f["q"][:, l, 0, :, :] = -q
PYEOF
"$DSGAP" run x.ini --out x --quiet 2>err.txt
rc=$?
check "repro 3: after another change: exit 0, one line naming both changed cells" \
  test $rc -eq 0 -a "$(grep -c "run: 2 cells of run $RUN (l0-h0, l1-h0) were computed from other contents of $tmp/t.h5" err.txt)" -eq 1 \
  -a "$(wc -l < err.txt)" -eq 1
"$DSGAP" replay t.h5 --out ref2 --policies dense,oracle,mc-sparse --density 0.5 --schedule warmup=1 --quiet
check "repro 3: the merged rows follow the trace again" same_rows x/$RUN/metrics.csv ref2/metrics.csv
"$PY" - <<'PYEOF' || exit 1
import h5py
with h5py.File("t.h5", "r+") as f:
    for l in range(2):
        q = f["q"][:, l, 0, :, :]
        f["q"][:, l, 0, :, :] = -q
PYEOF
"$DSGAP" run x.ini --out x --quiet 2>err.txt
check "the trace changed back: those cells are recomputed once more" test $? -eq 0 -a "$(grep -c 'l0-h0, l1-h0' err.txt)" -eq 1
check "... and the merged output is that of the first complete run" cmp -s x/summary.csv summary.ref
m0=$(stat -c %y $C/*/input.sum)
"$DSGAP" run x.ini --out x --quiet 2>err.txt
check "a rerun of a complete, unchanged batch recomputes nothing and warns nothing" \
  test $? -eq 0 -a ! -s err.txt -a "$(stat -c %y $C/*/input.sum)" = "$m0"

# --- reproduction 4: a damaged cell ---------------------------------------------------------------
for lost in run.json metrics.csv input.sum; do
  rm -f $C/l0-h1/$lost
  "$DSGAP" run x.ini --out x --quiet 2>err.txt
  rc=$?
  check "repro 4: without its $lost, cell l0-h1 is recomputed and installed: exit 0, one warning" \
    test $rc -eq 0 -a -s $C/l0-h1/$lost -a "$(grep -c "run: cell $RUN/l0-h1 is incomplete" err.txt)" -eq 1 -a "$(wc -l < err.txt)" -eq 1
  check "repro 4: the merged output equals the undamaged run's (lost $lost)" \
    test "$(rows x/$RUN/metrics.csv)" = "$(rows x.undamaged/$RUN/metrics.csv)" -a -n "$(cmp x/summary.csv summary.ref && echo same)"
done
rm -f $C/l1-h1/run.json
"$DSGAP" run x.ini --out x --workers 2 --quiet 2>err.txt
check "repro 4: the same with --workers 2" test $? -eq 0 -a -s $C/l1-h1/run.json -a -n "$(cmp x/summary.csv summary.ref && echo same)"
rm -f $C/l1-h1/run.json
"$DSGAP" run x.ini --out x --shard 1/2 --quiet 2>err.txt
check "repro 4: the same with the shard that owns the cell" test $? -eq 0 -a -s $C/l1-h1/run.json -a -n "$(cmp x/summary.csv summary.ref && echo same)"
check "no temporary left" test -z "$(find x -name '*.tmp.*' -o -name .dsgap.lock)"

finish

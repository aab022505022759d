#!/usr/bin/env bash
# cli_stale_loop.sh: issue 50's staleness and drift in the closed loop (dsgap run, [model] +
# [prompts]) on the tiny random-weight Wan model of the test fixtures (2 layers, 2 heads of 64):
#   - fresh=keys|groups|residual policies and the sparse_steps / sparse_layers schedules run;
#   - RUN/drift.csv: one row per sparse cell and step; the warm-up's steps (and those outside a
#     sparse_steps window) exactly 0; the last step's rel_l2 = closed_loop.csv's rel_l2 of the final
#     latents (computed apart, from latents.h5); sparse_layers=1 drifts, a window drifts only from
#     its first step; the reference's steps.h5 ends with its latents.h5 (h5py);
#   - dsgap drift over the runs: staleness rows E(mc-sparse) - E(fresh=X) of closed_loop.csv's rel_l2,
#     the sensitivity map's rows and columns;
#   - a cell that runs before its reference's steps.h5 exists keeps its own steps.h5, and the merge
#     makes the same drift.csv from the two; each row equals numpy's fp64 rel-L2 of the two files.
# Run: ctest -R cli_stale_loop (needs $DSGAP, $DSGAP_SOURCE and the wan_models fixture).
. "$(dirname "$0")/../lib.sh" stale
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
MODELS=${WAN_MODELS:-$PWD/wan_models}
FIX=$DSGAP_SOURCE/tests/fixtures/wan
PY=/usr/bin/python3
[ -d "$MODELS/orig_hd64" ] || { echo "no test models in $MODELS (run: ctest -R wan_models)"; exit 1; }

# 384 tokens (4x8x12 after the 1x2x2 patch), 4 UniPC steps with CFG, one seed
printf '%b' "[experiment]\nname = stale\n[model]\npath = $MODELS/orig_hd64\nlatent = 4x16x24\nsteps = 4\nshift = 3
guidance = 2\nseeds = 3\n[prompts]\nfix = $FIX/text.safetensors\n[policies]
list = dense, mc-sparse, mc-sparse/fresh=keys, mc-sparse/fresh=groups, mc-sparse/fresh=residual\n[densities]
list = 0.3\n[schedules]\nw1 = warmup=1\nwin = warmup=1,sparse_steps=2-3\nl1 = warmup=1,sparse_layers=1\n" > "$tmp/s.ini"

"$DSGAP" run "$tmp/s.ini" --out "$tmp/full" --quiet 2> "$tmp/full.err"
check "run: exit 0" [ $? -eq 0 ] || cat "$tmp/full.err"
for r in w1 win l1; do
  d=$tmp/full/model.$r/drift.csv
  check "$r: drift.csv, header and 4 policies x 4 steps" \
    [ "$(head -1 "$d")" = "prompt,seed,policy,density_target,step,rel_l2" -a "$(wc -l < "$d")" -eq 17 ]
done
d=$tmp/full/model.w1/drift.csv
check "w1: step 0 (the warm-up) exactly 0, later steps > 0, for every policy" \
  [ "$(awk -F, 'NR > 1 && (($5 == 0 && $6 == 0) || ($5 > 0 && $6 > 0))' "$d" | wc -l)" -eq 16 ]
check "win (sparse_steps=2-3): steps 0 and 1 exactly 0, steps 2 and 3 > 0" \
  [ "$(awk -F, 'NR > 1 && (($5 < 2 && $6 == 0) || ($5 >= 2 && $6 > 0))' "$tmp/full/model.win/drift.csv" | wc -l)" -eq 16 ]
check "l1 (sparse_layers=1): the last step drifts, less than with both layers sparse" \
  [ "$(join -t, <(awk -F, 'NR > 1 && $5 == 3 {print $3 "," $6}' "$tmp/full/model.l1/drift.csv" | sort) \
    <(awk -F, 'NR > 1 && $5 == 3 {print $3 "," $6}' "$d" | sort) | awk -F, '$2 > 0 && $2 < $3' | wc -l)" -eq 4 ]
for r in w1 win l1; do
  check "$r: the last step's drift = closed_loop.csv's rel_l2 of the final latents (its 6 significant digits)" \
    [ "$(join -t, <(awk -F, 'NR > 1 && $5 == 3 {print $3 "," $6}' "$tmp/full/model.$r/drift.csv" | sort) \
      <(awk -F, 'NR > 1 && $3 != "dense" {print $3 "," $13}' "$tmp/full/model.$r/closed_loop.csv" | sort) |
      awk -F, '{ d = $2 - $3; if (d < 0) d = -d; if (d <= 1e-5 * $3) print }' | wc -l)" -eq 4 ]
done
cells=$tmp/full/cells/model.w1
check "the reference keeps steps.h5, a sparse cell drift.csv and no steps.h5" \
  [ -s "$cells/fix.s3.dense/steps.h5" -a -s "$cells/fix.s3.mc-sparse@0.3/drift.csv" -a ! -e "$cells/fix.s3.mc-sparse@0.3/steps.h5" ]
"$PY" - "$cells/fix.s3.dense" > "$tmp/py1.out" 2>&1 <<'PYEOF'
import sys, h5py, numpy as np
d = sys.argv[1]
s = h5py.File(d + "/steps.h5", "r")["latents"][()]
x = h5py.File(d + "/latents.h5", "r")["latents"][()]
c = x.shape[0]
ok = s.shape[0] == 4 * c and s.shape[1:] == x.shape[1:] and np.array_equal(s[3 * c:], x)
print("PYOK" if ok else "PYBAD %s %s" % (s.shape, x.shape))
PYEOF
check "the reference's steps.h5: 4 steps, the last = latents.h5 (h5py)" grep -q PYOK "$tmp/py1.out" || cat "$tmp/py1.out"

# --- dsgap drift over the three runs ---------------------------------------------------------------
"$DSGAP" drift "$tmp/full/model.w1" "$tmp/full/model.win" "$tmp/full/model.l1" --out "$tmp/tables" --boot 50 \
  > /dev/null 2> "$tmp/tables.err"
check "dsgap drift: exit 0, its tables" [ $? -eq 0 -a -s "$tmp/tables/drift.md" ] || cat "$tmp/tables.err"
check "staleness.csv: fresh=keys, groups, residual per run (9 rows), each E(mc-sparse) - E(fresh) of closed_loop.csv" \
  [ "$(for r in w1 win l1; do awk -F, -v r=model.$r 'NR == FNR { if (FNR > 1) e[$3] = $13; next }
      FNR > 1 && $1 == r { d = e["mc-sparse"] - e[$3 "/fresh=" $4]; d -= $9; if (d < 0) d = -d; if (d <= 2e-6) print }' \
      "$tmp/full/model.$r/closed_loop.csv" "$tmp/tables/staleness.csv"; done | wc -l)" -eq 9 ]
check "sensitivity.csv: 3 runs x 4 policies, the sparse column named (all, steps 2-3, layer 1)" \
  [ "$(awk -F, 'NR > 1' "$tmp/tables/sensitivity.csv" | wc -l)" -eq 12 -a \
    "$(awk -F, 'NR > 1 {print $3}' "$tmp/tables/sensitivity.csv" | sort -u | tr '\n' '|')" = "all|layer 1|steps 2-3|" ]

# --- a cell before its reference's steps: its own steps.h5, drift made by the merge ---------------
cp -r "$tmp/full" "$tmp/late"
lc=$tmp/late/cells/model.w1
mv "$lc/fix.s3.dense/steps.h5" "$tmp/ref_steps.h5"
rm -rf "$lc/fix.s3.mc-sparse@0.3" "$lc/fix.s3.mc-sparse_fresh=keys@0.3"
"$DSGAP" run "$tmp/s.ini" --out "$tmp/late" --quiet 2> "$tmp/late.err"
check "rerun of 2 cells without the reference's steps: they keep their own steps.h5" \
  [ $? -eq 0 -a -s "$lc/fix.s3.mc-sparse@0.3/steps.h5" -a ! -e "$lc/fix.s3.mc-sparse@0.3/drift.csv" ] || cat "$tmp/late.err"
mv "$tmp/ref_steps.h5" "$lc/fix.s3.dense/steps.h5"
"$DSGAP" merge "$tmp/late" --out "$tmp/merged" --quiet 2> "$tmp/merge.err"
check "merge: drift.csv from the cells' steps.h5 = the one from their drift.csv" \
  cmp -s "$tmp/merged/model.w1/drift.csv" "$tmp/full/model.w1/drift.csv" || cat "$tmp/merge.err"
"$PY" - "$lc" "$tmp/merged/model.w1/drift.csv" > "$tmp/py2.out" 2>&1 <<'PYEOF'
import sys, csv, h5py, numpy as np
cells, drift = sys.argv[1], sys.argv[2]
r = h5py.File(cells + "/fix.s3.dense/steps.h5", "r")["latents"][()].astype(np.float64)
x = h5py.File(cells + "/fix.s3.mc-sparse@0.3/steps.h5", "r")["latents"][()].astype(np.float64)
c = r.shape[0] // 4
rows = [w for w in csv.DictReader(open(drift)) if w["policy"] == "mc-sparse"]
worst = 0
for w in rows:
    s = int(w["step"])
    want = np.linalg.norm(x[s * c:(s + 1) * c] - r[s * c:(s + 1) * c]) / np.linalg.norm(r[s * c:(s + 1) * c])
    worst = max(worst, abs(float(w["rel_l2"]) - want) / max(want, 1e-300) if want else abs(float(w["rel_l2"])))
print(("PYOK" if len(rows) == 4 and worst <= 1e-7 else "PYBAD") + " worst %.3g" % worst)
PYEOF
check "drift.csv = numpy's fp64 rel-L2 of the steps.h5 pair, every step ($(cat "$tmp/py2.out"))" grep -q PYOK "$tmp/py2.out"

finish

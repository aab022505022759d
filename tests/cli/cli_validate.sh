#!/bin/bash
# cli_validate.sh: what dsgap refuses before it works, and the numerics that must never reach a file
# as nan or inf (issue 18, reproductions 5, 6, 8, 9, 10 and 13). Each bad case: a non-zero exit, one
# line "dsgap: error: ..." naming the file or option and the reason, and no output left behind.
#   DSGAP=build-cpu/dsgap bash tests/cli/cli_validate.sh
. "$(dirname "$0")/../lib.sh" validate
PY=/usr/bin/python3
t=$tmp/t.h5
"$DSGAP" synth --out "$t" --grid 1x8x16 --heads 2 --layers 2 --steps 2 --seed 3 >/dev/null || { echo "FAIL synth"; exit 1; }

# edit SRC DST MODE: a copy of the trace with one defect (h5py)
edit() {
	"$PY" - "$@" <<'PYEOF'
import h5py, numpy as np, shutil, sys
src, dst, mode = sys.argv[1:4]
shutil.copy(src, dst)
f = h5py.File(dst, 'r+')
def scale(name, sel, x):
    a = f[name][...]; a[sel] = a[sel] * x; f[name][...] = a
if mode == 'q3e38':
    a = f['q'][...]; a[0, 0, 0, 5, 0] = 3e38; f['q'][...] = a
elif mode == 'v3e38':
    a = f['v'][...]; a[0, 0, 1, 7, 3] = 3e38; f['v'][...] = a
elif mode == 'qk1e18':
    scale('q', (0, 0, 0), 1e18); scale('k', (0, 0, 0), 1e18)
elif mode == 'zerov':
    a = f['v'][...]; a[1, 1, 0] = 0; f['v'][...] = a
elif mode == 'dupstep':
    f['step_index'][...] = [4, 4]
elif mode == 'duplayer':
    f['layer_index'][...] = [2, 2]
elif mode == 'duphead':
    f['head_index'][...] = [0, 0]
elif mode == 'bigstep':
    del f['step_index']; f['step_index'] = np.array([0, 1 << 40], dtype=np.int64)
elif mode == 'ctrl':
    f.attrs['model'] = 'evil\x1b[2J\x07name'
f.close()
PYEOF
}

# big SRC DST TOKENS: a trace of one unit of TOKENS tokens that is never written (a few KB, chunked)
big() {
	"$PY" - "$@" <<'PYEOF'
import h5py, numpy as np, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = h5py.File(src, 'r'); f = h5py.File(dst, 'w')
for k, v in s.attrs.items(): f.attrs[k] = v
for k in ('step_index', 'timestep', 'sigma', 'layer_index', 'head_index'): f[k] = s[k][:1]
f['text_tokens'] = s['text_tokens'][()]
f['grid'] = np.array([1, 1, n], dtype=np.int32)
d = s['q'].shape[-1]
for k in 'qkv':
    f.create_dataset(k, (1, 1, 1, n, d), dtype='f4', chunks=(1, 1, 1, min(n, 1 << 16), d), compression='gzip')
PYEOF
}

# no_nonfinite CSV: no nan or inf outside the psnr column (inf there: an exact output)
no_nonfinite() {
	"$PY" -c '
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = [r for r in rows for k, v in r.items() if k not in ("policy", "psnr") and not math.isfinite(float(v))]
sys.exit(1 if bad or not rows else 0)' "$1"
}

# --- repro 5: numerics ------------------------------------------------------------------------------
if "$DSGAP" replay "$t" --policies dense,oracle,mc-sparse --density 0.5,1 --out "$tmp/good" --quiet &&
	no_nonfinite "$tmp/good/metrics.csv"; then
	ok "a good trace replays with finite metrics (oracle at rho=1 included)"
else
	bad "good trace"
fi
edit "$t" "$tmp/q3e38.h5" q3e38
refused "one q = 3e38" "unit (step 0, layer 0, head 0): scores reach" "$tmp/o1" \
	"$DSGAP" replay "$tmp/q3e38.h5" --policies dense,oracle --density 1 --out "$tmp/o1" --quiet
edit "$t" "$tmp/v3e38.h5" v3e38
refused "one v = 3e38 (NaN metrics and exit 0 once)" "unit (step 0, layer 0, head 1): max |v| 3e+38" "$tmp/o1v" \
	"$DSGAP" replay "$tmp/v3e38.h5" --policies dense,oracle,mc-sparse --density 0.2 --out "$tmp/o1v" --quiet
# a batch cell reads its cluster once, checking each unit as it comes: the same refusal, naming the
# trace (not the cell's temporary view of it); the good cluster's cell is kept, the bad one's is not
printf '[experiment]\nname = v\n[traces]\nbad = %s\n[policies]\nlist = dense, mc-sparse\n[densities]\nlist = 0.2\n' \
	"$tmp/v3e38.h5" > "$tmp/v.ini"
refused "one v = 3e38 in a batch cell" "dsgap: error: $tmp/v3e38.h5: unit (step 0, layer 0, head 1): max |v| 3e+38" - \
	"$DSGAP" run "$tmp/v.ini" --out "$tmp/ov" --quiet
check "the batch keeps the good cluster's cell only" test -s "$tmp/ov/cells/bad.default/l0-h0/input.sum" -a \
	! -e "$tmp/ov/cells/bad.default/l0-h1"
edit "$t" "$tmp/qk.h5" qk1e18
refused "q, k x 1e18" "qk.h5: unit (step 0, layer 0, head 0): scores reach" "$tmp/o2" \
	"$DSGAP" replay "$tmp/qk.h5" --policies dense,oracle --density 1 --out "$tmp/o2" --quiet
edit "$t" "$tmp/zerov.h5" zerov
# an all-zero V head: replayed, its rows left out with one warning naming it, listed in run.json
if "$DSGAP" replay "$tmp/zerov.h5" --policies dense,mc-sparse --out "$tmp/o3" --quiet 2> "$tmp/o3.err" &&
	grep -q "zerov.h5: unit (step 1, layer 1, head 0) excluded: V is all zero" "$tmp/o3.err" &&
	no_nonfinite "$tmp/o3/metrics.csv" &&
	! grep -q '^[^,]*,[^,]*,[^,]*,1,1,0,' "$tmp/o3/metrics.csv" &&
	"$PY" -c 'import json,sys; u=json.load(open(sys.argv[1]))["excluded_units"]; sys.exit(0 if {"step":1,"layer":1,"head":0} in [{k:x[k] for k in ("step","layer","head")} for x in u] else 1)' "$tmp/o3/run.json"; then
	ok "an all-zero V head: excluded with a warning and in run.json, no nan or inf written"
else
	bad "an all-zero V head"
fi

# --- repro 6: accepted without complaint ------------------------------------------------------------
refused "duplicate densities" "0.1 is given twice" "$tmp/o4" \
	"$DSGAP" replay "$t" --density 0.1,0.10 --out "$tmp/o4" --quiet
refused "schedule: a warm-up past every step" "warmup=5 covers every step of the trace (its steps: 0,1)" "$tmp/o5" \
	"$DSGAP" replay "$t" --policies mc-sparse --schedule warmup=5,dense_layers=1 --out "$tmp/o5" --quiet
refused "schedule: an anchor that is not a step" "anchor step 9 is not in the trace (its steps: 0,1)" "$tmp/o6" \
	"$DSGAP" replay "$t" --policies mc-sparse --schedule warmup=1,anchors=9 --out "$tmp/o6" --quiet
refused "schedule: a dense layer that is not a layer" "dense layer 99 is not in the trace (its layers: 0,1)" "$tmp/o7" \
	"$DSGAP" replay "$t" --policies mc-sparse --schedule warmup=1,dense_layers=99 --out "$tmp/o7" --quiet
edit "$t" "$tmp/bigstep.h5" bigstep
refused "an int64 step_index of 2^40 (not clamped)" "bigstep.h5: /step_index[1] = 1099511627776 does not fit a 32-bit integer" \
	"$tmp/o_big" "$DSGAP" replay "$tmp/bigstep.h5" --policies dense --out "$tmp/o_big" --quiet
for m in dupstep duplayer duphead; do
	edit "$t" "$tmp/$m.h5" $m
	what=${m#dup}
	refused "duplicate $what indices" "$m.h5: $what index" "$tmp/o_$m" \
		"$DSGAP" replay "$tmp/$m.h5" --policies dense --out "$tmp/o_$m" --quiet
done

# --- repro 13: messages that say the limit or the item -----------------------------------------------
refused "more than 128 specs" "at most 128" "$tmp/o8" \
	"$DSGAP" replay "$t" --policies "$(printf 'dense,%.0s' $(seq 130))dense" --out "$tmp/o8" --quiet
refused "a bad density item" "item 2 'x' is not a number" "$tmp/o9" \
	"$DSGAP" replay "$t" --density 0.1,x --out "$tmp/o9" --quiet
refused "too many densities" "at most 64" "$tmp/o10" \
	"$DSGAP" replay "$t" --density "$(seq -s, 0.01 0.01 0.7)" --out "$tmp/o10" --quiet

# --- repro 9: an oversized trace is refused at once, with the size it needs --------------------------
big "$t" "$tmp/big.h5" $((1 << 20))
start=$(date +%s)
refused "a 2^20-token trace" "needs at least" "$tmp/o11" "$DSGAP" replay "$tmp/big.h5" --out "$tmp/o11" --quiet
[ $(($(date +%s) - start)) -le 5 ] && ok "refused within 5 s" || bad "a 2^20-token trace took $(($(date +%s) - start)) s"
refused "memory under ulimit -v" "GiB is available" "$tmp/o12" \
	bash -c 'ulimit -v 3000000; exec "$@"' _ "$DSGAP" replay "$tmp/big.h5" --policies dense,mc-sparse --out "$tmp/o12" --quiet

# --- repro 8: CSV quoting ---------------------------------------------------------------------------
if "$DSGAP" attnstats --out "$tmp/as" --quiet 'a,b"c'"=$t" "x=$t" >/dev/null 2>"$tmp/stderr" &&
	"$PY" -c '
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
sys.exit(0 if all(len(r) == 10 for r in rows) and rows[1][0] == "a,b\"c" and rows[-1][0] == "x" else 1)' "$tmp/as/attnstats.csv"; then
	ok "attnstats quotes a label with , and \" (RFC 4180)"
else
	bad "attnstats CSV: $(head -3 "$tmp/as/attnstats.csv" 2>&1) $(cat "$tmp/stderr")"
fi

# --- repro 13: info prints no raw escape bytes from attributes ---------------------------------------
edit "$t" "$tmp/ctrl.h5" ctrl
if "$DSGAP" info "$tmp/ctrl.h5" >"$tmp/info" && ! LC_ALL=C grep -q "$(printf '\033')" "$tmp/info" &&
	grep -qF 'model        evil\x1b[2J\x07name' "$tmp/info"; then
	ok "info escapes control characters of an attribute"
else
	bad "info: $(grep model "$tmp/info" | od -c | head -3)"
fi

# --- repro 10, 13: bench checks every argument before it appends; its default CSV path says why -----
refused "bench: a bad --layer-step appends nothing" "bad --layer-step '2x2'" "$tmp/b1.csv" \
	"$DSGAP" bench --device cpu --tokens 256 --heads 1 --reps 1 --layer-step 2x2 --csv "$tmp/b1.csv"
refused "bench: a bad --device appends nothing" "bad --device 'cpux'" "$tmp/b2.csv" \
	"$DSGAP" bench --device cpux --csv "$tmp/b2.csv"
refused "bench: an oversized benchmark is refused with its size" "need at least" "$tmp/b3.csv" \
	"$DSGAP" bench --device cpu --tokens 1048576 --heads 256 --head-dim 256 --csv "$tmp/b3.csv"
mkdir -p "$tmp/elsewhere"
refused "bench: the default CSV path says why it fails" "results/bench/bench.csv: No such file or directory (the default --csv" \
	"$tmp/elsewhere/results" bash -c 'cd "$1" && exec "$2" bench --device cpu --tokens 256 --heads 1 --reps 1 --layer-step none' _ "$tmp/elsewhere" "$DSGAP"
if "$DSGAP" bench --device cpu --tokens 256 --heads 1 --reps 1 --layer-step 1x4x64 --csv "$tmp/b4.csv" >/dev/null &&
	"$PY" -c '
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
sys.exit(0 if rows and all(len(r) == 6 for r in rows) and rows[-1][3] == rows[0][3] else 1)' "$tmp/b4.csv"; then
	ok "bench: every CSV row has 6 fields and the same device"
else
	bad "bench CSV: $(tail -2 "$tmp/b4.csv")"
fi

# --- repro 10: a closed-loop experiment with a bad model or prompt refused before anything is written -
W=$DSGAP_SOURCE/tests/fixtures/wan
printf 'not a safetensors file' > "$tmp/junk.safetensors"
closed_ini() { # MODEL PROMPT -> $tmp/closed.ini
	printf '[model]\npath = %s\nlatent = 4x8x8\nsteps = 2\n[prompts]\na = %s\n[policies]\nlist = dense,mc-sparse\n' "$1" "$2" > "$tmp/closed.ini"
}
closed_ini "$W/wan_tiny.safetensors" "$tmp/junk.safetensors"
refused "closed loop: a prompt that is not text embeddings" "closed.ini:6: $tmp/junk.safetensors: header length" \
	"$tmp/o_cl1" "$DSGAP" run "$tmp/closed.ini" --out "$tmp/o_cl1"
closed_ini "$tmp/junk.safetensors" "$W/text.safetensors"
refused "closed loop: a model that would not load" "closed.ini:2: [model] $tmp/junk.safetensors: header length" \
	"$tmp/o_cl2" "$DSGAP" run "$tmp/closed.ini" --out "$tmp/o_cl2"

# --- repro 6: an empty list in an .ini is refused, not replaced by the defaults ------------------------
printf '[traces]\nt = synth: grid=1x8x16 heads=1 layers=1 steps=2\n[policies]\nlist =\n' > "$tmp/empty.ini"
refused "an empty [policies] list" "empty.ini:4: [policies] list is empty" "$tmp/o_e1" \
	"$DSGAP" run "$tmp/empty.ini" --out "$tmp/o_e1"
printf '[traces]\nt = synth: grid=1x8x16 heads=1 layers=1 steps=2\n[densities]\nlist =\n' > "$tmp/empty.ini"
refused "an empty [densities] list" "empty.ini:4: [densities] list is empty" "$tmp/o_e2" \
	"$DSGAP" run "$tmp/empty.ini" --out "$tmp/o_e2"

finish

#!/bin/bash
# cli_trace.sh: dsgap synth and dsgap info end to end, and their bad input (docs/spec.md §9): each bad case
# must give one line on stderr, "dsgap: error: ..." naming the file, a non-zero exit and no partial
# output file. Cases that need h5py to make the bad file are skipped without it.
#   DSGAP=build-cpu/dsgap bash tests/cli/cli_trace.sh
. "$(dirname "$0")/../lib.sh" trace
set -e
PY=/usr/bin/python3
# no_output PATH: neither PATH nor a temporary PATH.tmp.* is left
no_output() {
	if [ -e "$1" ] || compgen -G "$1.tmp.*" >/dev/null; then bad "no partial output: $1"; else ok "no partial output: $(basename "$1")"; fi
}

# --- good path -----------------------------------------------------------------------------------
t=$tmp/t.h5
if $DSGAP synth --out "$t" --grid 2x8x8 --heads 4 --layers 2 --steps 3 --seed 7 >"$tmp/stdout" 2>"$tmp/stderr" &&
	[ ! -s "$tmp/stderr" ] && [ "$(wc -l <"$tmp/stdout")" -eq 1 ] && grep -q "^wrote $t: 3 steps x 2 layers x 4 heads x 128 tokens" "$tmp/stdout"; then
	ok "synth writes a trace and one summary line"
else
	bad "synth: $(cat "$tmp/stdout" "$tmp/stderr")"
fi
compgen -G "$t.tmp.*" >/dev/null && bad "synth left a temporary file" || ok "synth leaves no temporary file"

$DSGAP info "$t" >"$tmp/info"
for want in "shape        [3, 2, 4, 128, 64]" "model        synthetic" "source       synthetic" \
	"created_by   dsgap " "steps        0-2  (3)" "layers       0,1  (2)" "heads        0-3  (4)" \
	"grid         2x8x8" "text_tokens  0" "dtype        bf16" " on disk, " "uncompressed"; do
	grep -qF -- "$want" "$tmp/info" && ok "info: $want" || bad "info lacks '$want': $(cat "$tmp/info")"
done
$DSGAP info --json --check "$t" >"$tmp/info.json"
if $PY -c 'import json, sys; j = json.load(open(sys.argv[1])); sys.exit(not (j["shape"] == [3, 2, 4, 128, 64] and j["dtype"] == "bf16" and j["checked"] and j["config"]["seed"] == 7 and j["size_on_disk"] > 0))' "$tmp/info.json"; then
	ok "info --json --check"
else
	bad "info --json: $(cat "$tmp/info.json")"
fi
$DSGAP synth --help | grep -q "^usage: dsgap synth" && ok "synth --help" || bad "synth --help"
$DSGAP info --help | grep -q "^usage: dsgap info" && ok "info --help" || bad "info --help"

# --- bad input to info ---------------------------------------------------------------------------
refused "nonexistent file" "$tmp/missing.h5: No such file" - $DSGAP info "$tmp/missing.h5"
echo "not hdf5" >"$tmp/text.h5"
refused "not an HDF5 file" "$tmp/text.h5: not an HDF5 file" - $DSGAP info "$tmp/text.h5"
head -c 5000 "$t" >"$tmp/trunc.h5"
refused "truncated file" "$tmp/trunc.h5: truncated or corrupt HDF5 file" - $DSGAP info "$tmp/trunc.h5"
refused "info: unknown option (exit 2)" "unknown option '--bogus'" - $DSGAP info --bogus "$t"
rc=0; $DSGAP info --bogus "$t" 2>/dev/null || rc=$?
[ $rc -eq 2 ] && ok "info: usage error exits 2" || bad "info: usage error exits $rc"

# mutate SRC DST MODE: a copy of SRC with one thing wrong, made with h5py
mutate() {
	$PY - "$@" <<'EOF'
import shutil, sys
import h5py, numpy as np
src, dst, mode = sys.argv[1:]
if mode == "foreign":
    with h5py.File(dst, "w") as f:
        f["data"] = np.arange(10)
        f.attrs["title"] = "someone else's file"
    sys.exit(0)
shutil.copy(src, dst)
with h5py.File(dst, "r+") as f:
    q = f["q"][...].astype(np.float32)
    if mode == "missing":
        del f["v"]
    elif mode == "rank":
        del f["q"]
        f["q"] = q[0]
    elif mode == "int":
        del f["q"]
        f["q"] = q.astype(np.int32)
    elif mode == "shape":
        del f["k"]
        f["k"] = q[:, :, :, :100].astype(np.float32)
        for n in "qv":
            x = f[n][...].astype(np.float32)
            del f[n]
            f[n] = x
    elif mode == "bigunit":  # one unit of 256^3 tokens x 1024, declared and never written (64 GiB as fp32)
        for n in ("q", "k", "v", "step_index", "timestep", "sigma", "layer_index", "head_index", "grid"):
            del f[n]
        for n in "qkv":
            f.create_dataset(n, (1, 1, 1, 256 ** 3, 1024), dtype=np.float32)
        f["step_index"] = np.zeros(1, np.int32)
        f["timestep"] = np.ones(1, np.float32)
        f["sigma"] = np.ones(1, np.float32)
        f["layer_index"] = np.zeros(1, np.int32)
        f["head_index"] = np.zeros(1, np.int32)
        f["grid"] = np.array([256, 256, 256], np.int32)
    elif mode == "nan":
        for n in "qkv":
            x = f[n][...].astype(np.float32)
            if n == "q":
                x[1, 0, 2, 5, 3] = np.nan
            del f[n]
            f[n] = x
EOF
}

if $PY -c 'import h5py, numpy' 2>/dev/null; then
	mutate "$t" "$tmp/foreign.h5" foreign
	refused "foreign HDF5 file" "$tmp/foreign.h5: not a dsgap trace (no format attribute)" - $DSGAP info "$tmp/foreign.h5"
	mutate "$t" "$tmp/missing_v.h5" missing
	refused "missing dataset" "$tmp/missing_v.h5: missing dataset /v" - $DSGAP info "$tmp/missing_v.h5"
	mutate "$t" "$tmp/rank.h5" rank
	refused "wrong rank" "$tmp/rank.h5: /q has rank 4, expected 5" - $DSGAP info "$tmp/rank.h5"
	mutate "$t" "$tmp/int.h5" int
	refused "wrong dtype (int)" "$tmp/int.h5: /q has wrong dtype (integer)" - $DSGAP info "$tmp/int.h5"
	mutate "$t" "$tmp/shape.h5" shape
	refused "k shape differs from q" "$tmp/shape.h5: /k has shape [3, 2, 4, 100, 64] but /q has [3, 2, 4, 128, 64]" - $DSGAP info "$tmp/shape.h5"
	mutate "$t" "$tmp/nan.h5" nan
	refused "NaN in q (info --check)" "$tmp/nan.h5: non-finite value in /q at step 1 layer 0 head 2 (token 5, dim 3)" - $DSGAP info --check "$tmp/nan.h5"
	$DSGAP info "$tmp/nan.h5" | grep -q "dtype        f32" && ok "f32 trace from h5py: info without --check" || bad "f32 trace from h5py"
	mutate "$t" "$tmp/bigunit.h5" bigunit
	# shellcheck disable=SC2016 # expanded by the inner shell
	refused "info --check: a unit larger than memory (ulimit -v 4 GiB)" \
		"$tmp/bigunit.h5: cannot allocate a unit of 16777216 tokens x 1024" - \
		bash -c 'ulimit -v 4194304 && exec "$@"' - $DSGAP info --check "$tmp/bigunit.h5"
else
	echo "skip h5py cases: /usr/bin/python3 has no h5py (install python3-h5py)"
fi

# a byte of the global heap that holds the string attributes changed: HDF5 1.10 segfaults (+8: an
# object's size) or loops forever (+160) reading them; dsgap reads them in a child process
for at in 8 160; do
	$PY - "$t" "$tmp/gcol$at.h5" "$at" <<'EOF'
import sys
src, dst, at = sys.argv[1], sys.argv[2], int(sys.argv[3])
b = bytearray(open(src, "rb").read())
i = b.find(b"GCOL")
assert i >= 0, "no global heap collection"
b[i + at] ^= 0xFF
open(dst, "wb").write(b)
EOF
	refused "info: global heap byte +$at flipped (one line, no crash or hang)" "$tmp/gcol$at.h5: " - $DSGAP info "$tmp/gcol$at.h5"
	refused "replay: global heap byte +$at flipped" "$tmp/gcol$at.h5: " "$tmp/gcol_out" $DSGAP replay "$tmp/gcol$at.h5" --out "$tmp/gcol_out"
done

# --- bad input to synth --------------------------------------------------------------------------
refused "synth: unwritable directory" "cannot create /proc/nonexistent/x.h5" - $DSGAP synth --out /proc/nonexistent/x.h5
mkdir "$tmp/adir"
refused "synth: --out names a directory" "$tmp/adir" - $DSGAP synth --out "$tmp/adir" --grid 1x4x4
compgen -G "$tmp/adir.tmp.*" >/dev/null && bad "synth left a temporary beside a directory" || ok "no partial output: adir.tmp.*"
bad=$tmp/bad.h5
for args in "--head-dim 16|head_dim 16 out of range 32..256" "--head-dim 300|head_dim 300 out of range" \
	"--steps 0|steps 0 out of range 1..50" "--steps 51|steps 51 out of range" "--heads 0|heads 0 out of range" \
	"--layers x|bad --layers 'x'" "--grid 4x4|bad --grid '4x4'" "--grid 0x4x4|bad --grid '0x4x4'" \
	"--grid 64x64x64|262144 tokens, at most" "--seed -1|bad --seed '-1'" "--bogus|unknown option '--bogus'" \
	"--heads|option '--heads' needs a value"; do
	opt=${args%%|*}
	want=${args#*|}
	# shellcheck disable=SC2086 # the options split into words on purpose
	refused "synth $opt" "$want" - $DSGAP synth --out "$bad" $opt
	rc=0; $DSGAP synth --out "$bad" $opt 2>/dev/null || rc=$?
	[ $rc -eq 2 ] && ok "synth $opt exits 2" || bad "synth $opt exits $rc"
	no_output "$bad"
done
refused "synth without --out" "--out is required" - $DSGAP synth --heads 2

finish

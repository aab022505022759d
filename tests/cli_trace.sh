#!/bin/bash
# cli_trace.sh: dsgap synth and dsgap info end to end, and their bad input (docs/spec.md §9): each bad case
# must give one line on stderr, "dsgap: error: ..." naming the file, a non-zero exit and no partial
# output file. Cases that need h5py to make the bad file are skipped without it.
#   DSGAP=build-cpu/dsgap bash tests/cli_trace.sh
set -eu
: "${DSGAP:?set DSGAP to the dsgap binary}"
PY=/usr/bin/python3
dir=$(mktemp -d /tmp/dsgap-cli-trace.XXXXXX)
trap 'rm -rf "$dir"' EXIT
passed=0
failed=0

ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }

# expect_error DESCR WANT CMD...: exit status non-zero, stderr one line "dsgap: error: ...WANT..."
expect_error() {
	local descr=$1 want=$2 rc=0
	shift 2
	"$@" >"$dir/stdout" 2>"$dir/stderr" || rc=$?
	if [ "$rc" -ne 0 ] && [ "$(wc -l <"$dir/stderr")" -eq 1 ] &&
		[ "$(head -c 14 "$dir/stderr")" = "dsgap: error: " ] && grep -qF -- "$want" "$dir/stderr"; then
		ok "$descr"
	else
		fail "$descr (exit $rc, stderr: $(cat "$dir/stderr"))"
	fi
}

# no_output PATH: neither PATH nor a temporary PATH.tmp.* is left
no_output() {
	if [ -e "$1" ] || compgen -G "$1.tmp.*" >/dev/null; then fail "no partial output: $1"; else ok "no partial output: $(basename "$1")"; fi
}

# --- good path -----------------------------------------------------------------------------------
t=$dir/t.h5
if $DSGAP synth --out "$t" --grid 2x8x8 --heads 4 --layers 2 --steps 3 --seed 7 >"$dir/stdout" 2>"$dir/stderr" &&
	[ ! -s "$dir/stderr" ] && [ "$(wc -l <"$dir/stdout")" -eq 1 ] && grep -q "^wrote $t: 3 steps x 2 layers x 4 heads x 128 tokens" "$dir/stdout"; then
	ok "synth writes a trace and one summary line"
else
	fail "synth: $(cat "$dir/stdout" "$dir/stderr")"
fi
compgen -G "$t.tmp.*" >/dev/null && fail "synth left a temporary file" || ok "synth leaves no temporary file"

$DSGAP info "$t" >"$dir/info"
for want in "shape        [3, 2, 4, 128, 64]" "model        synthetic" "source       synthetic" \
	"created_by   dsgap " "steps        0-2  (3)" "layers       0,1  (2)" "heads        0-3  (4)" \
	"grid         2x8x8" "text_tokens  0" "dtype        bf16" " on disk, " "uncompressed"; do
	grep -qF -- "$want" "$dir/info" && ok "info: $want" || fail "info lacks '$want': $(cat "$dir/info")"
done
$DSGAP info --json --check "$t" >"$dir/info.json"
if $PY -c 'import json, sys; j = json.load(open(sys.argv[1])); sys.exit(not (j["shape"] == [3, 2, 4, 128, 64] and j["dtype"] == "bf16" and j["checked"] and j["config"]["seed"] == 7 and j["size_on_disk"] > 0))' "$dir/info.json"; then
	ok "info --json --check"
else
	fail "info --json: $(cat "$dir/info.json")"
fi
$DSGAP synth --help | grep -q "^usage: dsgap synth" && ok "synth --help" || fail "synth --help"
$DSGAP info --help | grep -q "^usage: dsgap info" && ok "info --help" || fail "info --help"

# --- bad input to info ---------------------------------------------------------------------------
expect_error "nonexistent file" "$dir/missing.h5: No such file" $DSGAP info "$dir/missing.h5"
echo "not hdf5" >"$dir/text.h5"
expect_error "not an HDF5 file" "$dir/text.h5: not an HDF5 file" $DSGAP info "$dir/text.h5"
head -c 5000 "$t" >"$dir/trunc.h5"
expect_error "truncated file" "$dir/trunc.h5: truncated or corrupt HDF5 file" $DSGAP info "$dir/trunc.h5"
expect_error "info: unknown option (exit 2)" "unknown option '--bogus'" $DSGAP info --bogus "$t"
rc=0; $DSGAP info --bogus "$t" 2>/dev/null || rc=$?
[ $rc -eq 2 ] && ok "info: usage error exits 2" || fail "info: usage error exits $rc"

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
	mutate "$t" "$dir/foreign.h5" foreign
	expect_error "foreign HDF5 file" "$dir/foreign.h5: not a dsgap trace (no format attribute)" $DSGAP info "$dir/foreign.h5"
	mutate "$t" "$dir/missing_v.h5" missing
	expect_error "missing dataset" "$dir/missing_v.h5: missing dataset /v" $DSGAP info "$dir/missing_v.h5"
	mutate "$t" "$dir/rank.h5" rank
	expect_error "wrong rank" "$dir/rank.h5: /q has rank 4, expected 5" $DSGAP info "$dir/rank.h5"
	mutate "$t" "$dir/int.h5" int
	expect_error "wrong dtype (int)" "$dir/int.h5: /q has wrong dtype (integer)" $DSGAP info "$dir/int.h5"
	mutate "$t" "$dir/shape.h5" shape
	expect_error "k shape differs from q" "$dir/shape.h5: /k has shape [3, 2, 4, 100, 64] but /q has [3, 2, 4, 128, 64]" $DSGAP info "$dir/shape.h5"
	mutate "$t" "$dir/nan.h5" nan
	expect_error "NaN in q (info --check)" "$dir/nan.h5: non-finite value in /q at step 1 layer 0 head 2 (token 5, dim 3)" $DSGAP info --check "$dir/nan.h5"
	$DSGAP info "$dir/nan.h5" | grep -q "dtype        f32" && ok "f32 trace from h5py: info without --check" || fail "f32 trace from h5py"
else
	echo "skip h5py cases: /usr/bin/python3 has no h5py (install python3-h5py)"
fi

# --- bad input to synth --------------------------------------------------------------------------
expect_error "synth: unwritable directory" "cannot create /proc/nonexistent/x.h5" $DSGAP synth --out /proc/nonexistent/x.h5
mkdir "$dir/adir"
expect_error "synth: --out names a directory" "$dir/adir" $DSGAP synth --out "$dir/adir" --grid 1x4x4
compgen -G "$dir/adir.tmp.*" >/dev/null && fail "synth left a temporary beside a directory" || ok "no partial output: adir.tmp.*"
bad=$dir/bad.h5
for args in "--head-dim 16|head_dim 16 out of range 32..256" "--head-dim 300|head_dim 300 out of range" \
	"--steps 0|steps 0 out of range 1..50" "--steps 51|steps 51 out of range" "--heads 0|heads 0 out of range" \
	"--layers x|bad --layers 'x'" "--grid 4x4|bad --grid '4x4'" "--grid 0x4x4|bad --grid '0x4x4'" \
	"--grid 64x64x64|262144 tokens, at most" "--seed -1|bad --seed '-1'" "--bogus|unknown option '--bogus'" \
	"--heads|option '--heads' needs a value"; do
	opt=${args%%|*}
	want=${args#*|}
	# shellcheck disable=SC2086 # the options split into words on purpose
	expect_error "synth $opt" "$want" $DSGAP synth --out "$bad" $opt
	rc=0; $DSGAP synth --out "$bad" $opt 2>/dev/null || rc=$?
	[ $rc -eq 2 ] && ok "synth $opt exits 2" || fail "synth $opt exits $rc"
	no_output "$bad"
done
expect_error "synth without --out" "--out is required" $DSGAP synth --heads 2

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

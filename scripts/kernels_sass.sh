#!/usr/bin/env bash
# scripts/kernels_sass.sh: are the shipped kernels' machine code (SASS) and resources the same across a
# refactor? Compares the kernel objects of dsgapkernels (kernels/*.cu, the static library that libdsgap
# links) of two builds, function by function, up to the kernels' names: a kernel whose template
# parameters were renamed or dropped has a new mangled name but must keep its code.
#   scripts/kernels_sass.sh dump BUILD OUT      one file per kernel object of BUILD (a build tree of the
#                                               default preset, or of kernels/ on its own) in OUT
#   scripts/kernels_sass.sh diff OUT_A OUT_B    compare two dumps; exit 0 when every function of every
#                                               object of A has a function of B with the same code
#   scripts/kernels_sass.sh REV [BUILD]         build REV's kernels (git archive, kernels/ on its own,
#                                               target dsgapkernels) in a temporary folder, dump it and
#                                               BUILD (default build/, dsgapkernels built), diff them
# TARGET=dsgapkernels_dev compares the kernel lab's objects instead (dump and diff only; BUILD configured
# with -DDSGAP_DEV_KERNELS=ON).
# A function's code: its SASS with the instruction addresses dropped (the encodings, which hold the
# branch offsets, are kept), and its resource line (registers, stack, shared, local, constant banks).
# Needs cuobjdump and nvdisasm (the CUDA toolkit's, or PyPI's nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm; CUOBJDUMP names the binary, and nvdisasm must be on PATH or NVDISASM_PATH).
# Exit: 0 identical, 1 a difference (each named on stderr), 2 bad usage or a missing tool or object.
set -euo pipefail
CUOBJDUMP=${CUOBJDUMP:-cuobjdump}
here=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "kernels_sass.sh: $*" >&2; exit 2; }

# the objects of target TARGET (default dsgapkernels; dsgapkernels_dev: the kernel lab's versions, a
# build with -DDSGAP_DEV_KERNELS=ON) of a build tree (top level: kernels/CMakeFiles/..., dev/kernels/
# CMakeFiles/...; kernels/ alone: CMakeFiles/...)
TARGET=${TARGET:-dsgapkernels}
objects() {
	local d
	for d in "$1/kernels/CMakeFiles/$TARGET.dir" "$1/dev/kernels/CMakeFiles/$TARGET.dir" "$1/CMakeFiles/$TARGET.dir"; do
		if [ -d "$d" ] && ls "$d"/*.cu.o > /dev/null 2>&1; then
			ls "$d"/*.cu.o
			return 0
		fi
	done
	die "$1: no objects of $TARGET (build that target first)"
}

dump() {
	local build=$1 out=$2 o
	command -v "$CUOBJDUMP" > /dev/null || die "no $CUOBJDUMP (set CUOBJDUMP, see the header)"
	mkdir -p "$out"
	for o in $(objects "$build"); do
		local name
		name=$(basename "$o" .cu.o)
		"$CUOBJDUMP" -sass "$o" > "$out/$name.raw" || die "$o: cuobjdump -sass failed"
		"$CUOBJDUMP" -res-usage "$o" > "$out/$name.res" || die "$o: cuobjdump -res-usage failed"
		python3 - "$out/$name.raw" "$out/$name.res" "$out/$name.fn" << 'EOF'
import hashlib, re, sys
raw, res, dst = sys.argv[1:4]
funcs, cur = {}, None
for line in open(raw):
    m = re.match(r'\s*Function : (\S+)', line)
    if m:
        cur = m.group(1)
        funcs[cur] = []
        continue
    if cur is None or not line.strip():
        continue
    funcs[cur].append(re.sub(r'/\*[0-9a-f]{4,}\*/', '', line).strip())
usage = {}
lines = open(res).read().split('\n')
for i, line in enumerate(lines):
    m = re.match(r'\s*Function (\S+):', line)
    if m and i + 1 < len(lines):
        usage[m.group(1)] = lines[i + 1].strip()
# an anonymous namespace's mangled name holds a hash of the source file's path: the same namespace
anon = re.compile(r'\d+_GLOBAL__N__[0-9a-f]+_\d+_\w*?_[0-9a-f]{8}')
with open(dst, 'w') as f:
    for name in sorted(funcs):
        body = '\n'.join(funcs[name]) + '\nRES ' + usage.get(name, '?')
        f.write('%s %d %s\n' % (hashlib.sha256(body.encode()).hexdigest()[:20], len(funcs[name]),
                                 anon.sub('12_GLOBAL__N_1', name)))
EOF
		rm -f "$out/$name.raw"
	done
	echo "kernels_sass.sh: $(cat "$out"/*.fn | wc -l) functions of $(ls "$out"/*.fn | wc -l) objects dumped to $out"
}

diff_dumps() {
	python3 - "$1" "$2" << 'EOF'
import glob, os, subprocess, sys
a, b = sys.argv[1:3]
def load(path):
    out = []
    for line in open(path):
        h, n, name = line.split()
        out.append((h, int(n), name))
    return out
def demangle(name):
    try:
        return subprocess.run(['c++filt', name], capture_output=True, text=True).stdout.strip() or name
    except OSError:
        return name
bad = same = renamed = 0
objs_a = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(a, '*.fn'))}
objs_b = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(b, '*.fn'))}
for o in sorted(objs_a - objs_b):
    print('kernels_sass.sh: object %s only in %s' % (o, a), file=sys.stderr)
    bad += 1
for o in sorted(objs_b - objs_a):
    print('kernels_sass.sh: object %s only in %s' % (o, b), file=sys.stderr)
    bad += 1
for o in sorted(objs_a & objs_b):
    fa, fb = load(os.path.join(a, o + '.fn')), load(os.path.join(b, o + '.fn'))
    byname_b = {name: h for h, _, name in fb}
    free_b = {}
    for h, _, name in fb:
        free_b.setdefault(h, []).append(name)
    unmatched = []
    for h, n, name in fa:  # same name, same code
        if byname_b.get(name) == h:
            same += 1
            free_b[h].remove(name)
        else:
            unmatched.append((h, n, name))
    for h, n, name in unmatched:  # renamed: the same code under a name of B not yet matched
        if free_b.get(h):
            new = free_b[h].pop(0)
            renamed += 1
            print('%s: %s -> %s (%d instructions, same code)' % (o, demangle(name), demangle(new), n))
        else:
            bad += 1
            print('kernels_sass.sh: %s: %s (%d instructions) has no function of the same code in %s'
                  % (o, demangle(name), n, b), file=sys.stderr)
    for h, names in free_b.items():
        for name in names:
            bad += 1
            print('kernels_sass.sh: %s: %s only in %s' % (o, demangle(name), b), file=sys.stderr)
print('kernels_sass.sh: %d functions identical under the same name, %d identical under a new name, %d differ'
      % (same, renamed, bad))
sys.exit(1 if bad else 0)
EOF
}

case "${1:-}" in
dump)
	[ $# -eq 3 ] || die "usage: dump BUILD OUT"
	dump "$2" "$3"
	;;
diff)
	[ $# -eq 3 ] || die "usage: diff OUT_A OUT_B"
	[ -d "$2" ] && [ -d "$3" ] || die "diff: $2 or $3 is not a dump folder"
	diff_dumps "$2" "$3"
	;;
"" | -h | --help)
	sed -n '2,20p' "$0"
	exit 2
	;;
*)
	rev=$1 build=${2:-$here/build}
	git -C "$here" rev-parse --verify -q "$rev^{commit}" > /dev/null || die "$rev: not a commit"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	mkdir "$tmp/src"
	git -C "$here" archive "$rev" | tar -x -C "$tmp/src"
	cmake -S "$tmp/src/kernels" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release > "$tmp/configure.log" 2>&1 ||
		die "$rev: configure failed ($tmp/configure.log)"
	cmake --build "$tmp/build" --target "$TARGET" -j "${JOBS:-2}" > "$tmp/build.log" 2>&1 ||
		die "$rev: build failed"
	dump "$tmp/build" "$tmp/a"
	dump "$build" "$tmp/b"
	diff_dumps "$tmp/a" "$tmp/b"
	;;
esac

"""torch_stubs.py: make PyPI's Linux torch wheel import on a machine without the CUDA libraries it
links, without its multi-GB nvidia-* dependencies (.ci/run installs torch with --no-deps).

  python torch_stubs.py SITE_PACKAGES/torch/lib

For every shared library that a library in torch/lib needs and the dynamic loader cannot find,
writes a stub of that soname into torch/lib (found first through the wheel's RPATH $ORIGIN). A
stub defines every symbol torch imports from it and the loader cannot resolve elsewhere (Python
loads extensions with RTLD_NOW), under the symbol versions torch asks for: functions return 100
(CUDA's "no device" error), data objects are zeros. torch then sees no CUDA device and runs on the
CPU as usual. Libraries the machine has (a CUDA toolkit, say) are left alone.
Needs cc, ldd and readelf (build-essential).
"""
import os
import re
import subprocess
import sys
import tempfile


def run(*cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, env=env).stdout


def ldd(lib, relocate=False):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(lib))
    return run("ldd", *(["-r"] if relocate else []), lib, env=env)


def imports(lib):
    """{symbol: (kind, size, version or '')} for lib's undefined dynamic symbols"""
    out = {}
    for line in run("readelf", "--dyn-syms", "-W", lib).splitlines():
        f = line.split()
        if len(f) >= 8 and f[6] == "UND" and f[7]:
            name, _, ver = f[7].partition("@")
            size = int(f[2], 0) if f[2].startswith("0x") else int(f[2])
            out[name] = (f[3], size, ver.lstrip("@").split(" ")[0])
    return out


def version_files(lib):
    """{version name: soname} from lib's version needs"""
    out, cur = {}, None
    for line in run("readelf", "-V", "-W", lib).splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            cur = m.group(1)
        m = re.search(r"Name: (\S+)", line)
        if m and cur:
            out[m.group(1)] = cur
    return out


def build(libdir, so, syms):
    """stub SO defining syms {name: (kind, size, version)}"""
    with tempfile.TemporaryDirectory() as tmp:
        src, script = os.path.join(tmp, "s.c"), os.path.join(tmp, "s.map")
        vers = {}
        with open(src, "w") as f:
            for name, (kind, size, ver) in sorted(syms.items()):
                f.write(f"char {name}[{max(size, 8)}];\n" if kind == "OBJECT" else f"int {name}(void) {{ return 100; }}\n")
                vers.setdefault(ver, []).append(name)
        with open(script, "w") as f:
            for ver, names in vers.items():
                if ver:
                    f.write(f"{ver} {{ global: {' '.join(n + ';' for n in names)} }};\n")
            if not any(vers):
                f.write("{ global: *; };\n")
        res = subprocess.run(["cc", "-shared", "-fPIC", "-w", "-o", os.path.join(libdir, so), f"-Wl,-soname,{so}",
                              f"-Wl,--version-script={script}", src], capture_output=True, text=True)
        if res.returncode:
            sys.exit(f"torch_stubs: cannot build {so}: {res.stderr.strip()}")


def main():
    libdir = os.path.abspath(sys.argv[1])
    libs = [os.path.join(libdir, n) for n in sorted(os.listdir(libdir)) if ".so" in n]
    stubs = {}  # soname -> {symbol: (kind, size, version)}
    for _ in range(6):  # a stub can uncover a library or symbol the loader had not reached yet
        changed = False
        stubs_before = len(stubs)
        for lib in libs:
            out = ldd(lib)
            miss = set(re.findall(r"^\s*(\S+) => not found", out, re.M))
            targets = sorted(miss | {so for so in re.findall(r"^\s*(\S+) => " + re.escape(libdir), out, re.M) if so in stubs})
            if not targets:
                continue
            imp, vfile = imports(lib), version_files(lib)
            for so in targets:  # the soname with every symbol imported under one of its versions
                syms = stubs.setdefault(so, {})
                for name, (kind, size, ver) in imp.items():
                    if ver and vfile.get(ver) == so and name not in syms:
                        syms[name] = (kind, size, ver)
                        changed = True
                build(libdir, so, syms)
            for name in re.findall(r"undefined symbol: ([^\s,]+),?\s+\(", ldd(lib, relocate=True)):
                if name in imp and not re.match(r"_?Py", name):  # unversioned (Python's own API: the interpreter): the first stub this library needs defines it
                    kind, size, ver = imp[name]
                    so = next((t for t in targets if ver and vfile.get(ver) == t), targets[0])
                    if name not in stubs[so]:
                        stubs[so][name] = (kind, size, ver)
                        changed = True
            for so in targets:
                build(libdir, so, stubs[so])
        if not changed and len(stubs) == stubs_before:
            break
    for so, syms in sorted(stubs.items()):
        print(f"torch_stubs: {so} stubbed ({len(syms)} symbols)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

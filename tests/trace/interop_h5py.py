"""
interop_h5py.py: dsgap traces and h5py agree (docs/spec.md §6, §9). Run by Debian's own interpreter, where
python3-h5py and python3-numpy install; exits 77 (skipped) when they are missing.
  DSGAP=build/dsgap /usr/bin/python3 tests/trace/interop_h5py.py build/tests/test_trace

1. test_trace --fixture writes a small trace of known values and, as raw float32, what dsgap reads
   back; h5py must read the same values bit for bit, and the same metadata, attributes as str.
2. a `dsgap synth` trace: shape, dtype, chunks, filters and attributes as h5py sees them.
3. f32 and f16 traces written by h5py: `dsgap info --json --check` reads them.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"skipped: {e} (install python3-h5py and python3-numpy)")
    sys.exit(77)

failed = passed = 0


def check(descr, cond):
    global failed, passed
    print(("ok   " if cond else "FAIL ") + descr)
    if cond:
        passed += 1
    else:
        failed += 1


def fixture(tmp, test_trace):
    h5, raw = os.path.join(tmp, "fixture.h5"), os.path.join(tmp, "fixture.f32")
    subprocess.run([test_trace, "--fixture", h5, raw], check=True)
    shape = (3, 2, 3, 37, 24)  # (steps, layers, heads, tokens, head_dim), as tests/trace/test_trace.c makes it
    want = np.fromfile(raw, dtype="<f4").reshape((3,) + shape)
    with h5py.File(h5, "r") as f:
        for i, name in enumerate("qkv"):
            d = f[name]
            got = d[...]
            check(f"fixture /{name}: shape {d.shape}, read as {got.dtype}", d.shape == shape and got.dtype == np.float32)
            check(f"fixture /{name}: h5py values equal dsgap's bit for bit",
                  np.array_equal(got.view(np.uint32), want[i].view(np.uint32)))
        t = f["q"].id.get_type()
        check("fixture /q file type is bf16 (sign 15, exponent 7-14 bias 127, mantissa 0-6)",
              t.get_size() == 2 and t.get_fields() == (15, 7, 8, 0, 7) and t.get_ebias() == 127)
        q = f["q"]
        check("fixture /q chunk (1,1,1,tokens,head_dim), shuffle + gzip 1",
              q.chunks == (1, 1, 1, 37, 24) and q.shuffle and q.compression == "gzip" and q.compression_opts == 1)
        a = f.attrs
        check("fixture attributes are str", all(isinstance(a[k], str) for k in ("format", "model", "created_by", "source", "config")))
        check("fixture format, version", a["format"] == "dsgap-trace" and int(a["version"]) == 1)
        check("fixture model (UTF-8), source, created_by",
              a["model"] == "test-model é" and a["source"] == "unit test" and a["created_by"] == "test_trace")
        check("fixture config is JSON", json.loads(a["config"]) == {"a": 1, "b": [1, 2]})
        check("fixture index datasets",
              list(f["step_index"][...]) == [10, 15, 20] and list(f["layer_index"][...]) == [3, 17]
              and list(f["head_index"][...]) == [0, 5, 11] and list(f["grid"][...]) == [2, 3, 5]
              and f["text_tokens"][()] == 7 and f["step_index"].dtype == np.int32)
        check("fixture sigma, timestep float32",
              f["sigma"].dtype == np.float32 and np.allclose(f["sigma"][...], [0.9, 0.8, 0.7])
              and np.allclose(f["timestep"][...], [900, 800, 700], rtol=1e-6))


def synth(tmp, dsgap):
    path = os.path.join(tmp, "synth.h5")
    r = subprocess.run([dsgap, "synth", "--out", path, "--grid", "2x4x4", "--heads", "3", "--head-dim", "32",
                        "--layers", "2", "--steps", "4", "--seed", "11"], capture_output=True, text=True)
    check("dsgap synth runs", r.returncode == 0 and r.stdout.startswith("wrote ") and r.stderr == "")
    with h5py.File(path, "r") as f:
        check("synth shape (4, 2, 3, 32, 32)", all(f[n].shape == (4, 2, 3, 32, 32) for n in "qkv"))
        q = f["q"][...].astype(np.float32)
        check("synth q finite, not constant", np.isfinite(q).all() and q.std() > 0.1)
        a = f.attrs
        check("synth attributes as str", a["model"] == "synthetic" and a["source"] == "synthetic"
              and a["created_by"].startswith("dsgap ") and a["format"] == "dsgap-trace")
        cfg = json.loads(a["config"])
        check("synth config: options and head kinds", cfg["seed"] == 11 and cfg["grid"] == [2, 4, 4]
              and cfg["head_kinds"][0] == ["local", "frame", "sink"])
        s = f["sigma"][...]
        check("synth sigma: shift-5 schedule", np.allclose(s, [5 * t / (1 + 4 * t) for t in 1 - np.arange(4) / 50]))
    return path


def h5py_written(tmp, dsgap, src):
    for dtype, name in ((np.float32, "f32"), (np.float16, "f16")):
        path = os.path.join(tmp, f"{name}.h5")
        with h5py.File(src, "r") as f, h5py.File(path, "w") as g:
            for k, v in f.attrs.items():
                g.attrs[k] = v
            for n in f:
                g[n] = f[n][...].astype(dtype) if n in "qkv" else f[n][...]
        r = subprocess.run([dsgap, "info", "--json", "--check", path], capture_output=True, text=True)
        info = json.loads(r.stdout) if r.returncode == 0 else {}
        check(f"h5py-written {name} trace: dsgap info reads it as {name}",
              info.get("dtype") == name and info.get("shape") == [4, 2, 3, 32, 32] and info.get("checked") is True)


def main():
    dsgap = os.environ["DSGAP"]
    with tempfile.TemporaryDirectory(prefix="dsgap-interop.") as tmp:
        fixture(tmp, sys.argv[1])
        h5py_written(tmp, dsgap, synth(tmp, dsgap))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

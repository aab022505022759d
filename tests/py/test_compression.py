"""test_compression.py: the trace writer's two layouts (python/dsgap/trace.py, compression "none" and
"deflate") hold the same trace. The same tiny capture (diffusers' WanTransformer3DModel on the CPU,
2 steps, 2 layers, both heads, bf16) is written both ways, and:
  - the layouts: "none" has no filters, "deflate" the C writer's shuffle + deflate; same chunking,
    bf16 type, datasets and attributes; the deflate file is the smaller;
  - every chunk of the deflate file, inflated and unshuffled, is the bytes of the "none" chunk;
  - h5py reads equal arrays; `dsgap info --check` accepts both; the replay's dense attention
    (replay_dense) gives the same bytes, and `dsgap replay` of mc-sparse the same metrics;
and the capture's deferred finiteness check (a NaN unit is an error naming it, no file left), a
bad compression (one-line error), a non-contiguous array written both ways.

  python test_compression.py WORKDIR       Environment: DSGAP, REPLAY_DENSE (tests/CMakeLists.txt).
"""
import csv
import json
import os
import subprocess
import sys
import zlib

import h5py
import numpy as np
import torch

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import dsgap  # noqa: E402
from pyhelp import Checker, randomize  # noqa: E402

torch.set_grad_enabled(False)
ck = Checker("compression")
MODES = ("none", "deflate")


def capture_tiny(path, compression):
    """the same 2-step capture of a tiny random Wan2.1 into path"""
    import diffusers as D
    torch.manual_seed(0)
    m = D.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                out_channels=4, text_dim=24, freq_dim=16, ffn_dim=32, num_layers=2)
    randomize(m)
    m.eval()
    g = torch.Generator().manual_seed(1)
    x, cond = torch.randn(1, 4, 3, 8, 8, generator=g), torch.randn(1, 5, 24, generator=g)
    with dsgap.capture(m, path, layers=[0, 1], progress=False, compression=compression):
        for t in (900.0, 500.0):
            m(hidden_states=x, timestep=torch.tensor([t]), encoder_hidden_states=cond)


def layout(path):
    with h5py.File(path) as f:
        d = f["q"]
        t = d.id.get_type()
        pl = d.id.get_create_plist()
        return dict(filters=[pl.get_filter(i)[0] for i in range(pl.get_nfilters())], chunks=d.chunks, shape=d.shape,
                    type=(t.get_size(), t.get_fields(), t.get_ebias(), t.get_order()), keys=sorted(f.keys()),
                    attrs=sorted(f.attrs.keys()))


def decoded_chunks(path):
    """every chunk of /q /k /v as raw bf16 bytes: read directly, inflated and unshuffled where filtered"""
    out = {}
    with h5py.File(path) as f:
        for n in dsgap.trace.QKV:
            d = f[n]
            S, L, H = d.shape[:3]
            filtered = d.id.get_create_plist().get_nfilters() > 0
            for s in range(S):
                for l in range(L):
                    for h in range(H):
                        mask, b = d.id.read_direct_chunk((s, l, h, 0, 0))
                        if filtered and mask == 0:
                            b = np.frombuffer(zlib.decompress(b), np.uint8).reshape(2, -1).T.tobytes()
                        out[(n, s, l, h)] = b
    return out


def replay_metrics(dsg, path, out):
    """dsgap replay of mc-sparse at 0.3: metrics.csv's rows without the timing column"""
    r = subprocess.run([dsg, "replay", path, "--policies", "mc-sparse", "--density", "0.3", "--out", out, "--quiet"],
                       capture_output=True, text=True)
    if r.returncode:
        return r.stderr
    with open(os.path.join(out, "metrics.csv")) as f:
        return [{k: v for k, v in row.items() if k != "time_ms"} for row in csv.DictReader(f)]


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    dsg, rd = os.environ["DSGAP"], os.environ["REPLAY_DENSE"]
    paths = {c: os.path.join(work, f"capture_{c}.h5") for c in MODES}
    for c, p in paths.items():
        capture_tiny(p, c)

    a, b = layout(paths["none"]), layout(paths["deflate"])
    fa, fb = a.pop("filters"), b.pop("filters")
    ck.check("'none': no filters; 'deflate': shuffle + deflate (the C writer's)",
             fa == [] and fb == [h5py.h5z.FILTER_SHUFFLE, h5py.h5z.FILTER_DEFLATE], f"{fa} {fb}")
    ck.check("same chunking, shape, bf16 type, datasets and attributes",
             a == b and a["chunks"] == (1, 1, 1) + a["shape"][3:], f"{a} vs {b}")
    sz = {c: os.path.getsize(p) for c, p in paths.items()}
    ck.check("the deflate file is the smaller", sz["deflate"] < sz["none"], sz)
    ca, cb = decoded_chunks(paths["none"]), decoded_chunks(paths["deflate"])
    ck.check("every chunk, decoded, holds the same bf16 bytes in both files", ca == cb and len(ca) == 3 * 2 * 2 * 2,
             f"{len(ca)} chunks, {sum(ca[u] != cb.get(u) for u in ca)} differ")
    ra, rb = dsgap.read_trace(paths["none"]), dsgap.read_trace(paths["deflate"])
    same_meta = all(np.array_equal(ra[0][k], rb[0][k]) for k in ("step_index", "timestep", "sigma", "grid", "layer_index"))
    same = all(np.array_equal(x, y) for x, y in zip(ra[1:], rb[1:]))
    ck.check("h5py reads equal arrays and index vectors",
             same_meta and same and np.isfinite(ra[1]).all() and np.abs(ra[1]).max() > 0)
    recorded = [json.loads(r[0]["config"])["capture"]["compression"] for r in (ra, rb)]
    ck.check("config names the compression", recorded == list(MODES), recorded)

    for c, p in paths.items():
        r = subprocess.run([dsg, "info", "--check", "--json", p], capture_output=True, text=True)
        ok = r.returncode == 0 and json.loads(r.stdout)["checked"]
        ck.check(f"dsgap info --check accepts the '{c}' trace", ok, r.stderr)
    outs = {}
    for c, p in paths.items():
        o = os.path.join(work, f"dense_{c}.f32")
        r = subprocess.run([rd, p, o], capture_output=True, text=True)
        outs[c] = open(o, "rb").read() if r.returncode == 0 else r.stderr
    n = 2 * 2 * 2 * 3 * 4 * 4 * 16 * 4   # steps layers heads tokens head_dim, float32
    ck.check("the replay's dense attention: the same bytes from both files", outs["none"] == outs["deflate"] and
             isinstance(outs["none"], bytes) and len(outs["none"]) == n, f"{len(outs['none'])} bytes, expected {n}")
    ma, mb = (replay_metrics(dsg, p, os.path.join(work, f"replay_{c}")) for c, p in paths.items())
    ck.check("dsgap replay (mc-sparse at 0.3): the same metrics from both files", ma == mb and isinstance(ma, list) and
             len(ma) == 2 * 2 * 2, f"{ma if isinstance(ma, str) else len(ma)} {mb if isinstance(mb, str) else len(mb)}")

    # --- write_trace of a non-contiguous array (a transposed view), both ways ----------------------
    rng = np.random.default_rng(2)
    base = rng.standard_normal((2, 1, 32, 2, 3 + 2 * 2 * 2)).astype(np.float32)  # steps layers head_dim heads tokens
    qkv = [np.moveaxis(base * (i + 1), 2, 4) for i in range(3)]                   # (steps, layers, heads, tokens, head_dim)
    got = []
    for c in MODES:
        p = os.path.join(work, f"written_{c}.h5")
        dsgap.write_trace(p, *qkv, grid=(2, 2, 2), text_tokens=3, compression=c)
        got.append(dsgap.read_trace(p)[1:])
    want = [dsgap.bf16_to_f32(dsgap.f32_to_bf16(x)) for x in qkv]
    ck.check("write_trace of a transposed view: both files hold its bf16 values",
             all(np.array_equal(g, w) for r in got for g, w in zip(r, want)))

    # --- errors ------------------------------------------------------------------------------------
    class NaNAttention(torch.nn.Module):
        def forward(self, x, timestep):
            q = x.clone()
            q[0, 1, 3, 0] = float("nan")
            return torch.nn.functional.scaled_dot_product_attention(q, x, x)

    p, nan = os.path.join(work, "nan.h5"), NaNAttention()
    try:
        with dsgap.capture(nan, p, layers=[0], layout="video", grid=(1, 2, 4), progress=False):
            nan(torch.randn(1, 2, 8, 16), timestep=torch.tensor([1.0]))
        msg = "no error"
    except dsgap.CaptureError as e:
        msg = str(e)
    left = [f for f in os.listdir(work) if f.startswith("nan.h5")]
    ck.check("a non-finite unit is an error naming it, and no file is left",
             "non-finite value in /q at step 0 layer 0" in msg and not left, f"{msg} {left}")
    try:
        dsgap.capture(nan, p, layers=[0], layout="video", grid=(1, 2, 4), compression="gzip")
        msg = "no error"
    except dsgap.CaptureError as e:
        msg = str(e)
    ck.check("an unknown compression is a one-line error naming the choices",
             "compression" in msg and "'none'" in msg and "\n" not in msg, msg)
    return ck.done()


if __name__ == "__main__":
    sys.exit(main())

"""test_experts.py: Wan2.2's two experts (issue 51): one denoising loop through two tiny random-initialised
WanTransformer3DModel experts, the first at the high-noise steps and the second at the low-noise ones (as
diffusers' WanPipeline switches at its boundary), captured as one trace and run in the closed loop.

  python test_experts.py WORKDIR      (DSGAP: the dsgap binary; DSGAP_LIB: libdsgap.so)

  1. dsgap.capture([e0, e1]) (float32): a trace of all four steps whose Q/K/V are, bit for bit, the
     self-attention SDPA inputs of the expert that ran each step (a spy on SDPA under the capture);
     capture.experts in the trace's config names the expert of every step ([0, 0, 1, 1]); `dsgap info
     --check` accepts it. Control: capture(e0) alone in the same loop records only e0's two steps;
  2. dsgap.torch.attention([e0, e1]): "dense" and "mc-sparse" at density 1 equal the unpatched loop
     (max rel < 1e-5 at every step), every call through libdsgap (16 units: 4 steps x 2 layers x 2 heads);
  3. at 512 video tokens, mc-sparse at 0.25 with warmup=1: step 0 (e0's anchor) and step 2 (e1's first
     step: its own anchor, e0's metadata is not e1's) equal the dense loop (< 1e-5), steps 1 and 3 differ
     (> 1e-4) and stay finite;
  4. errors: experts of different classes, or of different depths: one line starting "dsgap".
"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import torch

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import dsgap  # noqa: E402
import dsgap.torch as dt  # noqa: E402
from pyhelp import Checker, randomize  # noqa: E402

torch.set_grad_enabled(False)
ck = Checker("experts")
TS = (900.0, 700.0, 400.0, 200.0)   # the loop's timesteps; WanPipeline's boundary at 500 here
BOUNDARY = 500.0


def expert(seed, layers=2):
    import diffusers as D
    torch.manual_seed(seed)
    m = D.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                out_channels=4, text_dim=24, freq_dim=16, ffn_dim=32, num_layers=layers)
    randomize(m, seed=seed)
    return m.eval()


def loop(experts, x, txt):
    """one call per step at the timesteps TS, the expert of the step's noise level; each output kept"""
    return [experts[0 if t >= BOUNDARY else 1](hidden_states=x, timestep=torch.tensor([t]),
                                               encoder_hidden_states=txt)[0] for t in TS]


def rel(a, b):
    return float((a - b).norm() / b.norm())


def capture(work, e0, e1):
    x, txt = torch.randn(1, 4, 3, 6, 8), torch.randn(1, 5, 24)
    seen = []   # the self-attention SDPA inputs (q, k, v) in call order
    orig = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, *a, **kw):
        if q.shape[2] == k.shape[2]:
            seen.append((q.clone(), k.clone(), v.clone()))
        return orig(q, k, v, *a, **kw)
    path = os.path.join(work, "experts.h5")
    torch.nn.functional.scaled_dot_product_attention = spy
    try:
        with dsgap.capture([e0, e1], path, dtype="float32", progress=False):
            loop((e0, e1), x, txt)
    finally:
        torch.nn.functional.scaled_dot_product_attention = orig
    with h5py.File(path, "r") as f:
        q, k, v = (f[n][()] for n in ("q", "k", "v"))
        cfg = json.loads(f.attrs["config"])
        steps = f["step_index"][()].tolist()
    # seen: 4 steps x 2 layers, (1, heads, tokens, d) each
    same = len(seen) == 8 and q.shape[:2] == (4, 2) and all(
        np.array_equal(t[s, l], seen[2 * s + l][i][0].numpy()) for s in range(4) for l in range(2)
        for i, t in enumerate((q, k, v)))
    ck.check("capture([e0, e1]): every step's Q/K/V are the SDPA inputs of the expert that ran it, bit for bit",
             same and steps == [0, 1, 2, 3], f"{len(seen)} self-attention calls, trace steps {steps}")
    ex = cfg.get("capture", {}).get("experts", {})
    ck.check("the trace's config names the expert of every step", ex.get("expert_of_step") == [0, 0, 1, 1]
             and ex.get("count") == 2, ex)
    r = subprocess.run([os.environ["DSGAP"], "info", path, "--check"], capture_output=True, text=True)
    ck.check("dsgap info --check accepts it", r.returncode == 0, r.stderr.strip()[:200])
    one = os.path.join(work, "one.h5")
    with dsgap.capture(e0, one, dtype="float32", progress=False):
        loop((e0, e1), x, txt)
    with h5py.File(one, "r") as f:
        n = f["q"].shape[0]
    ck.check("control: capture(e0) alone records only e0's steps", n == 2, f"{n} steps")


def closed(e0, e1):
    x, txt = torch.randn(1, 4, 3, 6, 8), torch.randn(1, 5, 24)
    ref = loop((e0, e1), x, txt)
    for pol in ("dense", "mc-sparse"):
        with dt.attention([e0, e1], policy=pol, density=1.0, dense_sites="dsgap") as a:
            out = loop((e0, e1), x, txt)
            s = a.stats()
        e = max(rel(o, r) for o, r in zip(out, ref))
        ck.check(f"attention([e0, e1]) {pol} at density 1 = the unpatched loop (4 steps, 2 experts)",
                 e < 1e-5 and s["calls"] == 16 and s["fallback_calls"] == 0, f"max rel {e:.1e}, units {s['calls']}")
    # 512 video tokens: mc-sparse at 0.25 is sparse after each expert's anchor
    f0, f1 = expert(3), expert(4)
    x, txt = torch.randn(1, 4, 2, 32, 32), torch.randn(1, 5, 24)
    ref = loop((f0, f1), x, txt)
    with dt.attention([f0, f1], policy="mc-sparse", density=0.25, schedule="warmup=1") as a:
        out = loop((f0, f1), x, txt)
        s = a.stats()
    e = [rel(o, r) for o, r in zip(out, ref)]
    ck.check("mc-sparse at 0.25, 512 tokens: step 0 and step 2 (each expert's own anchor) are dense, steps 1 and "
             "3 differ, finite", e[0] < 1e-5 and e[2] < 1e-5 and e[1] > 1e-4 and e[3] > 1e-4
             and all(bool(torch.isfinite(o).all()) for o in out) and s["fallback_calls"] == 0,
             "rel-L2 per step " + ", ".join(f"{v:.1e}" for v in e))


def errors(e0):
    import diffusers as D
    torch.manual_seed(0)
    other = D.CogVideoXTransformer3DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
                                          time_embed_dim=16, text_embed_dim=24, num_layers=2, sample_width=8,
                                          sample_height=6, sample_frames=9, patch_size=2, max_text_seq_length=6)
    for what, fn in (("attention: experts of two classes", lambda: dt.attention([e0, other]).install()),
                     ("attention: experts of two depths", lambda: dt.attention([e0, expert(5, layers=3)]).install()),
                     ("capture: experts of two classes", lambda: dsgap.capture([e0, other], "/nonexistent/x.h5")),
                     ("capture: experts of two depths",
                      lambda: dsgap.capture([e0, expert(5, layers=3)], "/nonexistent/x.h5").__enter__())):
        try:
            fn()
            msg = None
        except Exception as ex:   # noqa: BLE001 (the message is what is checked)
            msg = str(ex)
        ck.check(f"{what}: one line starting 'dsgap'", msg is not None and msg.startswith("dsgap")
                 and "\n" not in msg and "expert" in msg, msg)


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    e0, e1 = expert(1), expert(2)
    capture(work, e0, e1)
    closed(e0, e1)
    errors(e0)
    return ck.done()


if __name__ == "__main__":
    sys.exit(main())

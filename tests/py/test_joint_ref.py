"""test_joint_ref.py: every policy's joint-attention rule through libdsgap (ctypes, no torch) against
an independent float64 computation in NumPy (issue 51 item 8), on one head of 16 text + 512 video
tokens, three steps of the same inputs (the anchor, then steps that run the policy):

  1. text queries dense: the 16 text rows of every step equal softmax(q k^T / sqrt d) v over all
     keys in float64 (max abs error < 2e-5);
  2. text keys kept beyond the budget: the text keys are made unattractive (low logits: a ranking
     would drop them) and their values carry a marker (dimension 0: 1 for text, 0 for video); the
     float64 dense text mass m_i of each video query is a lower bound of what a policy attending
     to all text keys and any subset of video keys puts on the marker (a subset only raises the
     text's share; a cached residual of the same inputs restores the dense value): every video row
     of steps 1 and 2 has o[i, 0] >= m_i - 2e-5;
  3. negative control: the same tokens given to a context with no text (text_tokens = 0: the text
     is ranked as video) under a top-k policy at 0.25 drop the text keys: the bound fails.
Policies: every preset libdsgap names in its unknown-policy error that makes a context here.
  python test_joint_ref.py        (DSGAP_LIB: libdsgap.so, set by tests/python.cmake)
"""
import importlib.util
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pyhelp import Checker  # noqa: E402

spec = importlib.util.spec_from_file_location("torch_abi", os.path.join(HERE, "..", "..", "python", "dsgap",
                                                                        "torch_abi.py"))
abi = importlib.util.module_from_spec(spec)
spec.loader.exec_module(abi)
ck = Checker("joint")
T, GRID, D = 16, (1, 16, 32), 64
N = T + GRID[0] * GRID[1] * GRID[2]


def unit():
    rng = np.random.default_rng(7)
    c = 0.5 * rng.standard_normal(D).astype(np.float32)
    q = (c + 0.5 * rng.standard_normal((N, D))).astype(np.float32)
    k = (c + 0.5 * rng.standard_normal((N, D))).astype(np.float32)
    k[:T] = 0.5 * rng.standard_normal((T, D))              # text keys: lower logits than every video key
    v = rng.standard_normal((N, D)).astype(np.float32)
    v[:, 0] = 0.0
    v[:T, 0] = 1.0                                          # the marker
    return q, k, v


def dense64(q, k, v):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ k.T / np.sqrt(D)
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return p @ v, p[:, :T].sum(1)


def run(policy, text, q, k, v, steps=3):
    ctx = abi.Context(policy, [0.25], "", 1, 1, D, 1, GRID if text else (1, 1, N), text, "cpu")
    outs = []
    try:
        for s in range(steps):
            o = np.zeros((N, 1, D), np.float32)
            ctx.attend(s, 0, 0, *(abi.numpy_tensor(x[:, None, :]) for x in (q, k, v)), abi.numpy_tensor(o), abi.FP32, N)
            outs.append(o[:, 0])
    finally:
        ctx.close()
    return outs


def policies():
    try:
        abi.Context("no-such-policy", [0.25], "", 1, 1, D, 1, GRID, T, "cpu")
    except abi.DsgapError as e:
        m = re.search(r"known: ([^)]*)\)", str(e))
        return [p for p in m.group(1).split() if p != "dense"] if m else []
    return []


def main():
    q, k, v = unit()
    ref, mass = dense64(q, k, v)
    ck.check("the unit: text keys unattractive (dense text mass of video rows small but not nothing)",
             1e-4 < float(mass[T:].mean()) < 0.05, f"mean text mass {mass[T:].mean():.2e}")
    names = policies()
    done, skipped = [], []
    for p in names:
        try:
            outs = run(p, T, q, k, v)
        except abi.DsgapError as e:
            if e.code == 2:   # a preset that needs parameters this test does not give (e.g. custom)
                skipped.append(f"{p} ({e})")
                continue
            raise
        done.append(p)
        et = max(float(np.abs(o[:T] - ref[:T]).max()) for o in outs)
        lo = min(float((o[T:, 0] - mass[T:]).min()) for o in outs[1:])
        ck.check(f"{p}: text queries dense (float64), text keys kept for every video query (marker >= dense text "
                 f"mass)", et < 2e-5 and lo > -2e-5 and all(np.isfinite(o).all() for o in outs),
                 f"text rows max abs {et:.1e}, marker - mass min {lo:.1e}")
    ck.check("every preset but parameterised ones ran", len(done) >= 15 and len(skipped) <= 3,
             f"{len(done)} ran; skipped: {skipped}")
    outs = run("oracle-tile", 0, q, k, v)
    lo = min(float((o[T:, 0] - mass[T:]).min()) for o in outs[1:])
    ck.check("negative control: the text given as video (no text tokens) to oracle-tile at 0.25: text keys dropped, "
             "the bound fails", lo < -1e-4, f"marker - mass min {lo:.1e}")
    return ck.done()


if __name__ == "__main__":
    sys.exit(main())

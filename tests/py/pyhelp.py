"""pyhelp.py: what the Python tests share: a pass/fail checker printing the plain closing line,
random initialisation of every parameter, an fp64 attention reference."""
import math
import sys

import numpy as np
import torch


class Checker:
    def __init__(self, name):
        self.name, self.passed, self.failed = name, 0, 0

    def check(self, what, ok, detail=""):
        ok = bool(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {self.name}: {what}" + (f" ({detail})" if str(detail) != "" else ""))
        sys.stdout.flush()
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        return ok

    def done(self):
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0


def randomize(model, seed=0, scale=0.5):
    """every parameter random (norm weights and biases too), so a mix-up of norms or branches shows"""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            fan = p.shape[-1] if p.dim() > 1 else 1
            if p.dim() == 1 and ("norm" in name) and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * scale / math.sqrt(fan))


def attention_ref(q, k, v):
    """softmax(q k^T / sqrt d) v in fp64; q k v (tokens, d)"""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[1])
    s -= s.max(axis=1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=1, keepdims=True)
    return p @ v

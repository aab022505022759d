"""test_fidelity.py: PSNR/SSIM through libdsgap's C ABI (dsgap_frames_fidelity, what dsgap generate and
python -m dsgap.generate both use) against an independent float64 NumPy computation of the definition
(fidelity.h: L = max - min of the reference frame; SSIM with an 11x11 Gaussian window, sigma 1.5,
renormalised at the borders), on random non-zero frames; identical frames give inf and 1; bad
arguments are refused.
  python test_fidelity.py      (DSGAP_LIB: libdsgap.so)"""
import math
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from dsgap import generate, torch_abi  # noqa: E402
from pyhelp import Checker  # noqa: E402

ck = Checker("fidelity")


def blur_matrix(n, radius=5, sigma=1.5):
    k = np.arange(-radius, radius + 1)
    g = np.exp(-k * k / (2 * sigma * sigma))
    M = np.zeros((n, n))
    for i in range(n):
        for o, w in zip(k, g):
            if 0 <= i + o < n:
                M[i, i + o] = w
    return M / M.sum(axis=1, keepdims=True)


def reference(ref, x):
    ref, x = np.asarray(ref, np.float64), np.asarray(x, np.float64)
    C, F, H, W = ref.shape
    Mh, Mw = blur_matrix(H), blur_matrix(W)
    psnr, ssim = np.zeros(F), np.zeros(F)
    for f in range(F):
        a, b = ref[:, f], x[:, f]
        L = a.max() - a.min()
        L = L if L > 0 else 1.0
        mse = np.mean((b - a) ** 2)
        psnr[f] = 10 * math.log10(L * L / mse) if mse > 0 else math.inf
        c1, c2, s = (0.01 * L) ** 2, (0.03 * L) ** 2, 0.0
        for c in range(C):
            blur = lambda m: Mh @ m @ Mw.T  # noqa: E731
            ma, mb = blur(a[c]), blur(b[c])
            va, vb = blur(a[c] * a[c]) - ma * ma, blur(b[c] * b[c]) - mb * mb
            cov = blur(a[c] * b[c]) - ma * mb
            s += np.sum(((2 * ma * mb + c1) * (2 * cov + c2)) / ((ma * ma + mb * mb + c1) * (va + vb + c2)))
        ssim[f] = s / (C * H * W)
    return psnr, ssim


rng = np.random.default_rng(7)
for shape in [(3, 4, 16, 24), (2, 1, 7, 5), (1, 3, 32, 12)]:
    ref = rng.standard_normal(shape).astype(np.float32) + 0.3
    for noise in (0.01, 0.3):
        x = (ref + noise * rng.standard_normal(shape)).astype(np.float32)
        p, s = torch_abi.frames_fidelity(ref, x)
        rp, rs = reference(ref, x)
        ep, es = np.max(np.abs(p - rp) / np.abs(rp)), np.max(np.abs(s - rs))
        ck.check(f"{shape} noise {noise}: psnr and ssim of the ABI = float64 NumPy (rel {ep:.1e}, abs {es:.1e})",
                 ep < 1e-5 and es < 1e-5 and np.all(s < 1) and np.all(np.isfinite(p)), f"{p} {rp} {s} {rs}")
    g = generate.summarise(ref, x)
    ck.check(f"{shape}: dsgap.generate.summarise is the ABI's mean and minimum",
             g["psnr"] == float(p.mean()) and g["ssim_min"] == float(s.min()), str(g))
p, s = torch_abi.frames_fidelity(ref, ref)
ck.check("identical frames: psnr inf, ssim 1", np.all(np.isinf(p)) and np.allclose(s, 1, atol=1e-9), f"{p} {s}")
try:
    torch_abi.frames_fidelity(ref, ref[:, :1])
    ck.check("unequal shapes refused", False)
except torch_abi.DsgapError as e:
    ck.check("unequal shapes refused", "shapes" in str(e), str(e))
L = torch_abi.lib()
rc = L.dsgap_frames_fidelity(ref.ctypes.data, ref.ctypes.data, 0, 1, 1, 1, None, None)
ck.check("a NULL output or a size 0: DSGAP_E_ARG and a message", rc == 1 and b"frames fidelity" in
         L.dsgap_last_error(None), L.dsgap_last_error(None))
sys.exit(ck.done())

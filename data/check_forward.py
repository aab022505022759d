#!/usr/bin/env python3
"""check_forward.py: dsgap's engine against the training-side PyTorch model (data/wan_torch.py) on the
same checkpoint: one forward, a closed Euler loop with CFG, and the bf16-autocast forward the model was
trained with. Differences are max |a - b| / max |b| (the convention of tests/wan_ref.py).

  check_forward.py --model DIR [--dsgap build-cpu/dsgap] [--cls NAME] [--latent 4x16x16] [--seed 0]
                   [--steps 4] [--shift 3] [--guidance 3] [--tol 1e-4] [--tol-bf16 5e-2]
                   [--write-fixture FDIR]
      needs torch (+ numpy, h5py). Exit 1 when a difference exceeds its tolerance.
      --write-fixture FDIR: also write the inputs and the fp32 PyTorch references (noise.safetensors,
      ref.safetensors: v (forward at t = 999), euler (final latents of the loop); check.json) so that
      CI can compare without torch:
  check_forward.py --fixture FDIR --model DIR [--dsgap ...] [--tol 1e-4]
      numpy + h5py only (Debian's python3): runs dsgap on the fixture's inputs and compares.

How the engine is driven: `dsgap capture --sampler euler --steps 1 --guidance 1` from the given noise
returns x - sigma_0 v(x, t = 999) as /latents (sigma_0 = float32 0.999), so v = (x - latents) / sigma_0;
the loop is `--steps S --shift X --guidance G` (negative = the engine's default zero embeddings,
which is the "null" condition the model was trained with).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wan_files import flow_schedule, read_safetensors, write_safetensors  # noqa: E402  (numpy only)

HERE = os.path.dirname(os.path.abspath(__file__))


def rel(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max() / max(np.abs(b).max(), 1e-30))


def run_engine(dsgap, model, text, noise_path, steps, shift, guidance, work):
    import h5py
    out = os.path.join(work, "run_%d_%g_%g.h5" % (steps, shift, guidance))
    cmd = [dsgap, "capture", "--model", model, "--text", text, "--noise", noise_path, "--out", out,
           "--steps", str(steps), "--shift", str(shift), "--guidance", str(guidance), "--sampler", "euler",
           "--capture-steps", "0", "--layers", "0", "--heads", "0", "--quiet"]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("check_forward.py: dsgap failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr.strip()))
    with h5py.File(out, "r") as f:
        lat = f["latents"][()].astype(np.float64)
    return lat, time.time() - t0


def torch_refs(model_dir, cond, noise, steps, shift, guidance):
    import torch
    from wan_torch import load_model
    m = load_model(model_dir).eval()
    cfg = m.cfg
    L = cfg["text_len"]
    ctx = np.zeros((L, cfg["text_dim"]), np.float32)
    ctx[:cond.shape[0]] = cond
    x = torch.from_numpy(noise[None].astype(np.float32))
    c = torch.from_numpy(ctx[None])
    u = torch.zeros_like(c)
    out = {}
    with torch.no_grad():
        out["v"] = m(x, torch.tensor([999.0]), c)[0].double().numpy()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out["v_bf16"] = m(x, torch.tensor([999.0]), c)[0].double().numpy()
        sig, ts = flow_schedule(steps, shift)
        xs = x.clone()
        for i in range(steps):
            t = torch.tensor([float(ts[i])])
            v = m(xs, t, c)
            if guidance != 1:
                vu = m(xs, t, u)
                v = vu + guidance * (v - vu)
            xs = xs + float(np.float32(sig[i + 1] - sig[i])) * v
        out["euler"] = xs[0].double().numpy()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dsgap", default=os.path.join(HERE, "..", "build-cpu", "dsgap"))
    ap.add_argument("--cls", default=None, help="class in conds.safetensors (default: the first)")
    ap.add_argument("--latent", default="4x16x16", help="F x H x W pixels")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--shift", type=float, default=3.0)
    ap.add_argument("--guidance", type=float, default=3.0)
    ap.add_argument("--tol", type=float, default=1e-4, help="fp32 engine vs fp32 PyTorch")
    ap.add_argument("--tol-bf16", type=float, default=5e-2, help="fp32 engine vs bf16-autocast PyTorch")
    ap.add_argument("--write-fixture", default=None)
    ap.add_argument("--fixture", default=None)
    a = ap.parse_args()
    conds_path = os.path.join(a.model, "conds.safetensors")
    work = tempfile.mkdtemp(prefix="check_forward.")
    if a.fixture:
        with open(os.path.join(a.fixture, "check.json")) as f:
            meta = json.load(f)
        a.cls, a.steps, a.shift, a.guidance = meta["cls"], meta["steps"], meta["shift"], meta["guidance"]
        noise_path = os.path.join(a.fixture, "noise.safetensors")
        noise = read_safetensors(noise_path)["noise"].astype(np.float64)
        ref = {k: v.astype(np.float64) for k, v in read_safetensors(os.path.join(a.fixture, "ref.safetensors")).items()}
    else:
        conds = read_safetensors(conds_path)
        a.cls = a.cls or next(iter(conds))
        Fr, H, W = (int(s) for s in a.latent.split("x"))
        rng = np.random.default_rng(a.seed)
        noise = rng.standard_normal((3, Fr, H, W)).astype(np.float32).astype(np.float64)
        noise_path = os.path.join(work, "noise.safetensors")
        write_safetensors(noise_path, [("noise", "F32", noise)])
        t0 = time.time()
        ref = torch_refs(a.model, conds[a.cls], noise, a.steps, a.shift, a.guidance)
        print("PyTorch references (CPU, fp32 and bf16 autocast): %.1f s" % (time.time() - t0))
    text = conds_path + ":" + a.cls
    sigma0 = float(np.float32(0.999))
    lat1, s1 = run_engine(a.dsgap, a.model, text, noise_path, 1, 1.0, 1.0, work)
    v_eng = (noise - lat1) / sigma0
    latS, sS = run_engine(a.dsgap, a.model, text, noise_path, a.steps, a.shift, a.guidance, work)
    res = {"forward_v_fp32": rel(v_eng, ref["v"]),
           "forward_latents_fp32": rel(lat1, noise - np.float32(sigma0) * ref["v"]),
           "euler_loop_fp32": rel(latS, ref["euler"])}
    if "v_bf16" in ref:
        res["forward_v_bf16_autocast"] = rel(v_eng, ref["v_bf16"])
        res["torch_bf16_vs_torch_fp32_info"] = rel(ref["v_bf16"], ref["v"])
    print("model %s, class %s, latent %s, Euler %d steps, shift %g, guidance %g (dsgap %.1f s + %.1f s)" % (
        a.model, a.cls, "x".join(map(str, noise.shape[1:])), a.steps, a.shift, a.guidance, s1, sS))
    ok = True
    for k, v in res.items():
        if k.endswith("_info"):
            print("  %-32s max rel diff %.3e  (for information)" % (k[:-5], v))
            continue
        tol = a.tol if k.endswith("fp32") else a.tol_bf16
        bad = v > tol
        ok &= not bad
        print("  %-32s max rel diff %.3e  (tolerance %.0e)%s" % (k, v, tol, "  FAIL" if bad else ""))
    if a.write_fixture:
        d = a.write_fixture
        os.makedirs(d, exist_ok=True)
        write_safetensors(os.path.join(d, "noise.safetensors"), [("noise", "F32", noise)])
        write_safetensors(os.path.join(d, "ref.safetensors"), [("v", "F32", ref["v"]), ("euler", "F32", ref["euler"])])
        with open(os.path.join(d, "check.json"), "w") as f:
            json.dump({"cls": a.cls, "steps": a.steps, "shift": a.shift, "guidance": a.guidance,
                       "latent": list(noise.shape[1:]), "seed": a.seed, "measured": res}, f, indent=1)
        print("wrote fixture", d)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

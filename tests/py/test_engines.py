"""test_engines.py: issue 20's "Wan2.1 across engines": a trace captured with dsgap.capture from
diffusers' WanTransformer3DModel equals `dsgap capture` (the C engine) on the same weights, noise and
text embeddings, in both key layouts (CPU).

  python test_engines.py WAN_MODELS WORKDIR    (WAN_MODELS: tests/wan_ref.py derive's output, the
                                                wan_models fixture; DSGAP: the dsgap binary)

The committed tiny Wan2.1 (tests/fixtures/wan: 2 layers, dim 128, grid 2x4x6 = 48 tokens) in four
checkpoints: original key names (orig_hd64: 2 heads of 64, BF16; orig_hd128: 1 head of 128, F16, with
the model.diffusion_model. prefix) and diffusers names (diff_hd64: F32, sharded; diff_hd128: BF16).
Per checkpoint:
  - the C engine: dsgap capture, 3 Euler steps, shift 3, CFG 4, the fixtures' text, negative and
    noise; every step, layer and head of the conditional pass (bf16 trace) and the final latents;
  - diffusers: a WanTransformer3DModel in fp32 with the same weights (diffusers layout: from_pretrained;
    original layout: renamed by wan_ref.diffusers_name, loaded strictly), text and negative padded
    with zeros to 512 tokens (text_len; as WanPipeline does), the same noise; the Euler loop written
    out with the C trace's own /timestep and /sigma (x += (sigma[i+1] - sigma[i]) * (u + g (c - u)),
    last sigma 0), sequential CFG (cond call first), under dsgap.capture (bf16 trace);
  - compared: Q, K and V of every (step, layer, head) -- step 0 from identical input latents, later
    steps after the two engines' own sampling -- max |py - c| / max |c| per unit, step 0 within
    2^-8 (one bf16 rounding), later steps within 2^-7; /grid, /text_tokens, /step_index, /timestep
    equal; the final latents (C's /latents, fp32, against diffusers' loop) within 1e-4.
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
sys.path.insert(0, os.path.join(SRC, "tests"))
import dsgap  # noqa: E402
import wan_ref  # noqa: E402
from pyhelp import Checker  # noqa: E402

torch.set_grad_enabled(False)
ck = Checker("engines")
FIX = os.path.join(SRC, "tests", "fixtures", "wan")
STEPS, SHIFT, GUIDANCE = 3, 3, 4.0


def diffusers_model(path):
    import diffusers as D
    from safetensors.torch import load_file
    cfg = json.load(open(os.path.join(path, "config.json")))
    if cfg.get("_class_name") == "WanTransformer3DModel":   # the diffusers layout
        return D.WanTransformer3DModel.from_pretrained(path, torch_dtype=torch.float32).eval()
    files = [f for f in os.listdir(path) if f.endswith(".safetensors")]
    sd = {}
    for f in files:
        for k, v in load_file(os.path.join(path, f)).items():
            k = k[len("model.diffusion_model."):] if k.startswith("model.diffusion_model.") else k
            sd[wan_ref.diffusers_name(k)] = v.float()
    dc = wan_ref.diffusers_config(cfg["num_heads"])
    dc = {k: v for k, v in dc.items() if not k.startswith("_")}
    m = D.WanTransformer3DModel(**dc)
    m.load_state_dict(sd, strict=True)
    return m.float().eval()


def padded(a, n=512):
    x = torch.zeros(1, n, a.shape[-1])
    x[0, :a.shape[0]] = torch.from_numpy(np.asarray(a, np.float32))
    return x


def main():
    models, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    inputs = {k: wan_ref.read_safetensors(os.path.join(FIX, k + ".safetensors"))[k] for k in ("text", "negative", "noise")}
    cond, unc = padded(inputs["text"]), padded(inputs["negative"])
    noise = torch.from_numpy(inputs["noise"].astype(np.float32))[None]
    for name in ("orig_hd64", "diff_hd64", "orig_hd128", "diff_hd128"):
        path = os.path.join(models, name)
        ctrace, ptrace = os.path.join(work, name + "_c.h5"), os.path.join(work, name + "_py.h5")
        r = subprocess.run([os.environ["DSGAP"], "capture", "--model", path, "--text", os.path.join(FIX, "text.safetensors"),
                            "--negative", os.path.join(FIX, "negative.safetensors"), "--noise",
                            os.path.join(FIX, "noise.safetensors"), "--steps", str(STEPS), "--shift", str(SHIFT),
                            "--guidance", str(GUIDANCE), "--sampler", "euler", "--quiet", "--out", ctrace],
                           capture_output=True, text=True)
        if not ck.check(f"{name}: dsgap capture runs", r.returncode == 0, r.stderr.strip()):
            continue
        cmeta, cq, ckk, cv = dsgap.read_trace(ctrace)
        import h5py
        with h5py.File(ctrace) as f:
            clat = f["latents"][:]
        ts, sig = [float(t) for t in cmeta["timestep"]], [float(s) for s in cmeta["sigma"]] + [0.0]
        m = diffusers_model(path)
        x = noise.clone()
        with dsgap.capture(m, ptrace, progress=False):
            for i in range(STEPS):
                t = torch.tensor([ts[i]])
                c = m(hidden_states=x, timestep=t, encoder_hidden_states=cond)[0]
                u = m(hidden_states=x, timestep=t, encoder_hidden_states=unc)[0]
                x = x + (sig[i + 1] - sig[i]) * (u + GUIDANCE * (c - u))
        pmeta, pq, pk, pv = dsgap.read_trace(ptrace)
        same = (pq.shape == cq.shape and tuple(pmeta["grid"]) == tuple(cmeta["grid"]) and
                pmeta["text_tokens"] == cmeta["text_tokens"] == 0 and
                list(pmeta["step_index"]) == list(cmeta["step_index"]) and np.allclose(pmeta["timestep"], cmeta["timestep"]))
        ck.check(f"{name}: same shape {cq.shape}, grid, text tokens, steps and timesteps {ts}", same,
                 f"{pq.shape} {pmeta['grid']} {pmeta['step_index']} {pmeta['timestep']}")
        if not same:
            continue
        worst = np.zeros(STEPS)
        for a, b in ((pq, cq), (pk, ckk), (pv, cv)):
            d = np.abs(a.astype(np.float64) - b).max(axis=(3, 4)) / np.abs(b).max(axis=(3, 4))  # per (step, layer, head)
            worst = np.maximum(worst, d.max(axis=(1, 2)))
        ck.check(f"{name}: Q/K/V of every layer and head at step 0 (same input latents) within one bf16 rounding",
                 worst[0] <= 2 ** -8, f"max rel {worst[0]:.2e}")
        ck.check(f"{name}: Q/K/V of every layer and head at steps 1-{STEPS - 1} (each engine's own Euler loop) "
                 f"within bf16", worst[1:].max() <= 2 ** -7, " ".join(f"{w:.2e}" for w in worst[1:]))
        el = np.abs(x[0].numpy() - clat).max() / np.abs(clat).max()
        ck.check(f"{name}: final latents of the loop = the C engine's /latents", el < 1e-4, f"max rel {el:.2e}")
    return ck.done()


if __name__ == "__main__":
    sys.exit(main())

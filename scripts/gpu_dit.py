"""gpu_dit.py: the Python half of scripts/gpu_dit.sh (the DiT engine on the H200, issue 4): random
Wan2.1 checkpoints in the original layout, the independent PyTorch forward tests/torch_ref/wan_torch.py
against dsgap's GPU and CPU paths, and PyTorch's time for the same forward. Runs under the GPU
machine's python3 (torch, safetensors, h5py, numpy); `make` and `compare` also run on a CPU
(the small config).

  python3 gpu_dit.py make CONFIG DIR [--seed S] [--latent FxHxW] [--layers L] [--shards N]
      CONFIG: small | 1.3b | 14b
      DIR/model/{config.json,model.safetensors} (bf16, original key names; dsgap's --model DIR/model),
      or with --shards N the layout Wan-AI ships its 14B in (diffusers): DIR/model/config.json
      (WanTransformer3DModel), diffusion_pytorch_model-0000i-of-0000N.safetensors (bf16, diffusers
      names, whole tensors in order, about equal shards) and diffusion_pytorch_model.safetensors.index.json,
      DIR/text.safetensors ([tokens, text_dim]), DIR/neg.safetensors (one zero token: dsgap's default
      negative prompt), DIR/noise.safetensors ([16, F, H, W]).
  python3 gpu_dit.py compare DIR DUMP_GPU DUMP_CPU LAT_GPU LAT_CPU --steps S --guidance G --shift X
                     [--dump-neg-gpu D]
      dumps: tests/wan_dump outputs (hidden.<l>, out) at t = 750; LAT_*: `dsgap generate --sampler
      euler` final latents (h5, /latents). Against wan_torch in fp32 (TF32 off; the reference) and in
      low precision, the naive computation of docs/spec.md §9's rule: dsgap GPU error <= 2 x naive error +
      2 x fp32 floor, dsgap CPU within fp32 (1e-4). The naive of a forward is the original's bf16
      autocast precision (bf16 outputs: the looser recipe); the naive of the final latents is dsgap's
      own recipe done naively (wan_torch "mixed": bf16 operands, fp32 arithmetic), with the autocast
      run's error printed beside it, because classifier-free guidance (v_u + g (v_c - v_u)) amplifies
      the two recipes' errors differently (see --dump-neg-gpu). --dump-neg-gpu: the dump of the
      negative prompt's forward (neg.safetensors): prints, per engine, the error of one CFG velocity at
      t = 750 and of its two passes, and their correlation. Exit 1 on a failed check.
  python3 gpu_dit.py bench DIR [--reps R]
      PyTorch's forward (wan_torch, bf16, SDPA) at DIR's noise size: median seconds of R after a
      warm-up, peak allocated memory; one JSON line.
Random weights: linears N(0, 1/fan_in) (activations keep their scale through 30 blocks), biases and
modulations N(0, 0.02^2)/N(0, 0.1^2), norm weights 1 + N(0, 0.1^2): finite everywhere in bf16.
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys

import torch

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch_ref"))
import wan_torch  # noqa: E402

CONFIGS = {
    # head_dim 128 (RoPE 44/42/42), 2 heads, 3 blocks, Wan's 16 channels and (1, 2, 2) patch
    "small": dict(dim=256, ffn_dim=512, freq_dim=256, text_dim=64, in_dim=16, out_dim=16, num_heads=2,
                  num_layers=3, patch_size=[1, 2, 2], eps=1e-6, text_len=512, latent=(3, 16, 24), tokens=9),
    # the Wan2.1-1.3B architecture; 480p x 81 frames = latent 21 x 60 x 104 (32760 tokens)
    "1.3b": dict(dim=1536, ffn_dim=8960, freq_dim=256, text_dim=4096, in_dim=16, out_dim=16, num_heads=12,
                 num_layers=30, patch_size=[1, 2, 2], eps=1e-6, text_len=512, latent=(21, 60, 104), tokens=77),
    # the Wan2.1-14B architecture (issue 21); 720p x 81 frames = latent 21 x 90 x 160 (75600 tokens);
    # --layers makes it shallower (the same layer, fewer of them: per-layer costs, less memory)
    "14b": dict(dim=5120, ffn_dim=13824, freq_dim=256, text_dim=4096, in_dim=16, out_dim=16, num_heads=40,
                num_layers=40, patch_size=[1, 2, 2], eps=1e-6, text_len=512, latent=(21, 90, 160), tokens=77),
}


def wan_cfg(c):
    return {k: c[k] for k in ("dim", "ffn_dim", "freq_dim", "text_dim", "in_dim", "out_dim", "num_heads",
                              "num_layers", "patch_size", "eps", "text_len")}


def random_weights(c, gen, dev):
    """dict original name -> bf16 tensor (each rounded as it is drawn: the 14B's fp32 draws would not
    fit beside them on an 80 GB card)"""
    D, F_, P = c["dim"], c["ffn_dim"], c["patch_size"]

    class Bf16(dict):
        def __setitem__(self, k, v):
            super().__setitem__(k, v.to(torch.bfloat16).contiguous())
    W = Bf16()

    def lin(name, out, inp):
        W[name + ".weight"] = torch.randn(out, inp, generator=gen, device=dev) / math.sqrt(inp)
        W[name + ".bias"] = torch.randn(out, generator=gen, device=dev) * 0.02

    def vec(name, n, base=0.0, s=0.1):
        W[name] = base + torch.randn(n, generator=gen, device=dev) * s

    pin = c["in_dim"] * P[0] * P[1] * P[2]
    W["patch_embedding.weight"] = torch.randn(D, c["in_dim"], *P, generator=gen, device=dev) / math.sqrt(pin)
    W["patch_embedding.bias"] = torch.randn(D, generator=gen, device=dev) * 0.02
    lin("text_embedding.0", D, c["text_dim"])
    lin("text_embedding.2", D, D)
    lin("time_embedding.0", D, c["freq_dim"])
    lin("time_embedding.2", D, D)
    lin("time_projection.1", 6 * D, D)
    for i in range(c["num_layers"]):
        b = "blocks.%d." % i
        W[b + "modulation"] = torch.randn(1, 6, D, generator=gen, device=dev) * 0.1
        for a in ("self_attn", "cross_attn"):
            for p in "qkvo":
                lin(b + a + "." + p, D, D)
            vec(b + a + ".norm_q.weight", D, 1.0)
            vec(b + a + ".norm_k.weight", D, 1.0)
        vec(b + "norm3.weight", D, 1.0)
        vec(b + "norm3.bias", D, 0.0)
        lin(b + "ffn.0", F_, D)
        lin(b + "ffn.2", D, F_)
    W["head.modulation"] = torch.randn(1, 2, D, generator=gen, device=dev) * 0.1
    lin("head.head", c["out_dim"] * P[0] * P[1] * P[2], D)
    return dict(W)


def diffusers_config(c):
    return {"_class_name": "WanTransformer3DModel", "_diffusers_version": "0.33.0", "added_kv_proj_dim": None,
            "attention_head_dim": c["dim"] // c["num_heads"], "cross_attn_norm": True, "eps": c["eps"],
            "ffn_dim": c["ffn_dim"], "freq_dim": c["freq_dim"], "image_dim": None, "in_channels": c["in_dim"],
            "num_attention_heads": c["num_heads"], "num_layers": c["num_layers"], "out_channels": c["out_dim"],
            "patch_size": c["patch_size"], "qk_norm": "rms_norm_across_heads", "rope_max_seq_len": 1024,
            "text_dim": c["text_dim"]}


def save_sharded(W, d, shards):
    """W (original names) as diffusers shards + index, each tensor whole, shards of about equal bytes"""
    from safetensors.torch import save_file
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    from wan_ref import diffusers_name
    names = list(W)
    total = sum(W[n].numel() * W[n].element_size() for n in names)
    parts, cur, size = [], [], 0
    for n in names:
        cur.append(n)
        size += W[n].numel() * W[n].element_size()
        if size >= total * (len(parts) + 1) / shards and len(parts) < shards - 1:
            parts.append(cur)
            cur = []
    parts.append(cur)
    wm = {}
    for i, part in enumerate(parts):
        f = "diffusion_pytorch_model-%05d-of-%05d.safetensors" % (i + 1, len(parts))
        save_file({diffusers_name(n): W[n].cpu() for n in part}, os.path.join(d, f))
        wm.update({diffusers_name(n): f for n in part})
    with open(os.path.join(d, "diffusion_pytorch_model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=1)
    return len(parts)


def cmd_make(a):
    from safetensors.torch import save_file
    c = dict(CONFIGS[a.config])
    if a.latent:
        c["latent"] = tuple(int(v) for v in a.latent.split("x"))
    if a.layers:
        c["num_layers"] = a.layers
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    os.makedirs(os.path.join(a.dir, "model"), exist_ok=True)
    W = random_weights(c, gen, dev)
    if a.shards:
        files = save_sharded(W, os.path.join(a.dir, "model"), a.shards)
        cfg = diffusers_config(c)
    else:
        save_file({k: v.cpu() for k, v in W.items()}, os.path.join(a.dir, "model", "model.safetensors"))
        files, cfg = 1, dict(wan_cfg(c), model_type="t2v", qk_norm=True, cross_attn_norm=True)
    with open(os.path.join(a.dir, "model", "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    g2 = torch.Generator().manual_seed(a.seed + 1)
    text = torch.randn(c["tokens"], c["text_dim"], generator=g2)
    noise = torch.randn(c["in_dim"], *c["latent"], generator=g2)
    save_file({"text": text}, os.path.join(a.dir, "text.safetensors"))
    save_file({"text": torch.zeros(1, c["text_dim"])}, os.path.join(a.dir, "neg.safetensors"))  # dsgap's default
    save_file({"noise": noise}, os.path.join(a.dir, "noise.safetensors"))
    n = sum(v.numel() for v in W.values())
    print("made %s: %s config, %.3g parameters (bf16), latent %s, %d weight file%s%s" % (
        a.dir, a.config, n, "x".join(map(str, c["latent"])), files, "s" if files > 1 else "",
        " + index (diffusers names)" if a.shards else ""))


def load_dir(d, dev):
    from safetensors.torch import load_file
    with open(os.path.join(d, "model", "config.json")) as f:
        cfg = json.load(f)
    W = {k: v.to(dev) for k, v in wan_torch.load(os.path.join(d, "model", "model.safetensors")).items()}
    text = load_file(os.path.join(d, "text.safetensors"))["text"]
    noise = load_file(os.path.join(d, "noise.safetensors"))["noise"]
    return cfg, W, text, noise


def flow_sigmas(steps, shift):
    """dsgap's dg_flow_schedule (Wan's FlowUniPC schedule): sigmas (steps + 1) and timesteps"""
    smax = float(torch.tensor(0.999, dtype=torch.float32))
    sig, ts = [], []
    for i in range(steps):
        s = i * ((0.0 - smax) / steps) + smax
        x = shift * s / (1 + (shift - 1) * s)
        ts.append(float(int(x * 1000)))
        sig.append(float(torch.tensor(x, dtype=torch.float32)))
    return sig + [0.0], ts


def euler_run(W, cfg, noise, text, steps, guidance, shift, dtype):
    """CFG flow-matching Euler with dsgap's schedule (negative prompt: zero embeddings)"""
    sig, ts = flow_sigmas(steps, shift)
    x = noise.float().to(W["patch_embedding.weight"].device)
    neg = torch.zeros(1, text.shape[1])  # dsgap's default negative prompt: one zero token
    for i in range(steps):
        v = wan_torch.forward(W, cfg, x, ts[i], text, dtype=dtype).float()
        if guidance != 1:
            vu = wan_torch.forward(W, cfg, x, ts[i], neg, dtype=dtype).float()
            v = vu + guidance * (v - vu)
        x = x + (sig[i + 1] - sig[i]) * v
    return x


def cfg_velocity(W, cfg, noise, text, g, dsgap_c, dsgap_u):
    """one CFG velocity at t = 750 from the noise: each engine's error in the conditional pass, the
    unconditional pass and v_u + g (v_c - v_u), against fp32; CFG amplifies uncorrelated pass errors
    by up to g + |g - 1| and cancels the part common to both passes"""
    neg = torch.zeros(1, text.shape[1])
    runs = {m: (wan_torch.forward(W, cfg, noise, 750, text, dtype=dt).double().cpu(),
                wan_torch.forward(W, cfg, noise, 750, neg, dtype=dt).double().cpu())
            for m, dt in (("fp32", torch.float32), ("torch-bf16", torch.bfloat16), ("torch-mixed", "mixed"),
                          ("torch-mixed-head-bf16", "mixed-head-bf16"))}
    runs["dsgap-gpu"] = (torch.as_tensor(dsgap_c).double(), torch.as_tensor(dsgap_u).double())
    rc, ru = runs["fp32"]
    rg = ru + g * (rc - ru)
    mx = float(rg.abs().max())
    for m in ("torch-bf16", "torch-mixed", "torch-mixed-head-bf16", "dsgap-gpu"):
        c, u = runs[m]
        ec, eu = (c - rc).flatten(), (u - ru).flatten()
        eg = float(((u + g * (c - u)) - rg).abs().max())
        corr = float(torch.dot(ec, eu) / (ec.norm() * eu.norm()).clamp_min(1e-300))
        print("info CFG %g velocity at t=750, %-21s: max err cond %.3g, uncond %.3g, cfg %.3g (rel %.3g) = %.2fx the "
              "passes' max; corr(cond err, uncond err) %.3f" % (g, m, float(ec.abs().max()), float(eu.abs().max()),
                                                                 eg, eg / mx, eg / float(max(ec.abs().max(), eu.abs().max())), corr))


def cmd_compare(a):
    from safetensors.torch import load_file
    import h5py
    import numpy as np
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    cfg, W, text, noise = load_dir(a.dir, dev)
    ref, low = {}, {}
    wan_torch.forward(W, cfg, noise, 750, text, record=ref, dtype=torch.float32)
    wan_torch.forward(W, cfg, noise, 750, text, record=low, dtype=torch.bfloat16)
    dumps = {"gpu": load_file(a.dump_gpu), "cpu": load_file(a.dump_cpu)}
    fails = 0

    def err(x, r):
        x, r = torch.as_tensor(x).double().cpu(), torch.as_tensor(r).double().cpu()
        return float((x - r).abs().max()), float(r.abs().max())

    def check(what, got, naive, r, fp32_only=False, naive_name="torch-bf16"):
        nonlocal fails
        eg, mx = err(got, r)
        floor = 2.0 ** -24 * mx
        if fp32_only:
            ok = eg <= 1e-4 * mx
            print("%s %s: max rel err %.3g <= 1e-4 (fp32 engines)" % ("ok  " if ok else "FAIL", what, eg / mx))
        else:
            en, _ = err(naive, r)
            ok = eg <= 2 * en + 2 * floor
            print("%s %s: max err %.3g <= 2 * %s %.3g + 2 * floor %.3g (max|ref| %.3g, rel %.3g)" %
                  ("ok  " if ok else "FAIL", what, eg, naive_name, en, floor, mx, eg / mx))
        fails += not ok

    names = ["hidden.%d" % l for l in range(cfg["num_layers"])] + ["out"]
    for nm in names:
        check("dsgap gpu " + nm, dumps["gpu"][nm], low[nm], ref[nm])
        check("dsgap cpu " + nm, dumps["cpu"][nm], None, ref[nm], fp32_only=True)
    for l in range(cfg["num_layers"]):
        for t in "qkv":
            nm = "%s.%d" % (t, l)
            check("dsgap gpu " + nm + " (attention operand)", dumps["gpu"][nm], low[nm], ref[nm])
    if a.dump_neg_gpu:
        cfg_velocity(W, cfg, noise, text, a.guidance, dumps["gpu"]["out"], load_file(a.dump_neg_gpu)["out"])
    # final latents of a whole CFG Euler run
    lat_ref = euler_run(W, cfg, noise, text, a.steps, a.guidance, a.shift, torch.float32)
    lat_low = euler_run(W, cfg, noise, text, a.steps, a.guidance, a.shift, torch.bfloat16)
    lat_mix = euler_run(W, cfg, noise, text, a.steps, a.guidance, a.shift, "mixed")
    eb, mx = err(lat_low, lat_ref)
    print("info torch-bf16 (autocast) final latents: max err %.3g (rel %.3g)" % (eb, eb / mx))
    for name, path in (("gpu", a.lat_gpu), ("cpu", a.lat_cpu)):
        with h5py.File(path, "r") as f:
            x = np.asarray(f["latents"], dtype=np.float32)
        check("dsgap %s final latents (%d Euler steps, CFG %g)" % (name, a.steps, a.guidance),
              x, lat_mix, lat_ref, fp32_only=(name == "cpu"), naive_name="torch-mixed")
    print("%d checks failed" % fails)
    return 1 if fails else 0


def cmd_bench(a):
    dev = "cuda"
    cfg, W, text, noise = load_dir(a.dir, dev)
    times = []
    torch.cuda.reset_peak_memory_stats()
    for r in range(a.reps + 1):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        wan_torch.forward(W, cfg, noise, 750, text, dtype=torch.bfloat16)
        e.record()
        torch.cuda.synchronize()
        if r:
            times.append(s.elapsed_time(e) * 1e-3)
    n = noise.shape[1] * noise.shape[2] * noise.shape[3] // (cfg["patch_size"][0] * cfg["patch_size"][1] *
                                                             cfg["patch_size"][2])
    print(json.dumps({"pytorch_forward_s": statistics.median(times), "times": times, "tokens": n,
                      "peak_alloc_gb": torch.cuda.max_memory_allocated() / 1e9, "torch": torch.__version__,
                      "device": torch.cuda.get_device_name()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("config", choices=sorted(CONFIGS))
    m.add_argument("dir")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--latent")
    m.add_argument("--layers", type=int, help="blocks (default: the config's)")
    m.add_argument("--shards", type=int, help="diffusers layout in N shards + index (as Wan-AI ships 14B: 6)")
    c = sub.add_parser("compare")
    for k in ("dir", "dump_gpu", "dump_cpu", "lat_gpu", "lat_cpu"):
        c.add_argument(k)
    c.add_argument("--steps", type=int, default=4)
    c.add_argument("--guidance", type=float, default=5.0)
    c.add_argument("--shift", type=float, default=5.0)
    c.add_argument("--dump-neg-gpu")
    b = sub.add_parser("bench")
    b.add_argument("dir")
    b.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    return {"make": cmd_make, "compare": cmd_compare, "bench": cmd_bench}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())

"""compare_diffusers.py: dsgap's CPU Wan2.1 engine against diffusers' WanTransformer3DModel, the
independent PyTorch forward wan_torch.py and the fp64 NumPy reference tests/wan_ref.py (issue 4,
Verification), on the CPU, at small configurations with random weights.

  python compare_diffusers.py [--dump build-cpu/tests/wan_dump] [--work DIR] [--log FILE]

Needs torch, diffusers and safetensors (a virtualenv outside the repository, e.g.
`python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch diffusers accelerate safetensors numpy`;
accelerate for from_pretrained(torch_dtype=bfloat16)) and
dsgap's build (tests/dit/wan_dump.c: one forward, every block's output and Q/K/V dumped).

Per configuration and weight precision (F32, and the same weights rounded to bf16 and stored BF16):
  1. a WanTransformer3DModel with every parameter random (norm weights and biases included, so a
     norm2/norm3 mix-up shows), saved with save_pretrained (diffusers layout, sharded) and the same
     tensors renamed into the original Wan layout (original norm3 = diffusers norm2) with an
     original config.json;
  2. dsgap (wan_dump) on both checkpoints: outputs must be bit-identical;
  3. dsgap vs the fp64 NumPy reference, wan_torch.py in fp32 and diffusers in fp32 (per block
     output hidden.<l>, self-attention q/k/v.<l> post-norm post-RoPE, final output);
  4. bf16 weights only: dsgap (fp32 compute) vs diffusers loaded with torch_dtype=bfloat16 and vs
     wan_torch.py in the original's bf16 autocast precision, and those two against each other.
Metric: max |a - b| / max |b| per tensor (b: the reference), the worst over a check's tensors;
rel L2 = ||a - b|| / ||b|| for the bf16 checks. Exit status 1 when any check fails.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True  # imports from tests/: leave no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import wan_torch  # noqa: E402
import wan_ref  # noqa: E402  (tests/wan_ref.py, numpy only)

# tolerances (max |a - b| / max |b|)
TOL_FP32 = 1e-5      # fp32 engines on the same math: what fp32 rounding gives (test_wan's TOL_FORWARD)
TOL_BF16 = 3e-2      # bf16 compute (8-bit mantissa, eps 2^-8) vs fp32, a few blocks deep
TEXT_LEN = 512

CONFIGS = {
    # head_dim 128: the real Wan head (RoPE 44/42/42), 16 channels, patch (1, 2, 2)
    "hd128": dict(model=dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=128, in_channels=16,
                             out_channels=16, text_dim=64, freq_dim=256, ffn_dim=512, num_layers=3,
                             cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6),
                  latent=(3, 8, 12), tokens=7, shard="4MB", prefix=True),
    # head_dim 64 (RoPE 24/20/20), 4 heads, in 4 != out 8 channels, patch (2, 2, 2)
    "hd64": dict(model=dict(patch_size=(2, 2, 2), num_attention_heads=4, attention_head_dim=64, in_channels=4,
                            out_channels=8, text_dim=48, freq_dim=64, ffn_dim=384, num_layers=2,
                            cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6),
                 latent=(6, 6, 10), tokens=11, shard=None, prefix=False),
    # the Wan2.1-1.3B block at full width (dim 1536, 12 heads, ffn 8960, text_dim 4096), 2 layers
    "w1.3b-2l": dict(model=dict(patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16,
                                out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=2,
                                cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6),
                     latent=(4, 16, 20), tokens=23, shard="200MB", prefix=False),
}
TIMESTEPS = (999, 421)

# --------------------------------------------------------------------------------------------------
# names: diffusers -> original Wan (the inverse of convert_wan_to_diffusers.py; norm2 <-> norm3)

TOP = [("condition_embedder.text_embedder.linear_1.", "text_embedding.0."),
       ("condition_embedder.text_embedder.linear_2.", "text_embedding.2."),
       ("condition_embedder.time_embedder.linear_1.", "time_embedding.0."),
       ("condition_embedder.time_embedder.linear_2.", "time_embedding.2."),
       ("condition_embedder.time_proj.", "time_projection.1."), ("proj_out.", "head.head."),
       ("patch_embedding.", "patch_embedding.")]
BLOCK = [("scale_shift_table", "modulation"), ("attn1.to_out.0.", "self_attn.o."), ("attn2.to_out.0.", "cross_attn.o."),
         ("attn1.norm_", "self_attn.norm_"), ("attn2.norm_", "cross_attn.norm_"), ("attn1.to_", "self_attn."),
         ("attn2.to_", "cross_attn."), ("norm2.", "norm3."), ("ffn.net.0.proj.", "ffn.0."), ("ffn.net.2.", "ffn.2.")]


def original_name(n):
    if n == "scale_shift_table":
        return "head.modulation"
    for a, b in TOP:
        if n.startswith(a):
            return b + n[len(a):]
    if n.startswith("blocks."):
        _, i, rest = n.split(".", 2)
        for a, b in BLOCK:
            if rest.startswith(a):
                return "blocks.%s.%s%s" % (i, b, rest[len(a):])
    raise KeyError("no original name for " + n)


def original_config(mc):
    D = mc["num_attention_heads"] * mc["attention_head_dim"]
    return {"_class_name": "WanModel", "dim": D, "eps": mc["eps"], "ffn_dim": mc["ffn_dim"], "freq_dim": mc["freq_dim"],
            "in_dim": mc["in_channels"], "model_type": "t2v", "num_heads": mc["num_attention_heads"],
            "num_layers": mc["num_layers"], "out_dim": mc["out_channels"], "text_len": TEXT_LEN,
            "text_dim": mc["text_dim"], "patch_size": list(mc["patch_size"])}


def wan_cfg(mc):
    D = mc["num_attention_heads"] * mc["attention_head_dim"]
    return {"dim": D, "ffn_dim": mc["ffn_dim"], "freq_dim": mc["freq_dim"], "text_dim": mc["text_dim"],
            "in_dim": mc["in_channels"], "out_dim": mc["out_channels"], "num_heads": mc["num_attention_heads"],
            "num_layers": mc["num_layers"], "patch_size": list(mc["patch_size"]), "eps": mc["eps"],
            "text_len": TEXT_LEN}


# --------------------------------------------------------------------------------------------------
# the model with random weights

def randomize(model, seed):
    """every parameter random, at scales that keep activations O(1) over a few blocks"""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if name.endswith("norm_q.weight") or name.endswith("norm_k.weight") or \
                    (name.endswith(".weight") and ".norm" in name):
                v = 1 + 0.2 * r                       # norm gains
            elif name.endswith("scale_shift_table"):
                v = 0.2 * r                           # modulation
            elif name.endswith(".bias"):
                v = 0.1 * r
            else:
                fan_in = int(np.prod(p.shape[1:]))
                v = r / np.sqrt(fan_in)
            p.copy_(v.to(p.dtype))


def save_checkpoints(model, mc, case, work, bf16):
    from safetensors.torch import save_file
    tag = "%s_%s" % (case["name"], "bf16" if bf16 else "f32")
    ddir, odir = os.path.join(work, tag, "diffusers"), os.path.join(work, tag, "original")
    os.makedirs(odir, exist_ok=True)
    m = model.to(torch.bfloat16) if bf16 else model
    kw = {"max_shard_size": case["shard"]} if case["shard"] else {}
    m.save_pretrained(ddir, safe_serialization=True, **kw)
    sd = {original_name(k): v.contiguous() for k, v in m.state_dict().items()}
    pre = wan_torch.PREFIX if case["prefix"] else ""
    fname = "wan.safetensors" if case["prefix"] else "diffusion_pytorch_model.safetensors"
    save_file({pre + k: v for k, v in sd.items()}, os.path.join(odir, fname))
    with open(os.path.join(odir, "config.json"), "w") as f:
        json.dump(original_config(mc), f, indent=2)
    model.float()
    return ddir, odir, os.path.join(odir, fname), sd


# --------------------------------------------------------------------------------------------------
# the runs

def run_dump(exe, model, text, noise, t, out):
    r = subprocess.run([exe, model, text, noise, str(t), out], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("wan_dump failed: %s%s" % (r.stdout, r.stderr))
    from safetensors.torch import load_file
    return load_file(out)


def run_diffusers(ddir, noise, text, t, dtype, sin64=False):
    """diffusers' forward with hooks; sin64: its fp32 timestep sinusoid replaced by the fp64 one"""
    from diffusers import WanTransformer3DModel
    import diffusers.models.transformers.transformer_wan as tw
    model = WanTransformer3DModel.from_pretrained(ddir, torch_dtype=dtype).eval()
    if sin64:
        dim = model.config.freq_dim
        model.condition_embedder.timesteps_proj.forward = lambda ts: wan_torch.sinusoid(dim, float(ts[0]))
    rec, calls = {}, []
    orig = tw.dispatch_attention_fn

    def spy(query, key, value, *a, **k):
        if key.shape[1] == query.shape[1]:  # self-attention (N tokens != 512 context rows)
            layer = len(calls)
            calls.append(layer)
            for nm, x in (("q", query), ("k", key), ("v", value)):
                rec["%s.%d" % (nm, layer)] = x[0].transpose(0, 1).float().clone()  # (B, N, H, d) -> (H, N, d)
        return orig(query, key, value, *a, **k)

    hooks = [b.register_forward_hook(lambda mod, i, o, l=l: rec.__setitem__("hidden.%d" % l, o[0].float().clone()))
             for l, b in enumerate(model.blocks)]
    ctx = torch.zeros(1, TEXT_LEN, text.shape[1])
    ctx[0, :text.shape[0]] = text
    tw.dispatch_attention_fn = spy
    try:
        with torch.no_grad():
            out = model(hidden_states=noise[None].to(dtype), timestep=torch.tensor([t]),
                        encoder_hidden_states=ctx.to(dtype), return_dict=False)[0]
    finally:
        tw.dispatch_attention_fn = orig
        for h in hooks:
            h.remove()
    rec["out"] = out[0].float()
    assert len(calls) == len(model.blocks), calls
    return rec


def run_numpy(sd, cfg, noise, text, t):
    W = {k: v.double().numpy() for k, v in sd.items()}
    rec = {}
    wan_ref.forward(W, cfg, noise.double().numpy(), t, text.double().numpy(), rec)
    return {k: torch.from_numpy(v) for k, v in rec.items()}


def negative_controls(log, dsgap, W, cfg, noise, text, t):
    """wan_torch.py with one deliberate error each must miss dsgap by far more than TOL_FP32"""
    log("       negative controls (wan_torch.py with one deliberate error; must exceed %.0e by far):" % TOL_FP32)
    sinusoid, rope, rope_table = wan_torch.sinusoid, wan_torch.rope, wan_torch.rope_table

    def sin_first(dim, tt):
        s = sinusoid(dim, tt)
        return torch.cat([s[:, dim // 2:], s[:, :dim // 2]], dim=1)

    def rope_halves(x, table):  # rotate (i, i + d/2) pairs instead of the interleaved (2i, 2i+1)
        n, h, d = x.shape
        y = x.reshape(n, h, 2, d // 2).transpose(-1, -2).reshape(n, h, d)
        y = rope(y, table)
        return y.reshape(n, h, d // 2, 2).transpose(-1, -2).reshape(n, h, d)

    def rope_global_freq(d, grid):  # Wan's 22/21/21 pair split, but one ladder theta^(-2p/d), p = 0..d/2-1
        f, hh, w = grid
        dt, dh = d - 4 * (d // 6), 2 * (d // 6)
        fr = 1.0 / torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)
        pos = torch.stack(torch.meshgrid(torch.arange(f), torch.arange(hh), torch.arange(w), indexing="ij"), -1)
        axis = torch.tensor([0] * (dt // 2) + [1] * (dh // 2) + [2] * (dh // 2))
        ang = pos.reshape(-1, 3)[:, axis].double() * fr
        return torch.polar(torch.ones_like(ang), ang)

    swapped = dict(W)
    for l in range(cfg["num_layers"]):  # the FFN pre-norm given norm3's affine weights (norm2/norm3 mix-up)
        swapped["blocks.%d.norm3.weight" % l] = torch.ones_like(W["blocks.%d.norm3.weight" % l])
        swapped["blocks.%d.norm3.bias" % l] = torch.zeros_like(W["blocks.%d.norm3.bias" % l])
    variants = [("sinusoid sin-first", "sinusoid", sin_first, W),
                ("RoPE on (i, i+d/2) halves, not interleaved pairs", "rope", rope_halves, W),
                ("RoPE with one frequency ladder over head_dim", "rope_table", rope_global_freq, W),
                ("cross-attn pre-norm without norm3's affine", None, None, swapped)]
    try:
        for label, fn, repl, Wv in variants:
            if fn:
                setattr(wan_torch, fn, repl)
            r = {}
            wan_torch.forward(Wv, cfg, noise, t, text, r)
            wan_torch.sinusoid, wan_torch.rope, wan_torch.rope_table = sinusoid, rope, rope_table
            e = max(wan_torch.max_rel(dsgap[k], r[k]) for k in r)
            ok = e > 100 * TOL_FP32
            log.fails += not ok
            log.rows.append(("negative control " + label, e, TOL_FP32, ok))
            log("       %-4s %-52s max rel %.2e" % ("PASS" if ok else "FAIL", label, e))
    finally:
        wan_torch.sinusoid, wan_torch.rope, wan_torch.rope_table = sinusoid, rope, rope_table


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


class Log:
    def __init__(self, path):
        self.f = open(path, "w") if path else None
        self.fails = 0
        self.rows = []

    def __call__(self, s=""):
        print(s)
        if self.f:
            self.f.write(s + "\n")
            self.f.flush()

    def check(self, label, got, ref, tol, keys=None, l2=False):
        keys = sorted(set(got) & set(ref)) if keys is None else keys
        per = {k: wan_torch.max_rel(got[k], ref[k]) for k in keys}
        worst_k = max(per, key=per.get)
        worst = per[worst_k]
        ok = worst <= tol
        self.fails += not ok
        extra = "  rel L2 (out) %.2e" % rel_l2(got["out"], ref["out"]) if l2 else ""
        self(" %-4s %-62s max rel %.2e (%s) tol %.0e%s" % ("PASS" if ok else "FAIL", label, worst, worst_k, tol, extra))
        self("       out %.2e | %s" % (per.get("out", float("nan")), "  ".join(
            "%s %.1e" % (k, per[k]) for k in keys if k.startswith("hidden."))))
        qkv = [k for k in keys if k[0] in "qkv"]
        if qkv:
            self("       q/k/v worst %.2e (%s)" % (max(per[k] for k in qkv), max(qkv, key=per.get)))
        self.rows.append((label, worst, tol, ok))
        return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(HERE))
    ap.add_argument("--dump", default=os.path.join(root, "build-cpu", "tests", "wan_dump"))
    ap.add_argument("--work", default="/tmp/dsgap-torch-ref")
    ap.add_argument("--log", default=None)
    a = ap.parse_args()
    import diffusers
    import safetensors
    from safetensors.torch import save_file
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    log = Log(a.log)
    log("dsgap Wan2.1 CPU engine vs diffusers WanTransformer3DModel, wan_torch.py and wan_ref.py (fp64 NumPy)")
    log("date %s UTC" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"))
    git = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", "src"], capture_output=True, text=True).stdout
    log("dsgap %s%s (CPU engine, fp32); wan_dump %s (tests/dit/wan_dump.c)" % (
        git, " + uncommitted src changes" if dirty else "", os.path.relpath(a.dump, root)))
    log("python %s, torch %s (CPU, %d threads), diffusers %s, safetensors %s, numpy %s; %s" % (
        platform.python_version(), torch.__version__, torch.get_num_threads(), diffusers.__version__,
        safetensors.__version__, np.__version__, cpu_name()))
    log("metric: max |a - b| / max |b| per tensor, b = the reference; worst over the check's tensors")
    log("tensors: hidden.<l> (N, D) after block l; q/k/v.<l> (H, N, d) as self-attention receives them; out (C, F, H, W)")
    log("tolerances: %.0e fp32 vs fp32/fp64; %.0e for bf16 compute; layouts: bit-identical" % (TOL_FP32, TOL_BF16))
    for ci, (name, case) in enumerate(CONFIGS.items()):
        case = dict(case, name=name)
        mc = case["model"]
        from diffusers import WanTransformer3DModel
        model = WanTransformer3DModel(**mc).eval()
        randomize(model, seed=1234 + ci)
        cfg = wan_cfg(mc)
        C = mc["in_channels"]
        g = torch.Generator().manual_seed(7)
        noise = torch.randn((C,) + case["latent"], generator=g)
        text = torch.randn(case["tokens"], mc["text_dim"], generator=g)
        inp = os.path.join(a.work, name)
        os.makedirs(inp, exist_ok=True)
        save_file({"noise": noise}, os.path.join(inp, "noise.safetensors"))
        save_file({"text": text}, os.path.join(inp, "text.safetensors"))
        grid = [s // p for s, p in zip(case["latent"], mc["patch_size"])]
        log()
        log("== %s: %d heads x head_dim %d (dim %d), %d layers, ffn %d, text_dim %d (%d tokens padded to %d), "
            "freq_dim %d, channels %d -> %d, patch %s, latent %s -> grid %s = %d tokens" % (
                name, mc["num_attention_heads"], mc["attention_head_dim"], cfg["dim"], mc["num_layers"], mc["ffn_dim"],
                mc["text_dim"], case["tokens"], TEXT_LEN, mc["freq_dim"], C, mc["out_channels"],
                "x".join(map(str, mc["patch_size"])), "x".join(map(str, case["latent"])), "x".join(map(str, grid)),
                int(np.prod(grid))))
        for bf16 in (False, True):
            ddir, odir, opath, sd = save_checkpoints(model, mc, case, a.work, bf16)
            files = sorted(f for f in os.listdir(ddir) if f.endswith(".safetensors"))
            files = files[0] if len(files) == 1 else "%d shards + index" % len(files)
            wt = "BF16" if bf16 else "F32"
            log("-- %s weights: diffusers layout %s (%s); original layout %s%s" % (
                wt, ddir, files, odir, " (model.diffusion_model. prefix)" if case["prefix"] else ""))
            for t in TIMESTEPS:
                tag = "%s_%s_t%d" % (name, wt.lower(), t)
                dd = run_dump(a.dump, ddir, os.path.join(inp, "text.safetensors"), os.path.join(inp, "noise.safetensors"),
                              t, os.path.join(a.work, tag + "_dsgap_diffusers.safetensors"))
                do = run_dump(a.dump, odir, os.path.join(inp, "text.safetensors"), os.path.join(inp, "noise.safetensors"),
                              t, os.path.join(a.work, tag + "_dsgap_original.safetensors"))
                same = set(dd) == set(do) and all(torch.equal(dd[k], do[k]) for k in dd)
                log(" %-4s t=%d  dsgap original layout == diffusers layout, bit for bit (%d tensors)" % (
                    "PASS" if same else "FAIL", t, len(dd)))
                log.fails += not same
                log.rows.append(("%s t=%d layouts identical" % (tag, t), 0.0 if same else float("inf"), 0.0, same))
                ref64 = run_numpy(sd, cfg, noise, text, t)
                log.check("t=%d dsgap vs fp64 NumPy (wan_ref.py)" % t, do, ref64, TOL_FP32)
                Wo = wan_torch.load(opath)
                rt = {}
                wan_torch.forward(Wo, cfg, noise, t, text, rt)
                log.check("t=%d dsgap vs wan_torch.py fp32" % t, do, rt, TOL_FP32)
                rd = run_diffusers(ddir, noise, text, t, torch.float32)
                log.check("t=%d dsgap vs diffusers fp32" % t, dd, rd, TOL_FP32)
                log.check("t=%d (wan_torch.py fp32 vs diffusers fp32)" % t, rt, rd, TOL_FP32)
                rd64 = run_diffusers(ddir, noise, text, t, torch.float32, sin64=True)
                log.check("t=%d dsgap vs diffusers fp32 with an fp64 timestep sinusoid" % t, dd, rd64, TOL_FP32)
                if not bf16 and t == TIMESTEPS[0]:
                    negative_controls(log, do, Wo, cfg, noise, text, t)
                if bf16:
                    rdb = run_diffusers(ddir, noise, text, t, torch.bfloat16)
                    rtb = {}
                    wan_torch.forward(Wo, cfg, noise, t, text, rtb, dtype=torch.bfloat16)
                    log.check("t=%d dsgap (fp32) vs diffusers bf16" % t, dd, rdb, TOL_BF16, l2=True)
                    log.check("t=%d dsgap (fp32) vs wan_torch.py bf16 (autocast-style)" % t, dd, rtb, TOL_BF16, l2=True)
                    log.check("t=%d (wan_torch.py bf16 vs diffusers bf16)" % t, rtb, rdb, TOL_BF16, l2=True)
    log()
    log("summary (worst over configurations, weight precisions and timesteps):")
    worst = {}
    for label, e, tol, ok in log.rows:
        key = label.split(" ", 1)[1] if label.startswith("t=") else label
        key = key.split(" t=")[0] if "layouts identical" not in key else "dsgap original layout == diffusers layout"
        w = worst.setdefault(key, [0.0, tol, 0, 0])
        w[0], w[2], w[3] = max(w[0], e), w[2] + 1, w[3] + (not ok)
    for key, (e, tol, n, bad) in worst.items():
        if key.startswith("negative control"):
            continue
        log(" %-4s %-62s worst %.2e tol %.0e (%d checks)" % ("FAIL" if bad else "PASS", key, e, tol, n))
    neg = [w for k, w in worst.items() if k.startswith("negative control")]
    if neg:
        log(" %-4s %-62s smallest miss %.2e (%d checks)" % ("FAIL" if any(w[3] for w in neg) else "PASS",
            "negative controls (deliberately wrong wan_torch.py)", min(
                e for label, e, tol, ok in log.rows if label.startswith("negative control")), sum(w[2] for w in neg)))
    log("summary: %d checks, %d failed" % (len(log.rows), log.fails))
    return 1 if log.fails else 0


if __name__ == "__main__":
    sys.exit(main())

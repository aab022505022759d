"""generate.py: `python -m dsgap.generate`, the closed loop for a diffusers pipeline: the dense run
(torch's own attention) and every policy at every density (dsgap.torch.attention inside every
self-/joint-attention call of the transformer) from the same noise, in the output schema of
`dsgap generate` (docs/spec.md §6.6):

  DIR/<policy>[@rho].h5   final latents, /latents (C, F, H, W) float32 (format "dsgap-latents")
  DIR/frames/<run>.h5     decoded frames when the pipeline has a VAE: /latents (3, F, H, W) RGB in
                          [-1, 1], what `dsgap sheet` reads
  DIR/generate.csv        policy,density_target,density,psnr,ssim,psnr_min,ssim_min,transformer_s,
                          total_s,speedup (dense first); psnr/ssim per latent frame against the dense
                          run, averaged over frames, min = the worst frame (src/dit/fidelity.h)
  DIR/generate.json       format "dsgap-generate", settings and per run its times; what PyTorch does
                          not measure (the C engine's op-table times) is null
  DIR/frames.csv          with a VAE: the same fidelity on the decoded frames

    python -m dsgap.generate PIPELINE_DIR --prompt-embeds emb.safetensors --out G --steps 50 \\
        --policies mc-sparse,svg2 --density 0.15,0.3 --schedule warmup=10 --device cuda

or from Python: dsgap.generate.run(pipe, "G", policies=["mc-sparse"], densities=[0.15], call={...}).
"""
import argparse
import csv
import datetime
import inspect
import io
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HEADER = "policy,density_target,density,psnr,ssim,psnr_min,ssim_min,transformer_s,total_s,speedup"
NULL_TIMES = ("gemm_s", "table_attention_s", "elementwise_s", "layernorm_s", "heads_s", "residual_s", "convert_s")


# --------------------------------------------------------------------------------------------------
# fidelity: dsgap generate's own (src/dit/fidelity.c through libdsgap's dsgap_frames_fidelity)

def frames_fidelity(ref, x):
    """per frame f of (C, F, H, W) arrays: psnr (L = max - min of the dense frame; inf when equal) and
    SSIM (11x11 Gaussian window, sigma 1.5, renormalised at the borders, C1 = (0.01 L)^2, C2 = (0.03 L)^2)"""
    from . import torch_abi
    return torch_abi.frames_fidelity(ref, x)


def summarise(ref, x):
    p, s = frames_fidelity(ref, x)
    return dict(psnr=float(p.mean()), ssim=float(s.mean()), psnr_min=float(p.min()), ssim_min=float(s.min()))


# --------------------------------------------------------------------------------------------------

def parse_schedule(s):
    """'warmup=W,anchors=a;b|once|every:N,dense_layers=l;m-n|none' -> generate.json's schedule object"""
    def ints(v):
        out = []
        for part in ("" if v == "none" else v).replace(";", " ").split():
            a, _, b = part.partition("-")
            out += list(range(int(a), int(b) + 1)) if b else [int(a)]
        return out
    kv = dict(p.split("=", 1) for p in (s or "").split(",") if p)
    w = int(kv.get("warmup", 0))
    d = {"warmup": w}
    anchors = kv.get("anchors", "once")
    if anchors != "once" and not anchors.startswith("every:"):
        d["anchors"] = ints(anchors)
    else:
        d["anchor"] = w - 1 if w > 0 else 0
        if anchors.startswith("every:"):
            d["anchor_every"] = int(anchors[6:])
    d["dense_layers"] = ints(kv.get("dense_layers", ""))
    return d


def run_name(policy, rho, dense):
    name = f"{policy}.h5" if dense else f"{policy}@{rho:g}.h5"
    return name.replace("/", "_").replace(":", "_").replace(" ", "_")


def as_cfhw(x):
    """a pipeline's latents (batch first) as (C, F, H, W) float32"""
    x = x.detach().float().cpu().numpy() if hasattr(x, "detach") else np.asarray(x, np.float32)
    x = x[0]
    if x.ndim == 3:     # an image's (C, H, W)
        x = x[:, None]
    elif x.ndim == 2:   # packed tokens (S, C)
        x = x.T[:, None, :, None]
    return np.ascontiguousarray(x, np.float32)


def frames_rgb(fr):
    """a pipeline's "pt" output in [0, 1], video (B, F, 3, H, W) or image (B, 3, H, W), as (3, F, H, W) in [-1, 1]"""
    import torch
    fr = torch.as_tensor(np.asarray(fr) if not torch.is_tensor(fr) else fr).float().cpu()
    fr = fr[0].permute(1, 0, 2, 3) if fr.dim() == 5 else fr[0][:, None]
    return np.ascontiguousarray(fr.numpy() * 2 - 1, np.float32)


def write_latents(path, x, policy, rho):
    import h5py
    tmp = path + ".tmp"
    with h5py.File(tmp, "w") as f:
        C, F, H, W = x.shape
        d = f.create_dataset("latents", data=x, dtype="<f4", chunks=(C, 1, H, W), compression="gzip",
                             compression_opts=4)
        d.attrs["policy"], d.attrs["density_target"] = policy, f"{rho:g}"
        f.attrs["format"] = "dsgap-latents"
        from . import __version__
        f.attrs["created_by"] = f"dsgap {__version__} (python)"
    return tmp


def _git_commit():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        r = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                           timeout=10)
        return r.stdout.strip() or "unknown"
    except Exception:
        return "unknown"


class _Timer:
    """time inside the transformer's forwards (the device synchronised at both ends)"""

    def __init__(self, module, family):
        import torch
        self.torch, self.seconds, self.forwards, self.t0, self.grid, self.family = torch, 0.0, 0, None, None, family
        self.hooks = [module.register_forward_pre_hook(self._pre, with_kwargs=True), module.register_forward_hook(self._post)]
        self.cuda = any(p.is_cuda for p in module.parameters())

    def _sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def _pre(self, m, args, kwargs):
        if self.grid is None and self.family is not None:
            from .torch import _bind
            try:
                self.grid = list(self.family.grid(m, _bind(m, args, kwargs)))
            except Exception:
                pass
        self._sync()
        self.t0 = time.perf_counter()

    def _post(self, m, args, out):
        self._sync()
        self.seconds += time.perf_counter() - self.t0
        self.forwards += 1

    def remove(self):
        for h in self.hooks:
            h.remove()


def run(pipe, out, policies=("mc-sparse",), densities=(0.15,), schedule="", call=None, seed=0,
        transformer="transformer", settings=None, quiet=False):
    """The closed loop: pipe(**call) dense, then under each policy at each density, every run from a
    generator seeded with `seed` (the same noise). Writes DIR as described above; returns the rows of
    generate.csv as dicts. call: the pipeline's arguments (output_type is set here)."""
    import torch
    from . import __version__
    from . import torch as dtorch
    from .families import family_of
    module = getattr(pipe, transformer)
    params = inspect.signature(pipe.__call__).parameters
    vae = getattr(pipe, "vae", None) is not None and "callback_on_step_end" in params
    os.makedirs(out, exist_ok=True)
    stage = os.path.join(out, f".generate.tmp.{os.getpid()}")
    os.makedirs(os.path.join(stage, "frames") if vae else stage, exist_ok=True)
    runs = [("dense", 1.0, True)] + [(p, float(r), False) for p in policies if p != "dense" for r in densities]
    rows, jruns, frows, ref, fref = [], [], [], None, None
    timer = None
    try:
        for policy, rho, dense in runs:
            kw = dict(call or {})
            if "generator" in params:
                kw["generator"] = torch.Generator(device="cpu").manual_seed(seed)
            last = {}
            if vae:
                kw["output_type"] = "pt"

                def grab(p, i, t, ck):
                    last["latents"] = ck["latents"]
                    return {}
                kw["callback_on_step_end"] = grab
                if "callback_on_step_end_tensor_inputs" in params:
                    kw["callback_on_step_end_tensor_inputs"] = ["latents"]
            elif "output_type" in params:
                kw["output_type"] = "latent"
            timer = _Timer(module, family_of(module))
            att = None if dense else dtorch.attention(module, policy=policy, density=rho, schedule=schedule)
            if not quiet:
                print(f"dsgap.generate: {policy}" + ("" if dense else f"@{rho:g}"), file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            try:
                if att:
                    att.install()
                res = pipe(**kw)
                if timer.cuda:
                    torch.cuda.synchronize()
                total = time.perf_counter() - t0
                st = att.stats() if att else None
            finally:
                if att:
                    att.remove()
                timer.remove()
            lat = last.get("latents") if vae else res
            if not vae:
                for name in ("frames", "images", "latents"):
                    if hasattr(lat, name):
                        lat = getattr(lat, name)
                        break
                if isinstance(lat, (tuple, list)):
                    lat = lat[0]
            x = as_cfhw(lat)
            if ref is None:
                ref = x
            fid = summarise(ref, x)
            density = 1.0 if dense or not st["full_pairs"] else st["pairs"] / st["full_pairs"]
            row = dict(policy=policy, density_target=rho, density=density, **fid, transformer_s=timer.seconds,
                       total_s=total)
            rows.append(row)
            jruns.append(dict(policy=policy, density_target=rho,
                              attention_s=st["seconds"] if st else None, metadata_s=st["meta_seconds"] if st else None,
                              policy_calls_s=st["policy_seconds"] if st else None,
                              attend_s=st["attend_seconds"] if st else None,
                              sparse_units=st["sparse_calls"] if st else 0, transformer_s=timer.seconds,
                              forwards=timer.forwards, shared_forwards=0, **{k: None for k in NULL_TIMES},
                              units=st["calls"] if st else None,
                              fallback_calls=st["fallback_calls"] if st else 0,
                              fallbacks=st["fallbacks"] if st else {}, total_s=total))
            write_latents(os.path.join(stage, run_name(policy, rho, dense)), x, policy, rho)
            if vae:
                fr = res.frames if hasattr(res, "frames") else res.images if hasattr(res, "images") else res[0]
                fx = frames_rgb(fr)
                if fref is None:
                    fref = fx
                frows.append(dict(policy=policy, density_target=rho, **summarise(fref, fx)))
                write_latents(os.path.join(stage, "frames", run_name(policy, rho, dense)), fx, policy, rho)
        # generate.csv, generate.json (and frames.csv), then everything published together
        buf = io.StringIO()
        buf.write(HEADER + "\n")
        for r in rows:
            buf.write(f"{r['policy']},{r['density_target']:g},{r['density']:.6g},{r['psnr']:.6g},{r['ssim']:.6g},"
                      f"{r['psnr_min']:.6g},{r['ssim_min']:.6g},{r['transformer_s']:.6g},{r['total_s']:.6g},"
                      f"{rows[0]['transformer_s'] / r['transformer_s']:.4g}\n")
        open(os.path.join(stage, "generate.csv.tmp"), "w").write(buf.getvalue())
        if vae:
            with open(os.path.join(stage, "frames.csv.tmp"), "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["policy", "density_target", "psnr", "ssim", "psnr_min", "ssim_min"])
                for r in frows:
                    w.writerow([r["policy"], f"{r['density_target']:g}"] +
                               [f"{r[k]:.6g}" for k in ("psnr", "ssim", "psnr_min", "ssim_min")])
        dev = next(module.parameters()).device
        cfg = {k: v for k, v in dict(getattr(module, "config", {}) or {}).items() if not k.startswith("_")}
        sched = getattr(pipe, "scheduler", None)
        j = dict(format="dsgap-generate", dsgap_version=__version__, git_commit=_git_commit(),
                 date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                 device="gpu" if dev.type == "cuda" else "cpu", engine="python", model=type(module).__name__,
                 weights=(settings or {}).get("weights", ""), config=json.loads(json.dumps(cfg, default=str)),
                 latent=list(ref.shape[1:]), grid=timer.grid if timer else None,
                 steps=(call or {}).get("num_inference_steps"),
                 shift=getattr(getattr(sched, "config", None), "shift", None) if sched is not None else None,
                 guidance=(call or {}).get("guidance_scale"),
                 sampler=type(sched).__name__ if sched is not None else None, pipeline=type(pipe).__name__,
                 text=(settings or {}).get("text", ""), seed=seed, schedule=parse_schedule(schedule), runs=jruns)
        for k, v in (settings or {}).items():
            j.setdefault(k, v)
        with open(os.path.join(stage, "generate.json.tmp"), "w") as f:
            json.dump(j, f, indent=2, default=str)
            f.write("\n")
        for root, _, files in os.walk(stage):
            dest = os.path.join(out, os.path.relpath(root, stage))
            os.makedirs(dest, exist_ok=True)
            for name in files:
                os.replace(os.path.join(root, name), os.path.join(dest, name[:-4]))
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    if not quiet:
        print(f"dsgap.generate: wrote {out}/generate.csv, generate.json and {len(rows)} latents files", file=sys.stderr)
    return rows


# --------------------------------------------------------------------------------------------------

def parser():
    from .cli import index_list  # noqa: F401  (the same argument conventions as dsgap-capture)
    p = argparse.ArgumentParser(prog="python -m dsgap.generate", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a diffusers pipeline directory (model_index.json), loaded offline")
    p.add_argument("--out", "-o", required=True, help="output directory")
    p.add_argument("--prompt")
    p.add_argument("--prompt-embeds", help="precomputed text embeddings (.safetensors or .pt; FILE:NAME)")
    p.add_argument("--negative-prompt")
    p.add_argument("--negative-embeds", help="precomputed negative embeddings")
    p.add_argument("--policies", default="mc-sparse", help="policy specs, comma-separated (dense always runs)")
    p.add_argument("--density", default="0.15", help="top-k densities, comma-separated (default 0.15)")
    p.add_argument("--schedule", default="", help="warmup=W,anchors=a;b,dense_layers=l")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--height", type=int)
    p.add_argument("--width", type=int)
    p.add_argument("--frames", type=int)
    p.add_argument("--guidance", type=float)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="cuda or cpu (default cuda when available)")
    p.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default=None)
    p.add_argument("--transformer", default="transformer")
    p.add_argument("--quiet", action="store_true")
    return p


def main(argv=None):
    a = parser().parse_args(argv)
    if not os.path.isfile(os.path.join(a.model, "model_index.json")):
        print(f"dsgap.generate: {a.model} is not a diffusers pipeline directory (no model_index.json)", file=sys.stderr)
        return 2
    if not a.prompt and not a.prompt_embeds:
        print("dsgap.generate: give --prompt or --prompt-embeds", file=sys.stderr)
        return 2
    try:
        dens = [float(d) for d in a.density.split(",") if d]
    except ValueError:
        dens = []
    if not dens or not all(0 < d <= 1 for d in dens):
        print(f"dsgap.generate: bad --density '{a.density}' (comma-separated numbers in (0,1])", file=sys.stderr)
        return 2
    import torch
    import diffusers
    from .cli import load_embeds
    from .torch_abi import DsgapError
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = getattr(torch, a.dtype or ("bfloat16" if device == "cuda" else "float32"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    load = dict(local_files_only=True)
    if dtype != torch.float32:
        load["torch_dtype"] = dtype
    pipe = diffusers.DiffusionPipeline.from_pretrained(a.model, **load)
    pipe.to(device)
    if getattr(pipe, a.transformer, None) is None:
        print(f"dsgap.generate: the pipeline has no component '{a.transformer}'", file=sys.stderr)
        return 2
    params = inspect.signature(pipe.__call__).parameters
    call = dict(num_inference_steps=a.steps)
    for k, v in (("height", a.height), ("width", a.width), ("num_frames", a.frames), ("guidance_scale", a.guidance),
                 ("negative_prompt", a.negative_prompt)):
        if v is not None:
            if k not in params:
                print(f"dsgap.generate: {type(pipe).__name__} takes no {k}", file=sys.stderr)
                return 2
            call[k] = v
    if a.prompt_embeds:
        call["prompt_embeds"] = load_embeds(a.prompt_embeds, torch).to(device, dtype)
    else:
        call["prompt"] = a.prompt
    if a.negative_embeds:
        call["negative_prompt_embeds"] = load_embeds(a.negative_embeds, torch).to(device, dtype)
    call = {k: v for k, v in call.items() if k in params}
    model = os.path.abspath(a.model)  # recorded as libdsgap records paths: no directory of this machine
    model = os.path.relpath(model) if model.startswith(os.getcwd() + os.sep) else os.path.basename(model)
    settings = dict(weights=model, text=a.prompt_embeds or a.prompt)
    if a.negative_embeds or a.negative_prompt:
        settings["negative"] = a.negative_embeds or a.negative_prompt
    try:
        run(pipe, a.out, policies=[p for p in a.policies.split(",") if p], densities=dens, schedule=a.schedule,
            call=call, seed=a.seed, transformer=a.transformer, settings=settings, quiet=a.quiet)
    except DsgapError as e:
        print(f"dsgap.generate: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

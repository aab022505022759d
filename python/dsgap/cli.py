"""cli.py: dsgap-capture, a diffusers pipeline directory run once with its transformer's attention
captured into a dsgap trace (docs/spec.md §6). Nothing is downloaded: the directory must hold the
pipeline (model_index.json and its components), e.g. a snapshot you fetched yourself.

  dsgap-capture MODEL_DIR --prompt "a cat" --out trace.h5 --steps 50 --height 480 --width 832 \\
      --frames 81 --capture-steps 0,25,49 --layers 0-29:3 --heads 0,1 --device cuda
"""
import argparse
import inspect
import os
import sys
import time

from . import trace as _trace


def index_list(s):
    """'0,5,9', '0-3', '0-29:3' (every third) -> sorted list; None for 'all'"""
    if s is None or s == "all":
        return None
    out = set()
    for part in s.split(","):
        part = part.strip()
        step = 1
        if ":" in part:
            part, st = part.split(":")
            step = int(st)
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1, step))
        else:
            out.add(int(part))
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"bad index list '{s}' (e.g. 0,5,9 or 0-3 or 0-29:3)")
    return sorted(out)


def parser():
    p = argparse.ArgumentParser(prog="dsgap-capture", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a diffusers pipeline directory (model_index.json), loaded offline")
    p.add_argument("--out", "-o", required=True, help="the trace to write")
    p.add_argument("--prompt", help="the prompt (needs the pipeline's text encoder)")
    p.add_argument("--prompt-embeds", help="precomputed text embeddings instead: a .safetensors or .pt file "
                   "(tensor [tokens, dim] or [1, tokens, dim]; NAME selects one: FILE:NAME)")
    p.add_argument("--negative-prompt", default=None)
    p.add_argument("--steps", type=int, default=50, help="denoising steps (default 50)")
    p.add_argument("--height", type=int)
    p.add_argument("--width", type=int)
    p.add_argument("--frames", type=int, help="video frames (video pipelines)")
    p.add_argument("--guidance", type=float, help="guidance scale (pipeline default if not given)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--capture-steps", type=index_list, default=None, help="steps to record (default all)")
    p.add_argument("--layers", type=index_list, default=None, help="attention layers to record (default all)")
    p.add_argument("--heads", type=index_list, default=None, help="heads to record (default all)")
    p.add_argument("--branch", default="cond", help="cond (default), uncond, or a batch index")
    p.add_argument("--trace-dtype", choices=("bf16", "float32"), default="bf16")
    p.add_argument("--compression", choices=_trace.COMPRESSIONS, default=_trace.DEFAULT_COMPRESSION,
                   help="none (default: chunks as they are, the fastest writer) or deflate (the C writer's "
                        "shuffle + deflate 1: about 0.7x the size, about 27 MB/s a core)")
    p.add_argument("--device", default=None, help="cuda or cpu (default cuda when available)")
    p.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default=None,
                   help="the model's dtype (default bfloat16 on cuda, float32 on cpu)")
    p.add_argument("--transformer", default="transformer",
                   help="the pipeline component to capture (with its expert NAME_2 where the pipeline has one, "
                        "as Wan2.2 A14B: both in one trace)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def load_embeds(spec, torch):
    path, _, name = spec.partition(":") if not os.path.exists(spec) else (spec, "", "")
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file
        d = load_file(path)
        if not name and len(d) != 1:
            raise SystemExit(f"dsgap-capture: {path} holds {len(d)} tensors (name one: FILE:NAME)")
        t = d[name] if name else next(iter(d.values()))
    else:
        t = torch.load(path, map_location="cpu")
    return t if t.dim() == 3 else t.unsqueeze(0)


def main(argv=None):
    a = parser().parse_args(argv)
    if not os.path.isfile(os.path.join(a.model, "model_index.json")):
        print(f"dsgap-capture: {a.model} is not a diffusers pipeline directory (no model_index.json)", file=sys.stderr)
        return 2
    if not a.prompt and not a.prompt_embeds:
        print("dsgap-capture: give --prompt or --prompt-embeds", file=sys.stderr)
        return 2
    import torch
    try:
        import diffusers
    except ImportError:
        print("dsgap-capture: needs diffusers (pip install diffusers)", file=sys.stderr)
        return 2
    import dsgap
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = getattr(torch, a.dtype or ("bfloat16" if device == "cuda" else "float32"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    load = dict(local_files_only=True)
    if dtype != torch.float32:  # (float32 is the default; naming it trips models that keep fp32 modules)
        load["torch_dtype"] = dtype
    pipe = diffusers.DiffusionPipeline.from_pretrained(a.model, **load)
    pipe.to(device)
    module = getattr(pipe, a.transformer, None)
    if module is None:
        print(f"dsgap-capture: the pipeline has no component '{a.transformer}'", file=sys.stderr)
        return 2
    second = getattr(pipe, a.transformer + "_2", None)   # Wan2.2 A14B's low-noise expert: one loop, one trace
    if isinstance(second, torch.nn.Module):
        module = [module, second]
    params = inspect.signature(pipe.__call__).parameters
    kw = dict(num_inference_steps=a.steps, output_type="latent",
              generator=torch.Generator(device="cpu").manual_seed(a.seed))
    for k, v in (("height", a.height), ("width", a.width), ("num_frames", a.frames), ("guidance_scale", a.guidance),
                 ("negative_prompt", a.negative_prompt)):
        if v is not None:
            if k not in params:
                print(f"dsgap-capture: {type(pipe).__name__} takes no {k}", file=sys.stderr)
                return 2
            kw[k] = v
    if a.prompt_embeds:
        kw["prompt_embeds"] = load_embeds(a.prompt_embeds, torch).to(device, dtype)
    else:
        kw["prompt"] = a.prompt
    kw = {k: v for k, v in kw.items() if k in params}
    branch = int(a.branch) if a.branch.isdigit() else a.branch
    cfg = {"run": {"pipeline": type(pipe).__name__, "steps": a.steps, "height": a.height, "width": a.width,
                   "frames": a.frames, "guidance": a.guidance, "seed": a.seed, "prompt": a.prompt,
                   "dtype": str(dtype).replace("torch.", ""), "device": device}}
    t0 = time.time()
    try:
        with dsgap.capture(module, a.out, steps=a.capture_steps, layers=a.layers, heads=a.heads, branch=branch,
                           scheduler=pipe.scheduler, total_steps=a.steps, progress=not a.quiet,
                           source=os.path.abspath(a.model), config=cfg, dtype=a.trace_dtype,
                           compression=a.compression):
            pipe(**kw)
    except (dsgap.CaptureError, dsgap.TraceError) as e:
        print(str(e), file=sys.stderr)
        return 1
    if not a.quiet:
        print(f"dsgap-capture: wrote {a.out} ({os.path.getsize(a.out) / 1e6:.1f} MB) in {time.time() - t0:.1f} s",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

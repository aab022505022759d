"""test_generate.py: python -m dsgap.generate, the closed loop through a diffusers pipeline (CPU).

  python test_generate.py WAN_MODELS WORKDIR    (DSGAP: the dsgap binary; WAN_MODELS: the wan_models
                                                 fixture, for `dsgap generate`'s own output)

A tiny flow-matching video pipeline (a random WanTransformer3DModel, 2 x 32 x 32 latents = 512 tokens,
FlowMatchEulerDiscreteScheduler, sequential CFG, a tiny "VAE": a fixed 1x1 mix of the channels into
RGB, upsampled 2x) run dense and with mc-sparse at densities 1 and 0.25 from one seed:
  1. generate.csv: the header of `dsgap generate`, dense first (psnr inf, ssim 1, density 1,
     speedup 1), mc-sparse at 1 = dense (psnr > 90 dB), at 0.25 sparse (density < 0.9, finite psnr,
     ssim < 1); latents files per run; frames/ per run and frames.csv (the pipeline has a VAE);
  2. the schema: `dsgap generate` (the C engine, tests/fixtures/wan) run here: the same CSV header, and
     every key of its generate.json (top level, schedule, runs) in ours with the same kind of value
     (number, string, list, object; ours may be null where PyTorch does not measure it);
  3. the fidelity functions: psnr/ssim recomputed by dsgap.generate.summarise from the C run's
     latents files equal the C run's generate.csv;
  4. `dsgap sheet` accepts the frames files (a contact sheet with PSNR labels);
  5. the command line on a saved pipeline directory (no VAE): python -m dsgap.generate runs offline.
"""
import csv
import json
import math
import os
import subprocess
import sys

import h5py
import numpy as np
import torch

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
import dsgap.generate as gen  # noqa: E402
from pyhelp import Checker, randomize  # noqa: E402

torch.set_grad_enabled(False)
ck = Checker("generate")
FIX = os.path.join(SRC, "tests", "fixtures", "wan")
import diffusers as Dif  # noqa: E402


class TinyVAE(torch.nn.Module):
    def __init__(self, ch=4):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.mix = torch.nn.Parameter(torch.randn(3, ch, generator=g) * 0.5, requires_grad=False)

    def decode(self, z):   # (B, C, F, H, W) -> (B, F, 3, 2H, 2W) in [0, 1]
        x = torch.einsum("rc,bcfhw->bfrhw", self.mix, z)
        x = x.repeat_interleave(2, -1).repeat_interleave(2, -2)
        return torch.tanh(x) * 0.5 + 0.5


class Output:   # as diffusers' video pipelines return: .frames
    def __init__(self, frames):
        self.frames = frames


class TinyVideoPipeline(Dif.DiffusionPipeline):
    def __init__(self, transformer, scheduler, vae=None):
        super().__init__()
        self.register_modules(transformer=transformer, scheduler=scheduler)
        self.vae = vae

    def __call__(self, prompt_embeds=None, negative_prompt_embeds=None, num_inference_steps=3, height=16, width=16,
                 num_frames=5, guidance_scale=2.0, generator=None, output_type="latent", callback_on_step_end=None,
                 callback_on_step_end_tensor_inputs=("latents",)):
        x = torch.randn(1, 4, (num_frames - 1) // 4 + 1, height // 8, width // 8, generator=generator)
        neg = negative_prompt_embeds if negative_prompt_embeds is not None else -prompt_embeds
        self.scheduler.set_timesteps(num_inference_steps)
        for i, t in enumerate(self.scheduler.timesteps):
            tt = t.expand(1)
            c = self.transformer(hidden_states=x, timestep=tt, encoder_hidden_states=prompt_embeds)[0]
            u = self.transformer(hidden_states=x, timestep=tt, encoder_hidden_states=neg)[0]
            x = self.scheduler.step(u + guidance_scale * (c - u), t, x)[0]
            if callback_on_step_end is not None:
                callback_on_step_end(self, i, t, {"latents": x})
        if output_type == "latent" or getattr(self, "vae", None) is None:
            return x
        return Output(self.vae.decode(x))


def tiny_wan(layers=2):
    torch.manual_seed(0)
    m = Dif.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                  out_channels=4, text_dim=24, freq_dim=16, ffn_dim=32, num_layers=layers)
    randomize(m)
    return m.eval()


def kind(v):
    return "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else type(v).__name__


# keys of the C engine's own machinery, which a diffusers pipeline does not have (issue 21: the
# checkpoint loader's figures, --cache-offload's copies, each step's transformer seconds)
C_ONLY = {"weight_files", "load_s", "load_bytes", "bf16_direct", "cache_offload", "step_s", "offload_up_bytes",
          "offload_down_bytes", "offload_copy_s", "offload_wait_s", "offload_pin_s",
          "offload_pin_ahead_bytes", "offload_pin_ahead_s"}


def schema(cj, pj, where, bad):
    for k, v in cj.items():
        if k in C_ONLY:
            continue
        if k not in pj:
            bad.append(f"{where}{k} missing")
        elif pj[k] is not None and kind(pj[k]) != kind(v):
            bad.append(f"{where}{k}: {kind(pj[k])}, the C engine's {kind(v)}")
        elif isinstance(v, dict) and k != "config" and isinstance(pj[k], dict):
            schema(v, pj[k], where + k + ".", bad)


def main():
    models, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    dsg = os.environ["DSGAP"]
    emb = torch.randn(1, 5, 24, generator=torch.Generator().manual_seed(1))
    pipe = TinyVideoPipeline(tiny_wan(), Dif.FlowMatchEulerDiscreteScheduler(shift=3.0), TinyVAE())
    out = os.path.join(work, "G")
    call = dict(prompt_embeds=emb, num_inference_steps=4, height=256, width=256, num_frames=5, guidance_scale=3.0)
    rows = gen.run(pipe, out, policies=["mc-sparse"], densities=[1.0, 0.25], schedule="warmup=1", call=call, seed=7,
                   settings={"text": "random"}, quiet=True)
    lines = open(os.path.join(out, "generate.csv")).read().splitlines()
    r = {(x["policy"], x["density_target"]): x for x in csv.DictReader(lines)}
    ck.check("generate.csv: the header of dsgap generate and 3 runs, dense first",
             lines[0] == gen.HEADER and len(lines) == 4 and lines[1].startswith("dense,1,"), lines[:2])
    d, full, sp = r.get(("dense", "1"), {}), r.get(("mc-sparse", "1"), {}), r.get(("mc-sparse", "0.25"), {})
    ok = d and full and sp
    ck.check("dense: psnr inf, ssim 1, density 1, speedup 1", ok and math.isinf(float(d["psnr"])) and
             float(d["ssim"]) == 1 and float(d["density"]) == 1 and float(d["speedup"]) == 1, d)
    ck.check("mc-sparse at density 1 reproduces dense (psnr > 90 dB)", ok and float(full["psnr"]) > 90 and
             float(full["ssim"]) > 0.99999, full)
    ck.check("mc-sparse at 0.25 is sparse and differs (density < 0.9, finite psnr, ssim < 1)",
             ok and float(sp["density"]) < 0.9 and 0 < float(sp["psnr"]) < 90 and float(sp["ssim"]) < 1, sp)
    files = ["dense.h5", "mc-sparse@1.h5", "mc-sparse@0.25.h5"]
    have = all(os.path.exists(os.path.join(out, f)) and os.path.exists(os.path.join(out, "frames", f)) for f in files)
    ck.check("latents and frames files per run, frames.csv; nothing temporary left", have and
             os.path.exists(os.path.join(out, "frames.csv")) and not any(".tmp" in f for f in os.listdir(out)),
             sorted(os.listdir(out)))
    if have:
        with h5py.File(os.path.join(out, "dense.h5")) as f:
            lat = f["latents"]
            ck.check("latents file: /latents (C, F, H, W) float32, format dsgap-latents, policy attributes",
                     lat.shape == (4, 2, 32, 32) and lat.dtype == np.float32 and f.attrs["format"] == "dsgap-latents"
                     and lat.attrs["policy"] == "dense", (lat.shape, dict(f.attrs)))
        with h5py.File(os.path.join(out, "frames", "dense.h5")) as f:
            ck.check("frames file: (3, F, 2H, 2W) RGB in [-1, 1]", f["latents"].shape == (3, 2, 64, 64) and
                     np.abs(f["latents"][:]).max() <= 1, f["latents"].shape)
    fr = {(x["policy"], x["density_target"]): x for x in csv.DictReader(open(os.path.join(out, "frames.csv")))}
    ck.check("frames.csv: fidelity on the decoded frames, 0.25 below 1", math.isinf(float(fr[("dense", "1")]["psnr"]))
             and float(fr[("mc-sparse", "0.25")]["psnr"]) < 90, fr.get(("mc-sparse", "0.25")))
    pj = json.load(open(os.path.join(out, "generate.json")))
    ck.check("generate.json: format dsgap-generate, 3 runs, the schedule, the token grid", pj["format"] == "dsgap-generate"
             and len(pj["runs"]) == 3 and pj["schedule"] == {"warmup": 1, "anchor": 0, "dense_layers": []} and
             pj["grid"] == [2, 16, 16], {k: pj[k] for k in ("schedule", "grid", "latent")})

    # --- the C engine's dsgap generate: its schema and its fidelity numbers --------------------------
    cg = os.path.join(work, "C")
    rc = subprocess.run([dsg, "generate", "--model", os.path.join(models, "orig_hd64"), "--text",
                         os.path.join(FIX, "text.safetensors"), "--latent", "4x16x24", "--seed", "3", "--steps", "3",
                         "--shift", "3", "--guidance", "2", "--policies", "dense,mc-sparse", "--density", "0.3",
                         "--schedule", "warmup=1", "--quiet", "--out", cg], capture_output=True, text=True)
    if ck.check("dsgap generate (the C engine) runs", rc.returncode == 0, rc.stderr.strip()):
        clines = open(os.path.join(cg, "generate.csv")).read().splitlines()
        ck.check("the same generate.csv header as dsgap generate", clines[0] == lines[0], clines[0])
        cj = json.load(open(os.path.join(cg, "generate.json")))
        bad = []
        schema({k: v for k, v in cj.items() if k != "runs"}, pj, "", bad)
        for run in pj["runs"]:
            schema(cj["runs"][0], run, f"runs[{run['policy']}@{run['density_target']}].", bad)
        ck.check("every key of dsgap generate's generate.json in ours, the same kind of value", not bad, "; ".join(bad))
        crow = list(csv.DictReader(clines))[1]
        with h5py.File(os.path.join(cg, "dense.h5")) as a, h5py.File(os.path.join(cg, "mc-sparse@0.3.h5")) as b:
            s = gen.summarise(a["latents"][:], b["latents"][:])
        err = max(abs(s[k] - float(crow[k])) / abs(float(crow[k])) for k in ("psnr", "ssim", "psnr_min", "ssim_min"))
        ck.check("psnr/ssim of dsgap.generate on the C run's latents = the C run's generate.csv", err < 1e-5,
                 f"{s} vs {crow}")

    # --- dsgap sheet on the frames -------------------------------------------------------------------
    sheet = os.path.join(work, "sheet", "s")
    rc = subprocess.run([dsg, "sheet", "--out", sheet, "--scale", "1", f"dense=" + os.path.join(out, "frames", "dense.h5"),
                         "mc-sparse 0.25=" + os.path.join(out, "frames", "mc-sparse@0.25.h5")],
                        capture_output=True, text=True)
    ck.check("dsgap sheet accepts the frames files", rc.returncode == 0 and os.path.exists(sheet + ".png"),
             rc.stderr.strip()[-500:])

    # --- the command line on a pipeline directory --------------------------------------------------
    from safetensors.torch import save_file
    pdir = os.path.join(work, "pipe")
    Dif.TinyVideoPipeline = TinyVideoPipeline
    TinyVideoPipeline(tiny_wan(1), Dif.FlowMatchEulerDiscreteScheduler(shift=3.0)).save_pretrained(pdir)
    save_file({"text": emb[0].contiguous()}, os.path.join(work, "emb.safetensors"))
    # the pipeline class is found through the diffusers namespace: run it from a script that registers it
    script = (f"import sys; sys.path[:0] = [{os.path.join(SRC, 'python')!r}, {HERE!r}]; import diffusers; "
              f"import test_generate as t; diffusers.TinyVideoPipeline = t.TinyVideoPipeline; "
              f"import dsgap.generate as g; sys.exit(g.main(sys.argv[1:]))")
    o2 = os.path.join(work, "G2")
    rc = subprocess.run([sys.executable, "-c", script, pdir, "--prompt-embeds", os.path.join(work, "emb.safetensors"),
                         "--out", o2, "--steps", "3", "--height", "128", "--width", "128", "--frames", "5",
                         "--guidance", "2", "--policies", "mc-sparse,oracle-tile", "--density", "0.5",
                         "--device", "cpu", "--quiet"], capture_output=True, text=True)
    ok = rc.returncode == 0 and os.path.exists(os.path.join(o2, "generate.csv"))
    ck.check("python -m dsgap.generate on a pipeline directory", ok, rc.stderr.strip()[-1000:])
    if ok:
        rows = list(csv.DictReader(open(os.path.join(o2, "generate.csv"))))
        ck.check("command line: dense, mc-sparse@0.5 and oracle-tile@0.5 rows; no frames without a VAE",
                 [x["policy"] for x in rows] == ["dense", "mc-sparse", "oracle-tile"] and
                 not os.path.exists(os.path.join(o2, "frames")), rows)
    rc = subprocess.run([sys.executable, "-c", script, work, "--prompt", "x", "--out", o2], capture_output=True, text=True)
    ck.check("a directory without model_index.json is a one-line error", rc.returncode == 2 and
             "model_index.json" in rc.stderr, rc.stderr)
    return ck.done()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""train.py: train the bundled Wan2.1-architecture video DiT with rectified flow (data/README.md).

The model is exactly the engine's (wan_torch.py: original Wan names and math): pixel space, in/out
channels 3, patch (1, 2, 2), head_dim 128; conditioning through the text path with one short learned
embedding per class ([text_tokens, text_dim], text_len = text_tokens so the engine pads nothing).

Rectified flow in the engine's convention (src/sampler.c, reference §1.7):
  x_sigma = (1 - sigma) x0 + sigma noise,  target v = noise - x0,  timestep t = 1000 sigma,
  sigma = shift(u) = s u / (1 + (s - 1) u), u ~ logit-normal(0, 1) (--train-shift s).
Classifier-free guidance: with probability --cond-drop the context is all zeros, which is the
engine's default negative (zero embeddings padded to text_len).

  train.py --data clips.npz [--out data/model] [--minutes 18] [--dim 256 --layers 8 --heads 2]
           [--res 64,32] [--batch 16] [--lr 5e-4] [--device cuda]

Writes into --out: diffusion_pytorch_model.safetensors (EMA weights, matrices BF16, vectors and
modulation F32; original Wan keys, nothing else), config.json, conds.safetensors (one tensor per
class name, [text_tokens, text_dim] F32, plus "null": zeros), train.json (hyperparameters, data,
timings, losses), loss.dat + loss.gp (-> loss.png, loss.pdf when gnuplot is installed).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wan_files import write_safetensors  # noqa: E402
from wan_torch import WanModel, save_model  # noqa: E402


def parse():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="clips .npz of make_clips.py")
    ap.add_argument("--out", default=os.path.join(here, "model"))
    ap.add_argument("--minutes", type=float, default=18.0, help="training time budget (wall clock, excl. saving)")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: time only)")
    ap.add_argument("--state", default=None, help="resumable training state (.pt): loaded when it exists, "
                    "written when this call stops (device calls are limited to 10 minutes)")
    ap.add_argument("--call-minutes", type=float, default=0, help="stop this call after so many minutes of "
                    "training (0: run the whole budget); with --state the next call resumes")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--freq-dim", type=int, default=256)
    ap.add_argument("--text-dim", type=int, default=64)
    ap.add_argument("--text-tokens", type=int, default=4, help="tokens per class embedding (= text_len)")
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--res", default="64,32", help="training resolutions (clips are area-downsampled), "
                    "one chosen per step with --res-prob")
    ap.add_argument("--res-prob", default="0.75,0.25")
    ap.add_argument("--save-every", type=float, default=5.0, help="minutes between checkpoints of the EMA weights")
    ap.add_argument("--batch", type=int, default=12, help="clips per step at the first resolution "
                    "(other resolutions: the same token count)")
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=300, help="linear warm-up steps, then cosine to 10%% over the budget")
    ap.add_argument("--ema", type=float, default=0.999)
    ap.add_argument("--clip-grad", type=float, default=1.0)
    ap.add_argument("--train-shift", type=float, default=3.0)
    ap.add_argument("--cond-drop", type=float, default=0.1)
    ap.add_argument("--val", type=int, default=32, help="held-out clips for the validation loss")
    ap.add_argument("--eval-every", type=float, default=60.0, help="seconds between validation losses")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--bf16", type=int, default=-1, help="bf16 autocast (default: on for cuda)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--save-dtype", default="BF16", choices=["BF16", "F32"])
    ap.add_argument("--threads", type=int, default=0)
    return ap.parse_args()


def load_clips(path, frames):
    z = np.load(path, allow_pickle=False)
    clips = z["clips"][:, :frames]  # (N, F, S, S, 3) uint8
    return clips, z["labels"].astype(np.int64), [str(s) for s in z["class_names"]]


def to_model_input(u8, res):
    """(B, F, S, S, 3) uint8 on the device -> (B, 3, F, res, res) in [-1, 1], area-downsampled"""
    x = u8.permute(0, 4, 1, 2, 3).float() / 127.5 - 1
    S = x.shape[-1]
    if res != S:
        B, C, Fr = x.shape[:3]
        x = F.avg_pool2d(x.reshape(B * C * Fr, 1, S, S), S // res).reshape(B, C, Fr, res, res)
    return x


def sample_sigma(n, shift, gen, device):
    u = torch.sigmoid(torch.randn(n, generator=gen, device=device))
    return shift * u / (1 + (shift - 1) * u)


def write_plot(out, log_rows, val_rows, title):
    dat = os.path.join(out, "loss.dat")
    with open(dat, "w") as f:
        f.write("# step  minutes  loss  loss_smoothed  lr  res\n")
        for r in log_rows:
            f.write("%d %.4f %.6f %.6f %.3e %d\n" % r)
        f.write("\n\n# step  minutes  val_loss\n")
        for r in val_rows:
            f.write("%d %.4f %.6f\n" % r)
    gp = os.path.join(out, "loss.gp")
    style = os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "analysis", "style.gp"),
                            os.path.abspath(out))  # gnuplot runs in the model folder
    with open(gp, "w") as f:
        f.write("""# loss.gp: training loss of the bundled model (gnuplot loss.gp -> loss.png, loss.pdf)
if (system("test -f %(style)s && echo 1") eq "1") load "%(style)s"
set xlabel "step"
set ylabel "rectified-flow loss (MSE of v)"
set logscale y
set title "%(title)s" font ",10"
set key top right
do for [fmt in "png pdf"] {
  if (fmt eq "png") { set terminal pngcairo size 900,540 font "Sans,10" } else { set terminal pdfcairo size 6in,3.6in font "Sans,9" }
  set output "loss.".fmt
  plot "loss.dat" index 0 using 1:3 with lines lc rgb "#c8c8c8" lw 0.6 title "loss per step", \\
       "" index 0 using 1:4 with lines ls 1 title "smoothed (EMA 0.98)", \\
       "" index 1 using 1:3 with linespoints ls 2 title "held-out clips (fixed noise, sigma)"
  set output
}
""" % {"style": os.path.relpath(style, out), "title": title})
    if shutil.which("gnuplot"):
        r = subprocess.run(["gnuplot", "loss.gp"], cwd=out, capture_output=True, text=True)
        if r.returncode:
            print("gnuplot failed:", r.stderr.strip()[:400])


def main():
    a = parse()
    t_start = time.time()
    torch.manual_seed(a.seed)
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    bf16 = (a.bf16 == 1) or (a.bf16 == -1 and dev.type == "cuda")
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    clips, labels, classes = load_clips(a.data, a.frames)
    S = clips.shape[2]
    res = [int(r) for r in a.res.split(",")]
    res_p = np.array([float(p) for p in a.res_prob.split(",")][:len(res)])
    res_p = res_p / res_p.sum()
    for r in res:
        assert S % r == 0 and r % 2 == 0, "resolution %d must divide the clip size %d" % (r, S)
    rng = np.random.default_rng(a.seed)
    perm = rng.permutation(len(clips))
    val_idx, tr_idx = perm[:a.val], perm[a.val:]
    data = torch.from_numpy(clips).to(dev)  # uint8 on the device (6000 clips: 1.2 GB)
    lab = torch.from_numpy(labels).to(dev)
    K = len(classes)
    cfg = {"dim": a.dim, "ffn_dim": a.ffn, "freq_dim": a.freq_dim, "text_dim": a.text_dim, "in_dim": 3,
           "out_dim": 3, "num_heads": a.heads, "num_layers": a.layers, "text_len": a.text_tokens, "eps": 1e-6,
           "patch_size": [1, 2, 2]}
    assert a.dim // a.heads == 128, "head_dim must be 128 (dim = 128 x heads)"
    model = WanModel(cfg).to(dev)
    cond = torch.nn.Parameter(torch.randn(K, a.text_tokens, a.text_dim, device=dev))
    ema = {k: v.detach().clone().float() for k, v in model.state_dict().items()}
    ema_cond = cond.detach().clone()
    n_params = sum(p.numel() for p in model.parameters())
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.ndim >= 2 and not n.endswith("modulation") else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0},
                             {"params": [cond], "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.99), eps=1e-8,
                            fused=dev.type == "cuda")
    fwd = torch.compile(model) if a.compile else model
    print("model: %d layers, dim %d, %d heads x 128, ffn %d, %.2fM parameters; %d classes x [%d, %d] "
          "embeddings; data %s: %d train + %d val clips of %dx%dx%d; res %s (p %s), batch %d; device %s%s" % (
              a.layers, a.dim, a.heads, a.ffn, n_params / 1e6, K, a.text_tokens, a.text_dim, a.data, len(tr_idx),
              len(val_idx), clips.shape[1], S, S, res, res_p.round(2).tolist(), a.batch, dev, ", bf16 autocast" if bf16 else ""),
          flush=True)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed + 1)
    # fixed validation inputs: noise and sigma per held-out clip, at the first resolution
    vgen = torch.Generator(device=dev)
    vgen.manual_seed(12345)
    vx0 = to_model_input(data[torch.from_numpy(val_idx).to(dev)], res[0]) if len(val_idx) else None
    if vx0 is not None:
        vnoise = torch.randn(vx0.shape, generator=vgen, device=dev)
        vsig = (torch.arange(len(val_idx), device=dev) + 0.5) / len(val_idx)  # spread over (0, 1)
        vlab = lab[torch.from_numpy(val_idx).to(dev)]

    def loss_fn(m, x0, y, noise, sig, drop):
        ctx = cond[y] * (~drop).float()[:, None, None]
        s = sig[:, None, None, None, None]
        xt = (1 - s) * x0 + s * noise
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            v = m(xt, sig * 1000, ctx)
        return F.mse_loss(v.float(), noise - x0)

    def validate():
        if vx0 is None:
            return float("nan")
        model.eval()
        tot = 0.0
        with torch.no_grad():
            for i in range(0, len(val_idx), a.batch):
                sl = slice(i, i + a.batch)
                n = vx0[sl].shape[0]
                tot += loss_fn(fwd, vx0[sl], vlab[sl], vnoise[sl], vsig[sl],
                               torch.zeros(n, dtype=torch.bool, device=dev)).item() * n
        model.train()
        return tot / len(val_idx)

    classes_ = classes

    def save_all(tag):
        """the EMA weights (model + class embeddings) into a.out, without touching the live model"""
        live = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict({k: v.to(live[k].dtype) for k, v in ema.items()})
        nb = save_model(model, a.out, a.save_dtype)
        model.load_state_dict(live)
        conds = [(c, "F32", ema_cond[i].float().cpu().numpy()) for i, c in enumerate(classes_)]
        conds.append(("null", "F32", np.zeros((a.text_tokens, a.text_dim), np.float32)))
        write_safetensors(os.path.join(a.out, "conds.safetensors"), conds)
        print("saved %s weights to %s" % (tag, a.out), flush=True)
        return nb

    os.makedirs(a.out, exist_ok=True)
    budget = a.minutes * 60
    last_save = time.time()
    log_rows, val_rows = [], []
    smooth, step, last_eval, prior = None, 0, -1e9, 0.0
    if a.state and os.path.exists(a.state):
        st = torch.load(a.state, map_location=dev, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        with torch.no_grad():
            cond.copy_(st["cond"])
            ema_cond.copy_(st["ema_cond"])
        ema = st["ema"]
        log_rows, val_rows, smooth, step, prior = st["log_rows"], st["val_rows"], st["smooth"], st["step"], st["elapsed"]
        rng = st["rng"]
        gen.set_state(st["gen"].cpu() if hasattr(st["gen"], "cpu") else st["gen"])
        a.batch = st.get("batch", a.batch)
        print("resumed %s: step %d, %.1f of %.1f min done" % (a.state, step, prior / 60, a.minutes), flush=True)
    t0 = time.time() - prior  # elapsed training time counts across calls
    t_call = time.time()
    tr = torch.from_numpy(tr_idx).to(dev)
    while True:
        el = time.time() - t0
        if el >= budget or (a.max_steps and step >= a.max_steps):
            break
        if a.call_minutes and time.time() - t_call >= a.call_minutes * 60:
            break
        if el - last_eval >= a.eval_every:
            vl = validate()
            val_rows.append((step, el / 60, vl))
            last_eval = el
            print("step %6d  %5.1f min  val %.4f" % (step, el / 60, vl), flush=True)
        frac = el / budget
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        for g in opt.param_groups:
            g["lr"] = lr
        r = res[int(rng.choice(len(res), p=res_p))]
        B = max(1, a.batch * (res[0] // r) ** 2)
        idx = tr[torch.randint(len(tr), (B,), generator=gen, device=dev)]
        x0 = to_model_input(data[idx], r)
        y = lab[idx]
        noise = torch.randn(x0.shape, generator=gen, device=dev)
        sig = sample_sigma(B, a.train_shift, gen, dev)
        drop = torch.rand(B, generator=gen, device=dev) < a.cond_drop
        try:
            loss = loss_fn(fwd, x0, y, noise, sig, drop)
            opt.zero_grad(set_to_none=True)
            loss.backward()
        except torch.cuda.OutOfMemoryError:
            if step > 20 or a.batch == 1:
                raise
            opt.zero_grad(set_to_none=True)
            loss = None
            torch.cuda.empty_cache()
            a.batch //= 2
            print("out of memory at batch %d: batch %d from now on" % (B, a.batch), flush=True)
            continue
        torch.nn.utils.clip_grad_norm_(list(model.parameters()) + [cond], a.clip_grad)
        opt.step()
        d = min(a.ema, (1 + step) / (10 + step))
        with torch.no_grad():
            for k, v in model.state_dict().items():
                ema[k].mul_(d).add_(v.float(), alpha=1 - d)
            ema_cond.mul_(d).add_(cond.detach(), alpha=1 - d)
        step += 1
        if time.time() - last_save >= a.save_every * 60:
            save_all("checkpoint (EMA, step %d)" % step)
            last_save = time.time()
        if step % a.log_every == 0 or step == 1:
            lv = loss.item()
            smooth = lv if smooth is None else 0.98 ** a.log_every * smooth + (1 - 0.98 ** a.log_every) * lv
            log_rows.append((step, (time.time() - t0) / 60, lv, smooth, lr, r))
            if step % (a.log_every * 20) == 0 or step == 1:
                print("step %6d  %5.1f min  loss %.4f (smoothed %.4f)  lr %.2e  res %d  %.2f steps/s" % (
                    step, (time.time() - t0) / 60, lv, smooth, lr, r, step / (time.time() - t0)), flush=True)
    train_s = time.time() - t0
    complete = train_s >= budget or bool(a.max_steps and step >= a.max_steps)
    if a.state:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "cond": cond.detach(), "ema": ema,
                    "ema_cond": ema_cond, "log_rows": log_rows, "val_rows": val_rows, "smooth": smooth, "step": step,
                    "elapsed": train_s, "rng": rng, "gen": gen.get_state(), "batch": a.batch}, a.state + ".tmp")
        os.replace(a.state + ".tmp", a.state)
        print("state saved to %s (%s)" % (a.state, "budget spent" if complete else "RESUME: run the same command again"),
              flush=True)
    # final validation with the EMA weights
    live = {k: v.detach().clone() for k, v in model.state_dict().items()}
    vl_live = validate()
    model.load_state_dict({k: v.to(live[k].dtype) for k, v in ema.items()})
    cond_live = cond.detach().clone()
    with torch.no_grad():
        cond.copy_(ema_cond)
    vl_ema = validate()
    val_rows.append((step, train_s / 60, vl_ema))
    print("done: %d steps in %.1f min; val loss %.4f (live) %.4f (EMA, saved)" % (step, train_s / 60, vl_live, vl_ema))
    model.load_state_dict(live)
    with torch.no_grad():
        cond.copy_(cond_live)
    nbytes = save_all("final EMA")
    write_plot(a.out, log_rows, val_rows, "Wan2.1-architecture pixel DiT, %d layers x %d heads x 128, %.1fM params: "
               "%d steps, %.1f min" % (a.layers, a.heads, n_params / 1e6, step, train_s / 60))
    info = {"config": cfg, "params": n_params, "classes": classes, "args": vars(a), "steps": step,
            "train_minutes": train_s / 60, "total_minutes": (time.time() - t_start) / 60,
            "complete": complete, "final_loss_smoothed": smooth, "val_loss_live": vl_live, "val_loss_ema": vl_ema,
            "val_rows": val_rows, "data": {"file": os.path.basename(a.data), "clips": len(clips),
                                           "train": len(tr_idx), "val": len(val_idx),
                                           "per_class": np.bincount(labels, minlength=K).tolist()},
            "weights_bytes": nbytes, "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
            "torch": torch.__version__,
            "sampling_hint": "dsgap generate --model DIR --text DIR/conds.safetensors:CLASS --latent 16x64x64 "
                             "--shift %g --guidance 3" % a.train_shift}
    with open(os.path.join(a.out, "train.json"), "w") as f:
        json.dump(info, f, indent=1)
    total = sum(os.path.getsize(os.path.join(a.out, n)) for n in os.listdir(a.out))
    print("wrote %s: weights %.1f MB, folder %.1f MB; %s" % (a.out, nbytes / 2 ** 20, total / 2 ** 20,
          "TRAINING COMPLETE" if complete else "budget left: %.1f min, run again to resume" % ((budget - train_s) / 60)))


if __name__ == "__main__":
    main()

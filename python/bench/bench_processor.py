"""bench_processor.py: the processor's performance targets (issue 22) on a GPU machine with torch and
diffusers: dsgap.torch.attention (libdsgap in every self-/joint-attention call) against diffusers'
own attention (torch SDPA), random weights, bf16.

  python python/bench/bench_processor.py [--out DIR] [--parts overhead,hunyuan,wan] [--steps 50]
                                         [--hy-layers 2,2] [--hy-steps 4] [--tiny]

  wan       Wan2.1-1.3B architecture (WanTransformer3DModel), 480p x 81 (latent 16 x 21 x 60 x 104,
            32760 tokens), 50 steps of flow-matching Euler with sequential CFG 5 (two calls a step,
            the conditional first) from the same noise and text: diffusers' dense, then mc-sparse
            rho 0.15 with the paper's schedule (warmup=10,anchors=9,dense_layers=0: 10 dense steps,
            the anchor at step 9, layer 0 dense); speedup, PSNR/SSIM of the final latents
            (dsgap.generate.summarise, src/dit/fidelity.c's definition), where the time goes; then
            mc-sparse again with its plain dense sites on libdsgap's dense kernel (dense_sites="dsgap")
            instead of torch's SDPA: its speedup and PSNR.
  hunyuan   HunyuanVideo architecture (HunyuanVideoTransformer3DModel at full width, 24 heads x 128,
            --hy-layers double,single blocks), 720p x 129 frames (latent 16 x 33 x 90 x 160: 118,800
            video tokens + 256 text tokens, joint attention), --hy-steps steps (guidance-distilled:
            one call a step): diffusers' dense, dsgap "dense", mc-sparse rho 0.15 with
            warmup=1 (step 0 dense and the anchor); per-step times and speedups. A policy libdsgap
            refuses (e.g. out of device memory) is reported with its message, and fails the run.
  overhead  one dsgap_attend call beyond its kernels: a context on random bf16 Q/K/V (1024 tokens,
            12 heads x 128; and Wan's 32760), "dense" and mc-sparse after its anchor (metadata
            reused), M calls queued back to back: the host's time a call (time.perf_counter around
            the ctypes calls, which return with O queued on the stream, without waiting for the
            device), the wall time a call with the stream synchronised at the end, and libdsgap's own
            (dsgap_stats.seconds), against the device time of every kernel and copy of those calls
            (torch.profiler's CUDA activity, CUPTI: it sees libdsgap's launches too), split into
            conversions (api_convert.cu's gather/scatter) and the rest. Overhead = wall - kernels
            (the device's idle time a call); target <= 50 us.

Where the time goes: CUDA event pairs on the stream (the device's timeline, so that a call waiting
for the device is not charged the work queued before it) around every SDPA call (installed around
the processor, so that its own Python work is counted in the attention it wraps), self- vs
cross-attention by the key length, and inside the processor around its torch-dense sites and its
dsgap_attend calls; the rest of the forward by difference; libdsgap's counters (dsgap_stats: device
time of its metadata and sparse attention) split its part.

--tiny: the same logic on the CPU at tiny configurations (libdsgap's CPU backend; no profiler):
test python_bench_processor. Writes DIR/bench_processor.csv (part,metric,value) and
DIR/bench_processor.md. On the H200: scripts/device_python.sh.
"""
import argparse
import csv
import io
import os
import sys
import time
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dsgap.torch as dt  # noqa: E402
from dsgap import torch_abi  # noqa: E402
from dsgap.generate import summarise  # noqa: E402

PAPER_SCHEDULE = "warmup=10,anchors=9,dense_layers=0"


class Setup:
    """the device and sizes of one run of the script (full on CUDA, or --tiny on the CPU)"""

    def __init__(self, tiny):
        self.tiny = tiny
        self.device = "cpu" if tiny else "cuda"
        self.dtype = torch.float32 if tiny else torch.bfloat16

    def sync(self):
        if self.device == "cuda":
            torch.cuda.synchronize()


# --------------------------------------------------------------------------------------------------
# models

def _random(m, S):
    torch.manual_seed(0)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.02)
    return m.to(S.device, S.dtype).eval()


def wan(S):
    from diffusers import WanTransformer3DModel
    if S.tiny:
        m = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=32, in_channels=4,
                                  out_channels=4, text_dim=24, freq_dim=16, ffn_dim=64, num_layers=3)
        return _random(m, S), (4, 3, 16, 32), (12, 24)
    m = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16,
                              out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30,
                              cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6)
    return _random(m, S), (16, 21, 60, 104), (512, 4096)


def hunyuan(S, double, single):
    from diffusers import HunyuanVideoTransformer3DModel
    if S.tiny:
        m = HunyuanVideoTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                                           num_layers=double, num_single_layers=single, num_refiner_layers=1,
                                           patch_size=2, patch_size_t=1, text_embed_dim=24, pooled_projection_dim=8,
                                           rope_axes_dim=(4, 6, 6))
        return _random(m, S), (4, 3, 16, 16), (7, 24), 8
    m = HunyuanVideoTransformer3DModel(in_channels=16, out_channels=16, num_attention_heads=24, attention_head_dim=128,
                                       num_layers=double, num_single_layers=single, num_refiner_layers=2,
                                       mlp_ratio=4.0, patch_size=2, patch_size_t=1, qk_norm="rms_norm",
                                       guidance_embeds=True, text_embed_dim=4096, pooled_projection_dim=768,
                                       rope_theta=256.0, rope_axes_dim=(16, 56, 56))
    return _random(m, S), (16, 33, 90, 160), (256, 4096), 768


# --------------------------------------------------------------------------------------------------
# timing

class Timer:
    """CUDA event pairs on the current stream (the CPU: the wall clock) around every call of the
    functions it wraps, summed per kind. Events time the device's timeline: a call that waits for
    the device (libdsgap's entry point does) is charged its own work only, not the work queued before it."""

    def __init__(self, S):
        self.S, self.marks = S, []
        self.host, self.calls = {}, {}

    def wrap(self, fn, kind_of):
        cuda = self.S.device == "cuda"

        def timed(*a, **kw):
            kind = kind_of(*a, **kw)
            self.calls[kind] = self.calls.get(kind, 0) + 1
            if cuda:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                out = fn(*a, **kw)
                e1.record()
                self.marks.append((kind, e0, e1))
            else:
                t0 = time.perf_counter()
                out = fn(*a, **kw)
                self.host[kind] = self.host.get(kind, 0.0) + time.perf_counter() - t0
            return out
        return timed

    def seconds(self):
        self.S.sync()
        s = dict(self.host)
        for kind, e0, e1 in self.marks:
            s[kind] = s.get(kind, 0.0) + e0.elapsed_time(e1) * 1e-3
        return s


class SdpaTimer(Timer):
    """a Timer around every torch SDPA call while installed ("self": keys as many as queries, self- and
    joint attention; "cross"); with a processor installed, also around its parts: the plain dense
    sites it hands to torch ("torch_dense") and its libdsgap calls ("dsgap_attend")"""

    def __init__(self, S, proc=None):
        super().__init__(S)
        self.proc = proc

    def __enter__(self):
        self.orig = torch.nn.functional.scaled_dot_product_attention
        def kind(*a, **kw):
            q, k = (list(a) + [kw.get("query"), kw.get("key")][len(a):])[:2]
            return "self" if k.shape[-2] == q.shape[-2] else "cross"
        torch.nn.functional.scaled_dot_product_attention = self.wrap(self.orig, kind)
        if self.proc is not None:
            self.attend = torch_abi.Context.attend
            self.proc._torch_dense = self.wrap(self.proc._torch_dense, lambda *a, **kw: "torch_dense")
            torch_abi.Context.attend = self.wrap(self.attend, lambda *a, **kw: "dsgap_attend")
        return self

    def __exit__(self, *exc):
        torch.nn.functional.scaled_dot_product_attention = self.orig
        if self.proc is not None:
            del self.proc._torch_dense
            torch_abi.Context.attend = self.attend
        return False


def denoise(S, m, inputs, steps, guidance=None, policy=None, density=0.15, schedule="", branches=1,
            dense_sites="torch"):
    """a flow-matching Euler loop of `steps` steps over the model, diffusers' attention (policy None)
    or dsgap.torch.attention; with guidance, sequential CFG (the conditional call first). inputs(t,
    cond) gives the model's keyword arguments but hidden_states; returns the final latents, the
    seconds of every step, the SDPA timer's seconds and libdsgap's counters"""
    x = inputs.noise.clone()
    sig = torch.linspace(1, 0, steps + 1)
    proc = dt.attention(m, policy=policy, density=density, schedule=schedule, branches=branches,
                        dense_sites=dense_sites) if policy else None
    times = []
    with torch.no_grad():
        if proc:
            proc.install()
        try:
            with SdpaTimer(S, proc) as tm:
                for i in range(steps):
                    S.sync()
                    t0 = time.perf_counter()
                    t = float(sig[i] * 1000)
                    c = m(hidden_states=x, **inputs(t, True))[0]
                    if guidance is not None:
                        u = m(hidden_states=x, **inputs(t, False))[0]
                        c = u + guidance * (c - u)
                    x = x + (sig[i + 1] - sig[i]) * c
                    S.sync()
                    times.append(time.perf_counter() - t0)
            stats = proc.stats() if proc else None
        finally:
            if proc:
                proc.remove()
    return x.float().cpu(), times, tm.seconds(), stats


class Inputs:
    """the model's inputs of one benchmark, drawn once (the same noise and text for every run)"""

    def __init__(self, S, latent, text, extra=None):
        g = torch.Generator().manual_seed(1)
        mk = lambda *shape: torch.randn(*shape, generator=g).to(S.device, S.dtype)  # noqa: E731
        self.S, self.noise = S, mk(1, *latent)
        self.cond, self.unc = mk(1, *text), mk(1, *text)
        self.extra = extra(mk) if extra else {}

    def __call__(self, t, cond):
        return dict(timestep=torch.full((1,), t, device=self.S.device), encoder_hidden_states=self.cond if cond
                    else self.unc, **self.extra)


# --------------------------------------------------------------------------------------------------
# parts

def part_wan(S, a, rows, md):
    m, latent, text = wan(S)
    inputs = Inputs(S, latent, text)
    grid = (latent[1], latent[2] // 2, latent[3] // 2)
    steps = a.steps
    sched = PAPER_SCHEDULE if steps > 10 else "warmup=1,dense_layers=0"
    denoise(S, m, inputs, 1, guidance=5.0)  # warm-up: kernels, allocator
    denoise(S, m, inputs, 1, guidance=5.0, policy="mc-sparse", density=a.density, schedule="", branches=2)
    ref, t_dense, sd_dense, _ = denoise(S, m, inputs, steps, guidance=5.0)
    x, t_sp, sd_sp, st = denoise(S, m, inputs, steps, guidance=5.0, policy="mc-sparse", density=a.density,
                                 schedule=sched, branches=2)
    # the same with the plain dense sites on libdsgap's dense kernel instead of torch's SDPA (issue 53: the
    # faster of the two should serve them; measured both ways)
    x2, t_sp2, _, st2 = denoise(S, m, inputs, steps, guidance=5.0, policy="mc-sparse", density=a.density,
                                schedule=sched, branches=2, dense_sites="dsgap")
    fid = summarise(ref[0].numpy(), x[0].numpy())
    fid2 = summarise(ref[0].numpy(), x2[0].numpy())
    T0, T1, T2 = sum(t_dense), sum(t_sp), sum(t_sp2)
    ok = bool(np.isfinite(x.numpy()).all()) and bool(np.isfinite(x2.numpy()).all())
    heads = m.config.num_attention_heads
    sites = st["calls"] / heads
    r = [("model", f"WanTransformer3DModel {'tiny' if S.tiny else '1.3B architecture'}, random weights, "
                   f"{S.dtype}".replace("torch.", "")),
         ("latent", "x".join(map(str, latent))), ("tokens", grid[0] * grid[1] * grid[2]), ("steps", steps),
         ("cfg", "5 (sequential, two calls a step)"), ("policy", f"mc-sparse rho {a.density}"), ("schedule", sched),
         ("dense_s", f"{T0:.3f}"), ("mc_sparse_s", f"{T1:.3f}"), ("speedup", f"{T0 / T1:.3f}"),
         ("speedup_target", "1.5 (aim 1.6)"), ("psnr_db", f"{fid['psnr']:.2f}"), ("ssim", f"{fid['ssim']:.4f}"),
         ("psnr_min_db", f"{fid['psnr_min']:.2f}"), ("ssim_min", f"{fid['ssim_min']:.4f}"), ("finite", ok),
         ("effective_density", f"{st['pairs'] / st['full_pairs']:.4f}"), ("dsgap_sites", int(sites)),
         ("sparse_units", st["sparse_calls"]), ("fallback_calls", st["fallback_calls"]),
         ("torch_dense_calls", st["torch_dense_calls"]),
         ("mc_sparse_s_dsgap_dense_sites", f"{T2:.3f}"), ("speedup_dsgap_dense_sites", f"{T0 / T2:.3f}"),
         ("psnr_db_dsgap_dense_sites", f"{fid2['psnr']:.2f}")]
    rows += [("wan", k, v) for k, v in r]
    where = [("generation (50 steps x 2 CFG calls)" if steps == 50 else f"generation ({steps} steps x 2 calls)",
              T0, T1),
             ("self-attention (SDPA calls; with dsgap: the processor's wrapper, everything in it)",
              sd_dense["self"], sd_sp["self"]),
             ("  of which plain dense sites in torch's SDPA (warm-up steps before the anchor, layer 0)", None,
              sd_sp.get("torch_dense", 0.0)),
             ("  of which libdsgap's calls (dsgap_attend: conversions, policy)", None, sd_sp.get("dsgap_attend", 0.0)),
             ("    metadata (groups, scores, selections; device)", None, st["meta_seconds"]),
             ("    sparse attention with its residual (device)", None, st["attend_seconds"]),
             ("  processor's own work between them (branch lookup, views; device idle)", None,
              sd_sp["self"] - sd_sp.get("torch_dense", 0.0) - sd_sp.get("dsgap_attend", 0.0)),
             (f"cross-attention (SDPA, {text[0]} text keys)", sd_dense["cross"], sd_sp["cross"]),
             ("rest of the forward (linears, norms, RoPE, the loop)", T0 - sd_dense["self"] - sd_dense["cross"],
              T1 - sd_sp["self"] - sd_sp["cross"])]
    rows += [("wan", f"time_s:{w[0].strip().split(' (')[0]}:{run}", f"{t:.3f}")
             for w in where for run, t in (("dense", w[1]), ("mc-sparse", w[2])) if t is not None]
    fmt = lambda v: "—" if v is None else f"{v:.2f} s"  # noqa: E731
    md.append(f"## Wan2.1{' (tiny)' if S.tiny else '-1.3B architecture'}, {'x'.join(map(str, latent))} latent ({rows_get(rows, 'wan', 'tokens')} "
              f"tokens), {steps} steps, CFG 5\n\n"
              f"diffusers' dense **{T0:.2f} s**, mc-sparse rho {a.density} through dsgap.torch.attention "
              f"(`{sched}`) **{T1:.2f} s**: **{T0 / T1:.3f}x** (target >= 1.5x). Final latents against dense: "
              f"PSNR {fid['psnr']:.2f} dB (worst frame {fid['psnr_min']:.2f}), SSIM {fid['ssim']:.4f}. "
              f"Effective density {st['pairs'] / st['full_pairs']:.3f}; {st['fallback_calls']} calls fell back "
              f"to torch{fell_back(st)}.\n\n| where the time goes | dense (diffusers) | mc-sparse (dsgap) |\n|---|--:|--:|\n" +
              "".join(f"| {w[0]} | {fmt(w[1])} | {fmt(w[2])} |\n" for w in where) +
              f"\nPer step: dense {1e3 * T0 / steps:.0f} ms; mc-sparse warm-up steps "
              f"{1e3 * np.mean(t_sp[:10] if steps > 10 else t_sp[:1]):.0f} ms, later steps "
              f"{1e3 * np.mean(t_sp[10:] if steps > 10 else t_sp[1:]):.0f} ms.\n\n"
              f"With the plain dense sites on libdsgap's dense kernel instead of torch's SDPA "
              f"(`dense_sites=\"dsgap\"`): **{T2:.2f} s**, **{T0 / T2:.3f}x**, PSNR {fid2['psnr']:.2f} dB against dense "
              f"({st2['fallback_calls']} fallbacks).\n")
    del m
    return ok and st["fallback_calls"] == 0 and st["sparse_calls"] > 0 and st2["fallback_calls"] == 0


def fell_back(st):
    """stats()'s fallbacks as " (N reason, ...)", or nothing"""
    f = st.get("fallbacks") or {}
    return f" ({', '.join(f'{n} {why}' for why, n in sorted(f.items()))})" if f else ""


def rows_get(rows, part, key):
    return next(v for p, k, v in rows if p == part and k == key)


def part_hunyuan(S, a, rows, md):
    double, single = (int(v) for v in a.hy_layers.split(","))
    m, latent, text, pooled = hunyuan(S, double, single)

    def extra(mk):
        return dict(encoder_attention_mask=torch.ones(1, text[0], dtype=torch.bool, device=S.device),
                    pooled_projections=mk(1, pooled), guidance=torch.full((1,), 6000.0, device=S.device, dtype=S.dtype))
    inputs = Inputs(S, latent, text, extra)
    video = latent[1] * (latent[2] // 2) * (latent[3] // 2)
    steps = a.hy_steps
    denoise(S, m, inputs, 1)  # warm-up
    runs = [("diffusers dense (SDPA)", None), ("dsgap dense", "dense"), (f"dsgap mc-sparse rho {a.density}", "mc-sparse")]
    # "dsgap dense": libdsgap's own dense kernel in every call (dense_sites="dsgap"), without diffusers' mask
    res, ok = [], True
    for name, pol in runs:
        try:
            x, ts, sd, st = denoise(S, m, inputs, steps, policy=pol, density=a.density, schedule="warmup=1",
                                    dense_sites="dsgap" if pol == "dense" else "torch")
            res.append((name, ts, sd, st, None))
            ok &= bool(np.isfinite(x.numpy()).all()) and (st is None or st["fallback_calls"] == 0)
        except torch_abi.DsgapError as e:
            res.append((name, None, None, None, str(e)))
            ok = False  # both backends take joint attention (docs/spec.md §3.7): a refusal is a failure
    base = res[0][1]
    r = [("model", f"HunyuanVideoTransformer3DModel, 24 heads x 128 (full width), {double} double-stream + {single} "
                   f"single-stream blocks of 20 + 40, random weights" if not S.tiny else "tiny"),
         ("latent", "x".join(map(str, latent))), ("video_tokens", video), ("text_tokens", text[0]),
         ("attention_layers", double + single), ("steps", steps), ("schedule", "warmup=1 (step 0 dense, the anchor)")]
    lines = []
    for name, ts, sd, st, err in res:
        key = name.split(" rho")[0].replace(" ", "_").replace("(", "").replace(")", "")
        if err:
            r.append((key + "_refused", err.replace(",", ";")))
            lines.append(f"| {name} | refused: {err} | | | |\n")
            continue
        later = np.mean(ts[1:]) if steps > 1 else ts[0]
        sp_all, sp_later = sum(base) / sum(ts), np.mean(base[1:] if steps > 1 else base) / later
        r += [(key + "_s", f"{sum(ts):.3f}"), (key + "_step0_s", f"{ts[0]:.3f}"), (key + "_later_step_s", f"{later:.3f}"),
              (key + "_speedup", f"{sp_all:.3f}"), (key + "_speedup_later_steps", f"{sp_later:.3f}"),
              (key + "_attention_s", f"{sd['self']:.3f}")]
        if st:
            r.append((key + "_effective_density", f"{st['pairs'] / st['full_pairs']:.4f}"))
        lines.append(f"| {name} | {sum(ts):.2f} s | {ts[0]:.2f} s | {later:.2f} s | {sd['self']:.2f} s | "
                     f"{sp_all:.3f}x / {sp_later:.3f}x |\n")
    rows += [("hunyuan", k, v) for k, v in r]
    md.append(f"## HunyuanVideo architecture{' (tiny)' if S.tiny else ', 720p x 129 frames'} ({'x'.join(map(str, latent))} "
              f"latent: {video} video + {text[0]} text tokens), {double} + {single} blocks "
              f"({m.config.num_attention_heads} heads x {m.config.attention_head_dim}), {steps} steps\n\n"
              "One call a step (guidance-distilled). diffusers passes its text mask (all tokens kept here) to SDPA, "
              "which then cannot use its flash kernel; dsgap takes a mask that keeps every key as none.\n\n"
              "| run | total | step 0 (dense; anchor) | a later step | joint attention | speedup (all / later steps) |\n"
              "|---|--:|--:|--:|--:|--:|\n" + "".join(lines))
    del m
    return ok


def part_overhead(S, a, rows, md):
    shapes = [((1, 8, 16), 2, 64, 50)] if S.tiny else [((1, 32, 32), 12, 128, 300), ((21, 30, 52), 12, 128, 20)]
    lines, ok, unseen = [], True, False
    for grid, H, D, M in shapes:
        n = grid[0] * grid[1] * grid[2]
        g = torch.Generator().manual_seed(2)
        dtype = torch.float32 if S.tiny else torch.bfloat16
        q, k, v = (torch.randn(n, H, D, generator=g).to(S.device, dtype) for _ in range(3))
        o = torch.empty_like(q)
        view = lambda t: torch_abi.Tensor(t.data_ptr(), *t.stride())  # noqa: E731  (tokens, heads, dim)
        tq, tk, tv, to = view(q), view(k), view(v), view(o)
        code = torch_abi.FP32 if S.tiny else torch_abi.BF16
        stream = None if S.tiny else torch.cuda.current_stream().cuda_stream
        for pol in ("dense", "mc-sparse"):
            ctx = torch_abi.Context(pol, [a.density], "", 1, H, D, 1, grid, 0, "cpu" if S.tiny else "gpu")
            ctx.attend(0, 0, 0, tq, tk, tv, to, code, n, stream)  # the anchor (mc-sparse's metadata)
            ctx.attend(1, 0, 0, tq, tk, tv, to, code, n, stream)  # warm
            S.sync()
            s0 = ctx.stats()["seconds"]

            def calls():
                for i in range(M):
                    ctx.attend(2 + i, 0, 0, tq, tk, tv, to, code, n, stream)
            t0 = time.perf_counter()
            calls()
            host = (time.perf_counter() - t0) / M  # queued (the GPU calls do not wait for the device)
            S.sync()
            wall = (time.perf_counter() - t0) / M
            inside = (ctx.stats()["seconds"] - s0) / M
            kern = conv = float("nan")
            if not S.tiny:
                kern, conv = kernel_seconds(calls)
                kern, conv = kern / M, conv / M
                unseen |= kern == 0
            ctx.close()
            over = wall - kern
            row = dict(tokens=n, heads=H, head_dim=D, policy=pol, calls=M, host_us=1e6 * host, wall_us=1e6 * wall,
                       inside_us=1e6 * inside,
                       kernels_us=1e6 * kern, conversions_us=1e6 * conv, overhead_us=1e6 * over,
                       overhead_inside_us=1e6 * (inside - kern))
            ok &= wall > 0 and inside > 0
            rows += [("overhead", f"{pol}@{n}:{key}", f"{val:.1f}" if isinstance(val, float) else val)
                     for key, val in row.items()]
            lines.append(f"| {n} x {H} x {D} | {pol} | {M} | {row['host_us']:.1f} | {row['wall_us']:.1f} | "
                         f"{row['inside_us']:.1f} | "
                         f"{row['kernels_us']:.1f} | {row['conversions_us']:.1f} | **{row['overhead_us']:.1f}** |\n")
    if unseen:
        lines.append("\n(kernels 0.0: the profiler saw none of libdsgap's launches, so the overhead column is the "
                     "whole call.)\n")
    md.append("## Overhead of one dsgap_attend call beyond its kernels (target <= 50 us)\n\n" +
              ("(--tiny: fp32 on the CPU backend, no kernels to subtract.) " if S.tiny else "") +
              "M calls on one context at one (layer, branch), each a later step after the anchor (mc-sparse: "
              "metadata reused, one sparse launch; dense: dsgap's flash kernel), bf16 Q/K/V (tokens, heads, "
              "dim) on the GPU. host: time.perf_counter around the M ctypes calls, / M: the host's time to queue "
              "one (the GPU calls do not wait for the device). wall: the same with the stream synchronised at "
              "the end, / M. overhead = wall - kernels: the device's idle time a call, the host's part that the "
              "queue does not hide (with kernels longer than the host's part the device never waits and it "
              "is about 0). inside: libdsgap's own clock (dsgap_stats.seconds, without ctypes; host time). "
              "kernels: torch.profiler's CUDA activity (CUPTI) over "
              "the same M calls, every kernel and copy, / M; conversions: api_convert.cu's gather (Q, K, V) "
              "and scatter (O) of them.\n\n"
              "| tokens x heads x dim | policy | M | host us | wall us | inside us | kernels us | conversions us | "
              "overhead us |\n|---|---|--:|--:|--:|--:|--:|--:|--:|\n" + "".join(lines))
    return ok


def kernel_seconds(fn):
    """device seconds of every kernel and copy fn launches (torch.profiler, CUDA activity), and of
    those the conversions (api_convert.cu's kernels: gather_vec/scatter_vec, the 16-byte path, and
    gather_bf16/scatter_bf16)"""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    tot = conv = 0.0
    for e in p.key_averages():
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0.0)
        tot += us
        if any(name in e.key for name in ("gather_vec", "scatter_vec", "gather_bf16", "scatter_bf16")):
            conv += us
    return tot * 1e-6, conv * 1e-6


# --------------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--parts", default="overhead,hunyuan,wan", help="in this order (the quick ones first)")
    ap.add_argument("--steps", type=int, default=None, help="Wan's steps (50; --tiny 3)")
    ap.add_argument("--density", type=float, default=0.15)
    ap.add_argument("--hy-layers", default=None, help="HunyuanVideo's double,single blocks (2,2; --tiny 1,1)")
    ap.add_argument("--hy-steps", type=int, default=None, help="HunyuanVideo's steps (4; --tiny 3)")
    ap.add_argument("--tiny", action="store_true", help="tiny configurations on the CPU (the script's own test)")
    a = ap.parse_args(argv)
    a.steps = a.steps or (3 if a.tiny else 50)
    a.hy_layers = a.hy_layers or ("1,1" if a.tiny else "2,2")
    a.hy_steps = a.hy_steps or (3 if a.tiny else 4)
    hy = a.hy_layers.split(",")
    if len(hy) != 2 or not all(v.isdigit() for v in hy) or hy == ["0", "0"]:
        sys.exit(f"bench_processor: --hy-layers {a.hy_layers!r}: give DOUBLE,SINGLE block counts, e.g. 2,2")
    parts = [p for p in a.parts.split(",") if p]
    bad = [p for p in parts if p not in ("wan", "hunyuan", "overhead")]
    if bad:
        sys.exit(f"bench_processor: unknown part {bad[0]!r} (wan, hunyuan, overhead)")
    if not a.tiny and not torch.cuda.is_available():
        sys.exit("bench_processor: needs a CUDA device (or --tiny)")
    def shown(path):  # as libdsgap's writers show a path (dg_path_shown): no directory of this machine
        path = os.path.abspath(path)
        return os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else os.path.basename(path)

    S = Setup(a.tiny)
    torch.set_grad_enabled(False)
    os.makedirs(a.out, exist_ok=True)
    dev = "cpu (--tiny)" if a.tiny else torch.cuda.get_device_name()
    import diffusers
    rows = [("run", "device", dev), ("run", "torch", torch.__version__), ("run", "diffusers", diffusers.__version__),
            ("run", "libdsgap", torch_abi.version()), ("run", "cpus", os.cpu_count())]
    md = [f"# dsgap.torch.attention benchmark{' (--tiny, CPU: a test of the script)' if a.tiny else ''}\n\n"
          f"{dev}, torch {torch.__version__}, diffusers {diffusers.__version__}, libdsgap "
          f"{torch_abi.version()} ({shown(torch_abi.library_path())}).\n"]
    ok = True
    for p in parts:   # the files are rewritten after every part: a run stopped later keeps them
        t0 = time.time()
        try:
            good = {"wan": part_wan, "hunyuan": part_hunyuan, "overhead": part_overhead}[p](S, a, rows, md)
        except Exception as e:  # one part failing (e.g. out of memory) leaves the others' results
            traceback.print_exc()
            good = False
            rows.append((p, "error", f"{type(e).__name__}: {e}".splitlines()[0]))
            md.append(f"## {p}: failed\n\n{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}\n")
        ok &= good
        print(f"bench_processor: {p}: {time.time() - t0:.1f} s{'' if good else ' (failed)'}", file=sys.stderr)
        if S.device == "cuda":
            torch.cuda.empty_cache()
        write(a.out, rows, md)
    print("\n".join(md))
    if not ok:
        print("bench_processor: a part failed, was not finite, fell back to torch or made no sparse call",
              file=sys.stderr)
    return 0 if ok else 1


def write(out, rows, md):
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([("part", "metric", "value")] + rows)
    for name, text in (("bench_processor.csv", buf.getvalue()), ("bench_processor.md", "\n".join(md))):
        tmp = os.path.join(out, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out, name))

if __name__ == "__main__":
    sys.exit(main())

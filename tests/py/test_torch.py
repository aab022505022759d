"""test_torch.py: dsgap.torch.attention (libdsgap through ctypes) inside tiny random-initialised
diffusers models on the CPU backend.

  python test_torch.py            (DSGAP_LIB: libdsgap.so, set by tests/CMakeLists.txt)

  1. every family of test_families.py (Wan2.1, Wan2.2, HunyuanVideo with padded text, CogVideoX,
     Mochi, LTX-Video, LTX-2, FLUX and issue 51's families), fp32, a 3-step loop: policy "dense" through libdsgap equals torch's own
     attention, and "mc-sparse" at density 1 equals it too (max rel < 1e-5 on every step's output);
     every attention call went to libdsgap (no fallback), the sparse path ran (sparse_calls > 0); and
     "mc-sparse" at density 0.25 over the same 3 steps stays finite (test python_torch_asan runs all
     of this file with libdsgap_asan.so, the C side under AddressSanitizer and UBSan);
  2. Wan2.1, FLUX, SD3, Qwen-Image and LTX-2 at 512+ video tokens: mc-sparse at density 0.25 differs from dense, stays finite,
     computes fewer pairs (effective density < 1);
  3. dense_sites="torch": the schedule's plain dense sites run torch's SDPA, with the same outputs;
     Wan2.1 in bf16: "dense" through libdsgap equals torch's bf16 SDPA within bf16 tolerance;
  4. CFG: with the batch [uncond, cond] (diffusers' order) every (step, layer, branch) is attended once
     per call and branch 0 is the conditional item; mc-sparse/cfg_meta=shared (the unconditional
     branch takes the conditional one's selections) batched equals the same policy run sequentially
     (cond call, then uncond); the batch in the other order (a wrong branch) does not;
  5. CFG branches with different text lengths (issue 51): HunyuanVideo batched (padded, per-item masks)
     and sequential (cut prompts), FLUX sequential: "dense" = torch, mc-sparse runs (a context per text
     length), batched = sequential; cfg_meta=shared with two lengths is one clear error;
  6. the generic mode (layout=, grid=) on Wan2.1 and SD3: "dense" = torch, mc-sparse = the family mode's;
  7. stats() read after the with block is the run's numbers (issue 51), a second run its own; calls
     dsgap cannot take (causal, another scale) run torch's SDPA, counted under their reasons;
  8. errors: an unsupported model, a bad argument, a shape other than the context's, a bad policy: one
     line starting "dsgap:" that says what to do, no "libdsgap:" or DSGAP_E_* (issue 51).
"""
import os
import sys
import time

import numpy as np
import torch

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import dsgap.torch as dt  # noqa: E402
from dsgap import torch_abi  # noqa: E402
from pyhelp import Checker, randomize  # noqa: E402
from test_families import models  # noqa: E402

torch.set_grad_enabled(False)
ck = Checker("torch")
TS = (900.0, 600.0, 300.0)


def rel(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()


def loop(m, kw):
    """three model calls at decreasing timesteps, each output kept (the model's input fixed)"""
    return [m(**kw(t))[0] for t in TS]


def families():
    for fam in ("wan", "wan22", "hunyuanvideo", "cogvideox", "mochi", "ltx", "ltx2", "flux", "skyreels", "cosmos", "sd3",
                "qwenimage", "flux2", "hunyuanvideo15"):
        t0 = time.time()
        m, kw, grid, text = models(fam)
        randomize(m)
        m.eval()
        ref = loop(m, kw)
        for pol in ("dense", "mc-sparse"):
            with dt.attention(m, policy=pol, density=1.0, dense_sites="dsgap") as a:
                out = loop(m, kw)
                s = a.stats()
            e = max(rel(o, r) for o, r in zip(out, ref))
            sparse_ok = s["sparse_calls"] > 0 if pol != "dense" else s["sparse_calls"] == 0
            ck.check(f"{fam}: {pol} at density 1 through libdsgap = torch's attention (fp32, 3 steps)",
                     e < 1e-5 and s["calls"] > 0 and s["fallback_calls"] == 0 and sparse_ok,
                     f"max rel {e:.1e}, units {s['calls']}, sparse {s['sparse_calls']}, fallback {s['fallback_calls']}")
        with dt.attention(m, policy="mc-sparse", density=0.25) as a:
            out = loop(m, kw)
            s = a.stats()
        ck.check(f"{fam}: mc-sparse at 0.25, 3 steps: finite, every call through libdsgap, sparse after the anchor",
                 all(bool(torch.isfinite(o).all()) for o in out) and s["sparse_calls"] > 0 and s["fallback_calls"] == 0,
                 f"units {s['calls']}, sparse {s['sparse_calls']}, fallback {s['fallback_calls']}, "
                 f"density {s['pairs'] / s['full_pairs']:.3f}")
        print(f"   {fam}: {time.time() - t0:.1f} s")


def wan(layers=3, latent=(2, 32, 32), dtype=torch.float32):
    import diffusers as D
    torch.manual_seed(0)
    m = D.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                out_channels=4, text_dim=24, freq_dim=16, ffn_dim=32, num_layers=layers)
    randomize(m)
    return m.eval().to(dtype), torch.randn(1, 4, *latent).to(dtype)


def sparse():
    m, x = wan()
    txt = torch.randn(1, 5, 24)
    kw = lambda t: dict(hidden_states=x, timestep=torch.tensor([t]), encoder_hidden_states=txt)  # noqa: E731
    flux = models("flux")[0]
    randomize(flux)
    h, w = 16, 32
    ids = torch.zeros(h, w, 3)
    ids[..., 1], ids[..., 2] = torch.arange(h)[:, None], torch.arange(w)[None, :]
    fx, ftxt, pooled = torch.randn(1, h * w, 8), torch.randn(1, 6, 24), torch.randn(1, 8)
    fkw = lambda t: dict(hidden_states=fx, encoder_hidden_states=ftxt, pooled_projections=pooled,  # noqa: E731
                         timestep=torch.full((1,), t / 1000), img_ids=ids.reshape(-1, 3), txt_ids=torch.zeros(6, 3))
    # issue 51's joint families at 512+ video tokens: SD3 (text last), Qwen-Image (text first, t / 1000)
    import diffusers as D
    torch.manual_seed(0)
    sd3 = D.SD3Transformer2DModel(sample_size=48, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=16,
                                  num_attention_heads=2, joint_attention_dim=24, caption_projection_dim=32,
                                  pooled_projection_dim=8, out_channels=4, pos_embed_max_size=24)
    randomize(sd3)
    sx, stxt, spool = torch.randn(1, 4, 48, 48), torch.randn(1, 6, 24), torch.randn(1, 8)
    skw = lambda t: dict(hidden_states=sx, encoder_hidden_states=stxt, pooled_projections=spool,  # noqa: E731
                         timestep=torch.full((1,), t))
    qwen = D.QwenImageTransformer2DModel(patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16,
                                         num_attention_heads=2, joint_attention_dim=24, axes_dims_rope=(4, 6, 6))
    randomize(qwen)
    qx, qtxt = torch.randn(1, h * w, 16), torch.randn(1, 7, 24)
    qkw = lambda t: dict(hidden_states=qx, encoder_hidden_states=qtxt, encoder_hidden_states_mask=torch.ones(1, 7),  # noqa: E731
                         timestep=torch.full((1,), t / 1000), img_shapes=[(1, h, w)])
    ltx2 = models("ltx2")[0]   # LTX-2: 2 x 16 x 16 video tokens beside 5 audio ones
    randomize(ltx2)
    lx, lax, ltxt = torch.randn(1, 512, 8), torch.randn(1, 5, 8), torch.randn(1, 5, 24)
    lkw = lambda t: dict(hidden_states=lx, audio_hidden_states=lax, encoder_hidden_states=ltxt,  # noqa: E731
                         audio_encoder_hidden_states=ltxt, timestep=torch.full((1,), t), num_frames=2, height=16,
                         width=16, audio_num_frames=5)
    for name, model, k in (("wan", m, kw), ("flux", flux.eval(), fkw), ("sd3", sd3.eval(), skw),
                           ("qwen-image", qwen.eval(), qkw), ("ltx-2", ltx2.eval(), lkw)):
        ref = loop(model, k)
        with dt.attention(model, policy="mc-sparse", density=0.25) as a:
            out = loop(model, k)
            s = a.stats()
        e0, e = rel(out[0], ref[0]), max(rel(o, r) for o, r in zip(out[1:], ref[1:]))
        dens = s["pairs"] / s["full_pairs"]
        ck.check(f"{name}, 512+ video tokens: mc-sparse at 0.25: the anchor step is dense, later steps differ, finite, "
                 f"fewer pairs", e0 < 1e-5 and e > 1e-4 and all(bool(torch.isfinite(o).all()) for o in out)
                 and dens < 0.9 and s["fallback_calls"] == 0, f"step 0 {e0:.1e}, later max rel {e:.2e}, density {dens:.3f}")


def dense_sites():
    """dense_sites="torch": the schedule's plain dense sites (step 0 before the anchor at step 1, layer 0
    throughout) run torch's SDPA, the rest libdsgap: the same outputs as every call through libdsgap"""
    m, x = wan()
    txt = torch.randn(1, 5, 24)
    kw = lambda t: dict(hidden_states=x, timestep=torch.tensor([t]), encoder_hidden_states=txt)  # noqa: E731
    runs = {}
    for mode in ("dsgap", "torch"):
        with dt.attention(m, policy="mc-sparse", density=0.25, schedule="warmup=2,anchors=1,dense_layers=0",
                          branches=1, dense_sites=mode) as a:
            runs[mode] = (loop(m, kw), a.stats())
    (o_d, s_d), (o_t, s_t) = runs["dsgap"], runs["torch"]
    e = max(rel(a, b) for a, b in zip(o_t, o_d))
    # 3 steps x 3 layers; torch's: step 0's 3 layers and layer 0 at steps 1, 2 (2 heads a call)
    ck.check("dense_sites='torch': plain dense sites run torch's SDPA, the anchor and sparse steps libdsgap, "
             "outputs = every call through libdsgap", e < 1e-5 and s_t["torch_dense_calls"] == 5 and
             s_d["torch_dense_calls"] == 0 and s_t["calls"] == s_d["calls"] - 5 * 2 and s_t["sparse_calls"] ==
             s_d["sparse_calls"] > 0, f"max rel {e:.1e}, torch calls {s_t['torch_dense_calls']}, units "
             f"{s_t['calls']} vs {s_d['calls']}, sparse {s_t['sparse_calls']} vs {s_d['sparse_calls']}")
    with dt.attention(m, policy="dense") as a:
        loop(m, kw)
        s = a.stats()
    ck.check("policy 'dense' with dense_sites='torch' (the default): every call torch's own, none to libdsgap",
             s["torch_dense_calls"] == 9 and s["calls"] == 0, f"{s['torch_dense_calls']} torch, {s['calls']} units")


def bf16():
    m, x = wan(layers=2, latent=(2, 16, 16), dtype=torch.bfloat16)
    txt = torch.randn(1, 5, 24).to(torch.bfloat16)
    kw = lambda t: dict(hidden_states=x, timestep=torch.tensor([t]), encoder_hidden_states=txt)  # noqa: E731
    ref = loop(m, kw)
    with dt.attention(m, policy="dense", dense_sites="dsgap") as a:
        out = loop(m, kw)
        s = a.stats()
    e = max(rel(o, r) for o, r in zip(out, ref))
    ck.check("wan in bf16: dense through libdsgap = torch's bf16 attention within bf16 tolerance",
             e < 3e-2 and s["calls"] > 0 and s["fallback_calls"] == 0 and out[0].dtype == torch.bfloat16, f"max rel {e:.1e}")


def cfg():
    m, x = wan()
    cond, unc = torch.randn(1, 5, 24), torch.randn(1, 5, 24)
    pol = "mc-sparse/cfg_meta=shared"

    def batched(first, second, record=None):
        with dt.attention(m, policy=pol, density=0.25) as a:
            outs = []
            for t in TS:
                o = m(hidden_states=torch.cat([x, x]), timestep=torch.tensor([t, t]),
                      encoder_hidden_states=torch.cat([first, second]))[0]
                if record is not None and not record:   # spy on the calls libdsgap gets
                    attend = a.ctx.attend
                    a.ctx.attend = lambda step, layer, branch, *r: (record.append((step, layer, branch)),
                                                                    attend(step, layer, branch, *r))
                outs.append(o)
        return outs

    calls = []
    bat = batched(unc, cond, calls)
    with dt.attention(m, policy=pol, density=0.25):
        seq = []
        for t in TS:
            c = m(hidden_states=x, timestep=torch.tensor([t]), encoder_hidden_states=cond)[0]
            u = m(hidden_states=x, timestep=torch.tensor([t]), encoder_hidden_states=unc)[0]
            seq.append(torch.cat([u, c]))
    want = [(s, l, b) for s in (1, 2) for l in range(3) for b in (0, 1)]  # item 1 (cond): branch 0, first
    ck.check("batched CFG: each (step, layer, branch) once per call, item 1 (cond) is branch 0, attended first", calls == want,
             f"{calls[:6]}")
    eb = max(rel(b, s) for b, s in zip(bat[1:], seq[1:]))
    ck.check("batched [uncond, cond] = sequential (cond, uncond) under mc-sparse/cfg_meta=shared at 0.25", eb < 1e-4,
             f"max rel {eb:.1e}")
    swapped = batched(cond, unc)
    es = max(rel(b.flip(0), s) for b, s in zip(swapped[1:], seq[1:]))
    ck.check("negative control: the batch in the other order (branches swapped) differs", es > 1e-5, f"max rel {es:.1e}")


def cfg_text():
    """issue 51 item 5: CFG branches whose prompts keep different numbers of text tokens, batched (one
    padded batch, per-item key-padding masks) and sequential (prompts of two lengths), HunyuanVideo
    (dual + single stream, text last) and FLUX (joint, text first)"""
    hv, kw, grid, text = models("hunyuanvideo")
    randomize(hv)
    hv.eval()
    base = kw(900.0)
    txt, pooled = base["encoder_hidden_states"], base["pooled_projections"]
    x = torch.randn(1, 4, 3, 32, 32)   # 768 video tokens: top-k at 0.25 keeps fewer keys than all
    utxt = torch.randn_like(txt)
    cmask = torch.tensor([[1, 1, 1, 1, 1, 0, 0]], dtype=torch.bool)   # cond: 5 text tokens
    umask = torch.tensor([[1, 1, 1, 0, 0, 0, 0]], dtype=torch.bool)   # uncond: 3

    def bat(t):
        return dict(hidden_states=torch.cat([x, x]), timestep=torch.full((2,), t), encoder_hidden_states=torch.cat([utxt, txt]),
                    encoder_attention_mask=torch.cat([umask, cmask]), pooled_projections=torch.cat([pooled, pooled]),
                    guidance=torch.full((2,), 4000.0))

    def seq(t, cond):   # sequential: the prompts cut to their own lengths (no mask)
        e, n = (txt, 5) if cond else (utxt, 3)
        return dict(hidden_states=x, timestep=torch.full((1,), t), encoder_hidden_states=e[:, :n],
                    encoder_attention_mask=torch.ones(1, n, dtype=torch.bool), pooled_projections=pooled,
                    guidance=torch.full((1,), 4000.0))

    def run_bat():
        return [hv(**bat(t))[0] for t in TS]

    def run_seq():
        return [torch.cat([hv(**seq(t, False))[0], hv(**seq(t, True))[0]]) for t in TS]

    for name, run in (("batched", run_bat), ("sequential", run_seq)):
        ref = run()
        with dt.attention(hv, policy="dense", dense_sites="dsgap") as a:
            out = run()
            texts = sorted(t for _, t in a.ctxs)   # (expert, text length)
        s = a.stats()
        e = max(rel(o, r) for o, r in zip(out, ref))
        ck.check(f"HunyuanVideo, CFG {name}, cond 5 / uncond 3 text tokens: 'dense' through libdsgap = torch, "
                 f"every call taken", e < 1e-5 and s["calls"] > 0 and s["fallback_calls"] == 0 and texts == [3, 5],
                 f"max rel {e:.1e}, units {s['calls']}, fallback {s['fallback_calls']}")
    outs = {}
    for name, run in (("batched", run_bat), ("sequential", run_seq)):
        with dt.attention(hv, policy="mc-sparse", density=0.25) as a:
            outs[name] = run()
            texts = sorted(t for _, t in a.ctxs)   # (expert, text length)
        s = a.stats()
        ck.check(f"HunyuanVideo, CFG {name}, 5 / 3 text tokens: mc-sparse at 0.25 runs (a context per text length), "
                 f"finite, sparse", texts == [3, 5] and s["sparse_calls"] > 0 and s["fallback_calls"] == 0 and
                 all(bool(torch.isfinite(o).all()) for o in outs[name]), f"texts {texts}, sparse {s['sparse_calls']}")
    e = max(rel(b, q) for b, q in zip(outs["batched"], outs["sequential"]))
    d = max(rel(b, r) for b, r in zip(outs["batched"][1:], ref[1:]))
    ck.check("mc-sparse batched (padded) = sequential (cut prompts), and it differs from dense", e < 1e-4 and d > 1e-4,
             f"batched vs sequential {e:.1e}, vs dense {d:.1e}")
    try:
        with dt.attention(hv, policy="mc-sparse/cfg_meta=shared", density=0.25):
            run_bat()
        ck.check("cfg_meta=shared with two text lengths is refused", False)
    except torch_abi.DsgapError as e:
        ck.check("cfg_meta=shared with two text lengths: one 'dsgap:' line saying to pad the prompts or drop it",
                 clean(e) and "pad both prompts" in str(e), str(e))
    # FLUX (joint attention, text first): sequential CFG with prompts of 6 and 3 tokens
    flux = models("flux")[0]
    randomize(flux)
    flux.eval()
    h, w = 4, 6
    ids = torch.zeros(h, w, 3)
    ids[..., 1], ids[..., 2] = torch.arange(h)[:, None], torch.arange(w)[None, :]
    fx, ctxt, utx, fpool = torch.randn(1, h * w, 8), torch.randn(1, 6, 24), torch.randn(1, 3, 24), torch.randn(1, 8)

    def frun():
        out = []
        for t in TS:
            for e in (ctxt, utx):
                out.append(flux(hidden_states=fx, encoder_hidden_states=e, pooled_projections=fpool,
                                timestep=torch.full((1,), t / 1000), img_ids=ids.reshape(-1, 3),
                                txt_ids=torch.zeros(e.shape[1], 3))[0])
        return out
    ref = frun()
    with dt.attention(flux, policy="dense", dense_sites="dsgap") as a:
        out = frun()
    s = a.stats()
    e = max(rel(o, r) for o, r in zip(out, ref))
    with dt.attention(flux, policy="mc-sparse", density=0.25) as a:
        sp = frun()
    s2 = a.stats()
    ck.check("FLUX, sequential CFG with 6 / 3 text tokens: 'dense' = torch, mc-sparse runs finite and sparse",
             e < 1e-5 and s["fallback_calls"] == 0 and s2["sparse_calls"] > 0 and
             all(bool(torch.isfinite(o).all()) for o in sp), f"max rel {e:.1e}, sparse {s2['sparse_calls']}")


def generic():
    """issue 51 item 4: the closed loop's generic mode (layout=, grid=): Wan2.1 (self attention, cross
    attention left to torch) and SD3 (joint, text last) under mc-sparse at 0.25 equal the family mode's
    run (Wan2.1 bit for bit; SD3 within fp32 rounding: the generic mode also takes SD3.5's image-only
    attn2 of block 0, which the family leaves to torch); 'dense' equals torch; no fallback counted"""
    m, kw = models("wan")[:2]
    randomize(m)
    m.eval()
    sd3, skw = models("sd3")[:2]
    randomize(sd3)
    sd3.eval()
    for name, model, k, layout, grid in (("Wan2.1", m, kw, "video", (3, 3, 4)), ("SD3", sd3, skw, "video,text", (1, 3, 4))):
        ref = loop(model, k)
        with dt.attention(model, policy="dense", dense_sites="dsgap", layout=layout, grid=grid) as a:
            dense = loop(model, k)
        sd = a.stats()
        with dt.attention(model, policy="mc-sparse", density=0.25) as a:
            fam = loop(model, k)
        with dt.attention(model, policy="mc-sparse", density=0.25, layout=layout, grid=grid) as a:
            gen = loop(model, k)
        sg = a.stats()
        ed = max(rel(o, r) for o, r in zip(dense, ref))
        eg = max(rel(o, r) for o, r in zip(gen, fam))
        ck.check(f"generic mode on {name} (layout {layout!r}): 'dense' = torch, mc-sparse = the family mode's, every "
                 f"self/joint call taken, no fallback", ed < 1e-5 and eg < 1e-5 and sd["calls"] > 0 and sg["calls"] > 0
                 and sd["fallback_calls"] == 0 and sg["fallback_calls"] == 0,
                 f"dense {ed:.1e}, vs family {eg:.1e}, units {sg['calls']}, fallback {sg['fallback_calls']}")
    try:
        dt.attention(m, layout="text-video", grid=(1, 2, 3))
        ck.check("a bad generic layout is refused", False)
    except torch_abi.DsgapError as e:
        ck.check("a bad generic layout is refused naming the choices", "layout=" in str(e) and clean(e), str(e))


def clean(e):
    """issue 51: the processor's errors start with "dsgap:", say what to do, leak no "libdsgap:" or status name"""
    s = str(e)
    return s.startswith("dsgap: ") and "libdsgap:" not in s and "DSGAP_E" not in s and "\n" not in s


def after_with():
    """issue 51: stats() read after the with block (python/README.md's example) is the run's numbers"""
    m, x = wan(layers=2, latent=(2, 16, 16))
    txt = torch.randn(1, 5, 24)
    kw = lambda t: dict(hidden_states=x, timestep=torch.tensor([t]), encoder_hidden_states=txt)  # noqa: E731
    a = dt.attention(m, policy="mc-sparse", density=0.25, schedule="dense_layers=0", branches=1)
    with a:
        loop(m, kw)
        inside = a.stats()
    after = a.stats()
    ck.check("stats() after the with block = the run's numbers read inside it (not zeros)",
             after == inside and after["calls"] > 0 and after["sparse_calls"] > 0 and after["torch_dense_calls"] > 0
             and a.ctx is None, f"after {after['calls']} units, {after['sparse_calls']} sparse, "
             f"{after['torch_dense_calls']} torch dense; inside {inside['calls']}")
    with a:   # a second run counts from zero
        m(**kw(TS[0]))
    again = a.stats()
    ck.check("a second with block on the same object: its own numbers, from zero",
             0 < again["calls"] + again["torch_dense_calls"] < after["calls"] + after["torch_dense_calls"],
             f"{again['calls']} units, {again['torch_dense_calls']} torch dense")


def fallbacks():
    """issue 53: calls dsgap cannot take run torch's SDPA and are counted under their reasons"""
    m, x = wan(layers=2, latent=(2, 8, 8))
    txt = torch.randn(1, 5, 24)
    F = torch.nn.functional
    for why, extra in (("causal", dict(is_causal=True)), ("a scale other than 1/sqrt(head_dim)", dict(scale=0.5))):
        a = dt.attention(m, policy="mc-sparse", density=0.25, branches=1)
        with a:
            sdpa = F.scaled_dot_product_attention   # the processor's
            F.scaled_dot_product_attention = lambda *args, **kw: sdpa(*args, **{**kw, **extra})  # noqa: E731
            try:
                y = m(hidden_states=x, timestep=torch.tensor([900.0]), encoder_hidden_states=txt)[0]
            finally:
                F.scaled_dot_product_attention = sdpa
        s = a.stats()
        ck.check(f"a call dsgap cannot take ({why}) runs torch's SDPA, counted under its reason",
                 s["fallbacks"] == {why: 2} and s["fallback_calls"] == 2 and s["calls"] == 0 and
                 bool(torch.isfinite(y).all()), f"fallbacks {s['fallbacks']}, units {s['calls']}")


def errors():
    try:
        dt.attention(torch.nn.Linear(2, 2))
        ck.check("an unsupported model is refused", False)
    except torch_abi.DsgapError as e:
        ck.check("an unsupported model is refused, naming the supported ones and the generic mode, 'dsgap:' first",
                 "WanTransformer3DModel" in str(e) and "dsgap.describe" in str(e) and "layout=" in str(e) and clean(e),
                 str(e))
    try:
        dt.attention(wan(layers=1, latent=(1, 4, 4))[0], dense_sites="cuda")
        ck.check("a bad dense_sites is refused", False)
    except torch_abi.DsgapError as e:
        ck.check("a bad dense_sites is refused, naming the argument and its values", "dense_sites=" in str(e) and
                 "'torch'" in str(e) and clean(e), str(e))
    m, x = wan(layers=1, latent=(1, 4, 4))
    txt = torch.randn(1, 5, 24)
    try:
        with dt.attention(m, policy="mc-sparse"):
            m(hidden_states=x, timestep=torch.tensor([9.0]), encoder_hidden_states=txt)
            m(hidden_states=torch.randn(1, 4, 2, 4, 4), timestep=torch.tensor([8.0]), encoder_hidden_states=txt)
        ck.check("another shape within one context is refused", False)
    except torch_abi.DsgapError as e:
        ck.check("another shape within one context is refused, saying what to do", "was made for" in str(e) and
                 "one dsgap.torch.attention per resolution" in str(e) and clean(e), str(e))
    try:
        with dt.attention(m, policy="no-such-policy"):
            m(hidden_states=x, timestep=torch.tensor([9.0]), encoder_hidden_states=txt)
        ck.check("a bad policy spec is libdsgap's error", False)
    except torch_abi.DsgapError as e:
        ck.check("a bad policy spec is libdsgap's error: its code kept, the message 'dsgap:' and what to check",
                 e.code == 2 and e.status == "DSGAP_E_POLICY" and "no-such-policy" in str(e) and "policy=" in str(e)
                 and clean(e), str(e))
    ck.check("the SDPA wrapper is removed after an error",
             torch.nn.functional.scaled_dot_product_attention.__module__.startswith("torch"))


def main():
    print("libdsgap", torch_abi.version(), "at", torch_abi.library_path())
    for part in (families, sparse, dense_sites, bf16, cfg, cfg_text, generic, after_with, fallbacks, errors):
        t0 = time.time()
        part()
        print(f"   {part.__name__}: {time.time() - t0:.1f} s")
    return ck.done()


if __name__ == "__main__":
    sys.exit(main())

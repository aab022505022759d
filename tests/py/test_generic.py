"""test_generic.py: the generic mode made safe and discoverable (issue 51 item 4), on tiny random
diffusers models (CPU, nothing downloaded).

  python test_generic.py WORKDIR

  1. dsgap.describe on Wan2.1 (self + cross attention): one layer per block (attn1), cross attention
     listed without a layer, no text in the self-attention; on SD3 (joint attention, the text last):
     every block's attn a joint site with the text given, layout "video,text" read from V's rows,
     video tokens = the latent's patches; on HunyuanVideo-1.5 (a text refiner before the blocks, extra
     text and image tokens under a joint padding mask) the video tokens from the latent's patches;
  2. generic capture, layers by block: Wan2.1 in generic mode (layout "video") at layers [1, 2]
     records exactly what the family mode records at blocks 1 and 2 (SDPA call numbers would be 2
     and 4: cross attention in between); SD3 with describe's layout and grid: each recorded layer's Q
     rows equal that block's SDPA query, text moved first;
  3. a wrong grid under a joint layout (SD3, grid (1, 2, 4): 8 video tokens, so "text" would be
     the rest) is one error naming the grid and the right token count, and a wrong layout (SD3's
     text is last; "text,video" given) one error naming the right layout; neither writes a trace;
  4. timesteps: a model given t / 1000 (SD3's pipeline passes t in [0, 1000]; here the generic
     model is given sigma) records /timestep = 1000 t and /sigma = t without a scheduler (detected),
     with timestep_scale=1000, and with a FlowMatch scheduler: its sigmas (not 0.001 each);
  5. joint padding masks (valid queries AND valid keys, HunyuanVideo-1.5's): capture drops the
     padded tokens (the trace = the unpadded call's Q/K/V); dsgap.torch.attention on such a mask
     (a HunyuanVideo model whose padded text is given as a q-AND-k mask through a processor
     wrapper) equals torch under policy "dense" exactly and takes every call (no fallback).
"""
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import dsgap  # noqa: E402
from pyhelp import Checker, randomize  # noqa: E402

torch.manual_seed(0)
torch.set_grad_enabled(False)
ck = Checker("generic")


def tiny_wan():
    import diffusers as D
    m = D.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                out_channels=4, text_dim=24, freq_dim=16, ffn_dim=32, num_layers=3)
    randomize(m)
    x, txt = torch.randn(1, 4, 2, 4, 6), torch.randn(1, 5, 24)
    return m.eval(), lambda t: dict(hidden_states=x, timestep=torch.tensor([t]), encoder_hidden_states=txt)


def tiny_sd3():
    import diffusers as D
    m = D.SD3Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_layers=3, attention_head_dim=8,
                                num_attention_heads=2, joint_attention_dim=24, caption_projection_dim=16,
                                pooled_projection_dim=8, out_channels=4, pos_embed_max_size=16)
    randomize(m)
    x, txt, pooled = torch.randn(1, 4, 8, 8), torch.randn(1, 6, 24), torch.randn(1, 8)
    return m.eval(), lambda t: dict(hidden_states=x, encoder_hidden_states=txt, pooled_projections=pooled,
                                    timestep=torch.tensor([t]))


def spy(model, fn):
    """the SDPA inputs of every call of fn(), in order"""
    calls, orig = [], torch.nn.functional.scaled_dot_product_attention

    def f(q, k, v, *a, **kw):
        calls.append((q.clone(), k.clone(), v.clone()))
        return orig(q, k, v, *a, **kw)
    torch.nn.functional.scaled_dot_product_attention = f
    try:
        fn()
    finally:
        torch.nn.functional.scaled_dot_product_attention = orig
    return calls


def describe_part():
    m, kw = tiny_wan()
    d = dsgap.describe(m, **kw(500.0))
    print(d)
    selfs = [r for r in d if r["kind"] == "self"]
    cross = [r for r in d if r["kind"] == "cross"]
    ck.check("describe Wan2.1: one self-attention layer per block (blocks.i.attn1 = layer i), cross attention "
             "without a layer, no text", [r["layer"] for r in selfs] == [0, 1, 2] and
             [r["module"] for r in selfs] == [f"blocks.{i}.attn1" for i in range(3)] and len(cross) == 3 and
             all(r["layer"] is None for r in cross) and all(r["text_tokens"] == 0 for r in selfs) and
             d.video_tokens == 2 * 2 * 3 and selfs[0]["heads"] == 2 and selfs[0]["head_dim"] == 16, str(d))
    m, kw = tiny_sd3()
    d = dsgap.describe(m, **kw(500.0))
    print(d)
    ck.check("describe SD3: every block's attn a joint site, 6 text tokens, the text last (layout video,text, "
             "read from V), 16 video tokens", len(d) == 3 and all(r["kind"] == "joint" for r in d) and
             [r["layer"] for r in d] == [0, 1, 2] and all(r["text_tokens"] == 6 for r in d) and
             d.layout == "video,text" and d.video_tokens == 16, str(d))
    from test_families import models
    hv, kw15, grid, text = models("hunyuanvideo15")
    randomize(hv)
    d = dsgap.describe(hv.eval(), **kw15(500.0))
    print(d)
    joint = [r for r in d if r["kind"] == "joint"]
    ck.check("describe HunyuanVideo-1.5: video tokens from the latent and patch sizes (48), joint sites with the "
             "text, second text and image (14 tokens, a joint padding mask, text last), the text refiner's "
             "self-attention listed first", d.video_tokens == 48 and len(joint) == 2 and
             all(r["text_tokens"] == 14 and r["mask"] == "joint padding" and r["text_at"] == "last" for r in joint)
             and d.rows[0]["module"].startswith("context_embedder") and d.layout == "video,text", str(d))
    return d


def capture_part(work):
    m, kw = tiny_wan()
    pf, pg = os.path.join(work, "wan_family.h5"), os.path.join(work, "wan_generic.h5")
    with dsgap.capture(m, pf, layers=[1, 2], heads=[0, 1], dtype="float32", progress=False):
        m(**kw(500.0))
    with dsgap.capture(m, pg, layers=[1, 2], heads=[0, 1], layout="video", grid=(2, 2, 3), dtype="float32",
                       progress=False):
        m(**kw(500.0))
    a, b = dsgap.read_trace(pf), dsgap.read_trace(pg)
    ck.check("generic Wan2.1 at layers [1, 2] = the family mode's blocks 1 and 2 (not SDPA calls 1 and 2)",
             all(np.array_equal(x, y) for x, y in zip(a[1:], b[1:])) and list(b[0]["layer_index"]) == [1, 2],
             f"layer_index {list(b[0]['layer_index'])}")
    m, kw = tiny_sd3()
    calls = spy(m, lambda: m(**kw(500.0)))
    p = os.path.join(work, "sd3.h5")
    with dsgap.capture(m, p, layers=[0, 2], layout="video,text", grid=(1, 4, 4), dtype="float32", progress=False):
        m(**kw(500.0))
    meta, q, k, v = dsgap.read_trace(p)
    ok = True
    for pos, blk in enumerate((0, 2)):
        cq = calls[blk][0][0]          # (H, S, D): video then text
        want = torch.cat([cq[:, 16:], cq[:, :16]], 1).numpy()
        ok &= np.array_equal(q[0, pos], want)
    ck.check("generic SD3 with describe's layout and grid: layer i = block i's SDPA query, text moved first",
             ok and meta["text_tokens"] == 6 and tuple(meta["grid"]) == (1, 4, 4))
    wrong = os.path.join(work, "sd3_layout.h5")
    try:
        with dsgap.capture(m, wrong, layers=[1], layout="text,video", grid=(1, 4, 4), progress=False):
            m(**kw(500.0))
        ck.check("a layout that puts the text where it is not is refused", False)
    except dsgap.CaptureError as e:
        ck.check("layout 'text,video' on SD3 (its text last): one error naming the right layout, no trace written",
                 "pass layout='video,text'" in str(e) and not os.path.exists(wrong), str(e))
    bad = os.path.join(work, "sd3_bad.h5")
    try:
        with dsgap.capture(m, bad, layers=[0], layout="video,text", grid=(1, 2, 4), progress=False):
            m(**kw(500.0))
        ck.check("a grid that does not match the video tokens is refused", False)
    except dsgap.CaptureError as e:
        ck.check("a grid that does not match the video tokens (8 of 16) under a joint layout: one error naming "
                 "the grid and the right count, no trace written", "grid does not match" in str(e) and
                 "F*H*W = 16" in str(e) and not os.path.exists(bad), str(e))


class SigmaModel(torch.nn.Module):
    """a model given sigma = t / 1000 (FLUX, Qwen-Image, FLUX.2): one attention module"""

    class Attention(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.scaled_dot_product_attention(x, x, x)

    def __init__(self):
        super().__init__()
        self.attn = SigmaModel.Attention()

    def forward(self, hidden_states, timestep):
        return self.attn(hidden_states) * timestep


def timestep_part(work):
    from diffusers import FlowMatchEulerDiscreteScheduler
    sch = FlowMatchEulerDiscreteScheduler(shift=3.0)
    sch.set_timesteps(4)
    m, x = SigmaModel(), torch.randn(1, 2, 12, 8)
    runs = {}
    for name, kw in (("detected", {}), ("timestep_scale", dict(timestep_scale=1000)), ("scheduler", dict(scheduler=sch))):
        p = os.path.join(work, f"sigma_{name}.h5")
        with dsgap.capture(m, p, layers=[0], layout="video", grid=(1, 3, 4), progress=False, **kw):
            for t in sch.timesteps:
                m(x, (t / 1000).reshape(1))
        runs[name] = dsgap.read_trace(p)[0]
    want_t = sch.timesteps.numpy().astype(np.float64)
    want_s = sch.sigmas[:4].numpy().astype(np.float64)
    for name, meta in runs.items():
        ck.check(f"a model given t / 1000, {name}: /timestep = the scheduler's timesteps, /sigma its sigmas",
                 np.allclose(meta["timestep"], want_t, rtol=1e-5) and np.allclose(meta["sigma"], want_s, rtol=1e-4),
                 f"timestep {np.round(meta['timestep'], 2)}, sigma {np.round(meta['sigma'], 4)}")
    try:
        dsgap.capture(m, os.path.join(work, "x.h5"), layout="video", grid=(1, 3, 4), timestep_scale=-1)
        ck.check("a bad timestep_scale is refused", False)
    except dsgap.CaptureError as e:
        ck.check("a bad timestep_scale is refused, saying what to pass", "timestep_scale" in str(e) and
                 "1000" in str(e), str(e))


class MaskedJoint(torch.nn.Module):
    """self-attention over [text (2 of 4 padded), video] under a valid-queries-AND-keys mask"""

    class Attention(torch.nn.Module):
        def forward(self, x, mask):
            return torch.nn.functional.scaled_dot_product_attention(x, x * 0.7, x, attn_mask=mask)

    def __init__(self):
        super().__init__()
        self.attn = MaskedJoint.Attention()

    def forward(self, hidden_states, encoder_hidden_states, encoder_attention_mask, timestep):
        x = torch.cat([encoder_hidden_states, hidden_states], 2)
        valid = torch.cat([encoder_attention_mask, torch.ones(1, hidden_states.shape[2], dtype=torch.bool)], 1)
        mask = valid[:, None, :, None] & valid[:, None, None, :]
        return self.attn(x, mask)


def mask_part(work):
    m = MaskedJoint()
    vid, txt = torch.randn(1, 2, 12, 8), torch.randn(1, 2, 4, 8)
    tm = torch.tensor([[True, True, False, False]])
    p = os.path.join(work, "joint_mask.h5")
    with dsgap.capture(m, p, layers=[0], layout="text,video", grid=(1, 3, 4), dtype="float32", progress=False):
        m(vid, txt, tm, torch.tensor([500.0]))
    meta, q, k, v = dsgap.read_trace(p)
    want = torch.cat([txt[:, :, :2], vid], 2)[0].numpy()
    ck.check("a joint padding mask (valid queries AND keys) is taken: the 2 padded text tokens dropped",
             meta["text_tokens"] == 2 and np.array_equal(q[0, 0], want) and np.array_equal(k[0, 0], want * np.float32(0.7)))
    # the processor: HunyuanVideo with its padded text given as a q-AND-k mask
    from test_families import models
    hv, kw, grid, text = models("hunyuanvideo")
    randomize(hv)
    hv.eval()
    orig = torch.nn.functional.scaled_dot_product_attention

    def joint_mask(query, key, value, attn_mask=None, **a):   # key padding -> valid queries AND keys (HunyuanVideo-1.5)
        q, k, v = query, key, value
        if attn_mask is not None and attn_mask.dtype == torch.bool and attn_mask.shape[-2] == 1:
            kv = attn_mask.reshape(attn_mask.shape[0], -1)
            attn_mask = kv[:, None, :, None] & kv[:, None, None, :]
            o = orig(q, k, v, attn_mask=attn_mask, **a)
            return torch.nan_to_num(o)   # fully masked (padded) query rows: 0, not NaN
        return orig(q, k, v, attn_mask=attn_mask, **a)
    torch.nn.functional.scaled_dot_product_attention = joint_mask
    try:
        ref = hv(**kw(900.0))[0]
        with dsgap.torch.attention(hv, policy="dense", dense_sites="dsgap", branches=1) as a:
            out = hv(**kw(900.0))[0]
        s = a.stats()
    finally:
        torch.nn.functional.scaled_dot_product_attention = orig
    e = ((out - ref).abs().max() / ref.abs().max()).item()
    ck.check("dsgap.torch.attention on HunyuanVideo with a valid-queries-AND-keys mask: every call taken, "
             "'dense' = torch", s["fallback_calls"] == 0 and s["calls"] > 0 and e < 1e-5,
             f"max rel {e:.1e}, units {s['calls']}, fallback {s['fallback_calls']}")


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    describe_part()
    capture_part(work)
    timestep_part(work)
    mask_part(work)
    return ck.done()


if __name__ == "__main__":
    sys.exit(main())

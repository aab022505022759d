"""test_families.py: dsgap.capture on a tiny random-initialised model of each diffusers family (CPU).

  python test_families.py FAMILY WORKDIR      (FAMILY: wan, wan22, hunyuanvideo, cogvideox, mochi, ltx, ltx2, flux, skyreels, cosmos, sd3,
                                               qwenimage, flux2)

Per family, two denoising steps (different timesteps), a selection of layers and heads:
  1. a float32 trace: softmax(Q K^T / sqrt d) V in fp64 from the recorded Q/K/V equals the model's own
     attention output, taken at the output projection's input (to_out / to_add_out / a single-stream
     block's proj_out), for every recorded step, layer, head and token (max rel error < 1e-5);
  2. the replay's dense attention (tests/py/replay_dense, the CPU backend of `dsgap replay`) on that
     trace: rel-L2 < 1e-3 against the model's output; `dsgap replay --policies dense` runs on it;
  3. the default bf16 trace holds exactly the bf16 rounding of the float32 one;
  4. `dsgap info --check` accepts both; the trace's grid, text_tokens, step_index, timestep agree.
Environment: DSGAP (the dsgap binary), REPLAY_DENSE (tests/py/replay_dense).
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import dsgap  # noqa: E402
from pyhelp import Checker, attention_ref, randomize  # noqa: E402

torch.manual_seed(0)
torch.set_grad_enabled(False)


def models(fam):
    """(model, forward kwargs for one call given a timestep, collectors) for a tiny model of fam."""
    import diffusers as D
    if fam in ("wan", "wan22"):
        m = D.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                    out_channels=4, text_dim=24, freq_dim=16, ffn_dim=32, num_layers=3)
        x, txt = torch.randn(1, 4, 3, 6, 8), torch.randn(1, 5, 24)

        def kw(t):
            tt = torch.full((1,), float(t)) if fam == "wan" else torch.full((1, 3 * 3 * 4), float(t))  # 2.2: per token
            return dict(hidden_states=x, timestep=tt, encoder_hidden_states=txt)
        return m, kw, (3, 3, 4), 0
    if fam == "hunyuanvideo":
        m = D.HunyuanVideoTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                                             num_layers=2, num_single_layers=2, num_refiner_layers=1, patch_size=2,
                                             patch_size_t=1, text_embed_dim=24, pooled_projection_dim=8,
                                             rope_axes_dim=(4, 6, 6))
        x, txt = torch.randn(1, 4, 3, 6, 8), torch.randn(1, 7, 24)
        mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0]], dtype=torch.bool)  # 2 padded text tokens: dropped
        pooled = torch.randn(1, 8)
        return m, lambda t: dict(hidden_states=x, timestep=torch.full((1,), float(t)), encoder_hidden_states=txt,
                                 encoder_attention_mask=mask, pooled_projections=pooled,
                                 guidance=torch.full((1,), 4000.0)), (3, 3, 4), 5
    if fam == "cogvideox":
        m = D.CogVideoXTransformer3DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
                                          time_embed_dim=16, text_embed_dim=24, num_layers=2, sample_width=8,
                                          sample_height=6, sample_frames=9, patch_size=2, max_text_seq_length=6,
                                          use_rotary_positional_embeddings=True)
        x, txt = torch.randn(1, 3, 4, 6, 8), torch.randn(1, 6, 24)
        from diffusers.models.embeddings import get_3d_rotary_pos_embed
        rope = get_3d_rotary_pos_embed(16, ((0, 0), (3, 4)), (3, 4), 3)
        return m, lambda t: dict(hidden_states=x, encoder_hidden_states=txt, timestep=torch.full((1,), float(t)),
                                 image_rotary_emb=rope), (3, 3, 4), 6
    if fam == "mochi":
        m = D.MochiTransformer3DModel(patch_size=2, num_attention_heads=2, attention_head_dim=16, num_layers=2,
                                      pooled_projection_dim=16, in_channels=4, text_embed_dim=24, time_embed_dim=16,
                                      max_sequence_length=6)
        x, txt = torch.randn(1, 4, 3, 6, 8), torch.randn(1, 6, 24)
        mask = torch.ones(1, 6, dtype=torch.bool)
        return m, lambda t: dict(hidden_states=x, encoder_hidden_states=txt, timestep=torch.full((1,), float(t)),
                                 encoder_attention_mask=mask), (3, 3, 4), 6
    if fam == "ltx":
        m = D.LTXVideoTransformer3DModel(in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16,
                                         cross_attention_dim=32, num_layers=2, caption_channels=24)
        x, txt = torch.randn(1, 3 * 3 * 4, 8), torch.randn(1, 5, 24)
        return m, lambda t: dict(hidden_states=x, encoder_hidden_states=txt, timestep=torch.full((1,), float(t)),
                                 encoder_attention_mask=torch.ones(1, 5), num_frames=3, height=3, width=4), (3, 3, 4), 0
    if fam == "ltx2":   # audio-video blocks: the video self-attention only; audio streams run beside it
        m = D.LTX2VideoTransformer3DModel(in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16,
                                          cross_attention_dim=32, audio_in_channels=8, audio_out_channels=8,
                                          audio_num_attention_heads=2, audio_attention_head_dim=8,
                                          audio_cross_attention_dim=16, num_layers=2, caption_channels=24)
        x, ax, txt, atxt = torch.randn(1, 3 * 3 * 4, 8), torch.randn(1, 5, 8), torch.randn(1, 5, 24), torch.randn(1, 5, 24)
        return m, lambda t: dict(hidden_states=x, audio_hidden_states=ax, encoder_hidden_states=txt,
                                 audio_encoder_hidden_states=atxt, timestep=torch.full((1,), float(t)),
                                 encoder_attention_mask=torch.ones(1, 5), audio_encoder_attention_mask=torch.ones(1, 5),
                                 num_frames=3, height=3, width=4, audio_num_frames=5), (3, 3, 4), 0
    if fam == "flux":
        m = D.FluxTransformer2DModel(patch_size=1, in_channels=8, num_layers=2, num_single_layers=2, attention_head_dim=16,
                                     num_attention_heads=2, joint_attention_dim=24, pooled_projection_dim=8,
                                     axes_dims_rope=(4, 6, 6))
        h, w = 4, 5
        ids = torch.zeros(h, w, 3)
        ids[..., 1], ids[..., 2] = torch.arange(h)[:, None], torch.arange(w)[None, :]
        x, txt, pooled = torch.randn(1, h * w, 8), torch.randn(1, 6, 24), torch.randn(1, 8)
        return m, lambda t: dict(hidden_states=x, encoder_hidden_states=txt, pooled_projections=pooled,
                                 timestep=torch.full((1,), float(t) / 1000), img_ids=ids.reshape(-1, 3),
                                 txt_ids=torch.zeros(6, 3)), (1, h, w), 6
    if fam == "skyreels":
        m = D.SkyReelsV2Transformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16,
                                           in_channels=4, out_channels=4, text_dim=24, freq_dim=16, ffn_dim=32,
                                           num_layers=2)
        x, txt = torch.randn(1, 4, 3, 6, 8), torch.randn(1, 5, 24)
        return m, lambda t: dict(hidden_states=x, timestep=torch.full((1,), float(t)), encoder_hidden_states=txt), \
            (3, 3, 4), 0
    if fam == "cosmos":
        m = D.CosmosTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                                       num_layers=2, text_embed_dim=24, adaln_lora_dim=8, max_size=(8, 16, 16),
                                       patch_size=(1, 2, 2), concat_padding_mask=False, extra_pos_embed_type=None)
        x, txt = torch.randn(1, 4, 3, 6, 8), torch.randn(1, 5, 24)
        return m, lambda t: dict(hidden_states=x, timestep=torch.full((1,), float(t)), encoder_hidden_states=txt), \
            (3, 3, 4), 0
    if fam == "sd3":
        m = D.SD3Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=16,
                                    num_attention_heads=2, joint_attention_dim=24, caption_projection_dim=32,
                                    pooled_projection_dim=8, out_channels=4, pos_embed_max_size=16,
                                    dual_attention_layers=(0,))   # SD3.5's image-only attn2 in block 0: not a layer
        x, txt, pooled = torch.randn(1, 4, 6, 8), torch.randn(1, 6, 24), torch.randn(1, 8)
        return m, lambda t: dict(hidden_states=x, encoder_hidden_states=txt, pooled_projections=pooled,
                                 timestep=torch.full((1,), float(t))), (1, 3, 4), 6
    if fam == "qwenimage":
        m = D.QwenImageTransformer2DModel(patch_size=2, in_channels=16, out_channels=4, num_layers=2,
                                          attention_head_dim=16, num_attention_heads=2, joint_attention_dim=24,
                                          axes_dims_rope=(4, 6, 6))
        h, w = 4, 5
        x, txt = torch.randn(1, h * w, 16), torch.randn(1, 7, 24)
        mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0]])   # one padded text token: dropped
        return m, lambda t: dict(hidden_states=x, encoder_hidden_states=txt, encoder_hidden_states_mask=mask,
                                 timestep=torch.full((1,), float(t) / 1000), img_shapes=[(1, h, w)]), (1, h, w), 6
    if fam == "flux2":
        m = D.Flux2Transformer2DModel(patch_size=1, in_channels=8, num_layers=2, num_single_layers=2,
                                      attention_head_dim=16, num_attention_heads=2, joint_attention_dim=24,
                                      axes_dims_rope=(4, 4, 4, 4), timestep_guidance_channels=16, guidance_embeds=False)
        h, w = 4, 5
        ids = torch.zeros(h * w, 4)
        ids[:, 1], ids[:, 2] = torch.arange(h).repeat_interleave(w), torch.arange(w).repeat(h)
        x, txt = torch.randn(1, h * w, 8), torch.randn(1, 6, 24)
        return m, lambda t: dict(hidden_states=x, encoder_hidden_states=txt, timestep=torch.full((1,), float(t) / 1000),
                                 img_ids=ids[None], txt_ids=torch.zeros(1, 6, 4)), (1, h, w), 6
    if fam == "hunyuanvideo15":
        m = D.HunyuanVideo15Transformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                                               num_layers=2, num_refiner_layers=1, patch_size=1, patch_size_t=1,
                                               text_embed_dim=24, text_embed_2_dim=16, image_embed_dim=8,
                                               rope_axes_dim=(4, 6, 6), target_size=64, task_type="t2v")
        x, txt, txt2 = torch.randn(1, 4, 2, 4, 6), torch.randn(1, 7, 24), torch.randn(1, 3, 16)
        mask, mask2 = torch.tensor([[1, 1, 1, 1, 1, 0, 0]]), torch.tensor([[1, 1, 0]])   # padded: dropped
        img = torch.randn(1, 4, 8)
        return m, lambda t: dict(hidden_states=x, timestep=torch.full((1,), float(t)), encoder_hidden_states=txt,
                                 encoder_attention_mask=mask, encoder_hidden_states_2=txt2,
                                 encoder_attention_mask_2=mask2, image_embeds=img), (2, 4, 6), 11
    raise SystemExit(f"unknown family {fam}")


def collectors(m, store):
    """Hooks storing each recorded attention layer's output at its output projection's input
    (batch item 0): store[(layer, "out" | "add" | "proj")] = [per call]. "out": to_out[0] (video
    tokens; CogVideoX: all), "add": to_add_out (text tokens), "proj": a single-stream block's
    proj_out, the attention's columns (all tokens)."""
    hooks = []
    for lid, (name, attn, order) in enumerate(dsgap.FAMILIES[type(m).__name__].attention(m)):
        def grab(key, cols=None, lid=lid):
            def hook(mod, args):
                x = args[0][0]
                store.setdefault((lid, key), []).append((x[:, :cols] if cols else x).clone())
            return hook
        if getattr(attn, "to_out", None) is None:
            block = m.get_submodule(name.rsplit(".", 1)[0])
            inner = attn.heads * (attn.head_dim if hasattr(attn, "head_dim") else attn.inner_dim // attn.heads)
            hooks.append(block.proj_out.register_forward_pre_hook(grab("proj", inner)))
            continue
        out = attn.to_out[0] if isinstance(attn.to_out, torch.nn.ModuleList) else attn.to_out
        # FLUX.2's single-stream to_out takes [attention, MLP] columns: the attention's come first
        hooks.append(out.register_forward_pre_hook(grab("out")))
        if getattr(attn, "to_add_out", None) is not None:
            hooks.append(attn.to_add_out.register_forward_pre_hook(grab("add")))
    return hooks


def model_output(m, store, lid, call, video, text):
    """layer lid's attention output of forward call `call` in the trace's order: [text kept, video]"""
    order = dsgap.FAMILIES[type(m).__name__].attention(m)[lid][2]
    if (lid, "proj") in store:
        y = store[(lid, "proj")][call]
        return torch.cat([y[video:video + text], y[:video]]) if order == "video,text" else y
    y = store[(lid, "out")][call]
    if (lid, "add") in store:
        return torch.cat([store[(lid, "add")][call][:text], y])
    return y


def main():
    fam, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    ck = Checker(fam)
    m, kw, grid, text = models(fam)
    randomize(m)
    m.eval()
    layers, heads, steps = [0, len(dsgap.FAMILIES[type(m).__name__].attention(m)) - 1], [1], [0, 1]
    ts = [900.0, 500.0]
    store = {}
    hooks = collectors(m, store)
    p32, p16 = os.path.join(work, "t32.h5"), os.path.join(work, "t16.h5")
    with dsgap.capture(m, p32, steps=steps, layers=layers, heads=heads, dtype="float32", progress=False):
        for t in ts:
            m(**kw(t))
    for h in hooks:
        h.remove()
    with dsgap.capture(m, p16, steps=steps, layers=layers, heads=heads, progress=False):
        for t in ts:
            m(**kw(t))
    meta, q, k, v = dsgap.read_trace(p32)
    S, L, H, T, Dh = q.shape
    video = grid[0] * grid[1] * grid[2]
    ck.check("trace grid is the video grid after patchify", tuple(meta["grid"]) == grid, meta["grid"])
    ck.check("trace text_tokens: the text keys attended to", meta["text_tokens"] == text and T == video + text,
             (meta["text_tokens"], T))
    ck.check("step_index are the denoising steps", list(meta["step_index"]) == steps, meta["step_index"])
    ck.check("timestep recorded", np.allclose(meta["timestep"], ts), meta["timestep"])
    ck.check("sigma recorded", np.allclose(meta["sigma"], np.array(ts) / 1000), meta["sigma"])
    cfg = json.loads(meta["config"])
    ck.check("config names the family and the token order", cfg["capture"]["trace_order"] == "text,video")
    # model outputs per layer in the trace's token order, batch item 0
    worst, outs = 0.0, np.zeros((S, L, H, T, Dh), np.float64)
    mask = np.zeros(outs.shape, bool)
    for si in range(S):
        for li, lid in enumerate(layers):
            y = model_output(m, store, lid, si, video, text)
            rows = slice(T - y.shape[0], T)  # a last joint block without text output: its video rows
            y = y.reshape(y.shape[0], -1, Dh)[:, heads].permute(1, 0, 2).double().numpy()
            for hi in range(H):
                o = attention_ref(q[si, li, hi], k[si, li, hi], v[si, li, hi])[rows]
                worst = max(worst, np.abs(o - y[hi]).max() / np.abs(y[hi]).max())
                outs[si, li, hi, rows] = y[hi]
                mask[si, li, hi, rows] = True
    ck.check("softmax(QK^T/sqrt d)V of the recorded tensors = the model's attention output (fp32)", worst < 1e-5,
             f"max rel {worst:.2e}")
    dsg, rd = os.environ["DSGAP"], os.environ["REPLAY_DENSE"]
    r = subprocess.run([rd, p32, os.path.join(work, "o.f32")], capture_output=True, text=True)
    ck.check("replay_dense runs", r.returncode == 0, r.stderr)
    if r.returncode == 0:
        o = np.fromfile(os.path.join(work, "o.f32"), np.float32).reshape(outs.shape)
        rel = np.linalg.norm((o - outs)[mask]) / np.linalg.norm(outs[mask])
        ck.check("the replay's dense attention on the trace: rel-L2 < 1e-3 against the model", rel < 1e-3, f"{rel:.2e}")
    r = subprocess.run([dsg, "replay", p32, "--policies", "dense", "--out", os.path.join(work, "rep"), "--quiet"],
                       capture_output=True, text=True)
    ck.check("dsgap replay --policies dense runs on the trace", r.returncode == 0, r.stderr)
    _, q16, k16, v16 = dsgap.read_trace(p16)
    exact = all(np.array_equal(a16, dsgap.bf16_to_f32(dsgap.f32_to_bf16(a))) for a16, a in ((q16, q), (k16, k), (v16, v)))
    ck.check("the bf16 trace is the bf16 rounding of the fp32 one", exact)
    for p in (p32, p16):
        r = subprocess.run([dsg, "info", "--check", p], capture_output=True, text=True)
        ck.check(f"dsgap info --check accepts the {os.path.basename(p)} trace", r.returncode == 0 and "checked" in r.stdout,
                 r.stderr)
    return ck.done()


if __name__ == "__main__":
    sys.exit(main())

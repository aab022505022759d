"""wan_torch.py: a compact, independent PyTorch forward of the Wan2.1 text-to-video transformer in
the original key layout (Wan-Video/Wan2.1 wan/modules/model.py names; reference:
../shared/reference/dit-architectures.md §1.4-1.6). Written for checking dsgap's C engine
(tests/torch_ref/compare_diffusers.py); it shares no code with dsgap or with tests/wan_ref.py.

  forward(W, cfg, x, t, context, record=None, dtype=torch.float32) -> out (C_out, F, H, W) float32

W: dict original name -> tensor (any float dtype, on any one device: the forward runs there; `load`
strips a "model.diffusion_model." prefix);
cfg: dim, ffn_dim, freq_dim, text_dim, in_dim, out_dim, num_heads, num_layers, patch_size, eps,
text_len; x (C, F, H, W); t a number (the model's 0..1000 scale); context (L, text_dim), zero-padded
here to text_len rows. record (a dict) receives hidden.<l> (N, D) after each block, q/k/v.<l>
(H, N, d) as attention receives them (post-qk-norm, post-RoPE) and out.

dtype: torch.float32 runs everything in fp32 (RoPE and the time sinusoid in fp64 as the original);
torch.bfloat16 follows the original's autocast(bfloat16) mixed precision (§1.6): patch embedding,
the text MLP, q/k/v/o, cross-attention and FFN linears and both attentions in bf16 (bf16 inputs and
weights, bf16 outputs); the time MLP and projection, LayerNorm/RMSNorm statistics, modulation,
gated residual adds (fp32 residual stream) and the head in fp32; RoPE in fp64.
dtype "mixed": dsgap's GPU recipe (docs/spec.md §7) done naively: the same linears and attentions take
bf16-rounded operands (activations and weights; biases fp32) and compute and output in fp32 (TF32 off);
everything else as in bfloat16 mode. "mixed-head-bf16": mixed, but the head's linear on bf16 operands
too (what dsgap's GPU path did before 2026-12-03, unlike the original's fp32 head).

Steps: Conv3d patch embedding (kernel = stride = patch); sinusoid cos-first of t; time MLP
(Linear, SiLU, Linear) -> e; e0 = Linear(SiLU(e)) as (6, D); text MLP (Linear, GELU-tanh, Linear);
per block mod = modulation + e0: non-affine LayerNorm * (1 + scale) + shift, q/k RMSNorm over the
full width, 3D RoPE on interleaved pairs with the (d - 4 (d//6), 2 (d//6), 2 (d//6)) split,
SDPA, x += o * gate; affine LayerNorm (norm3) -> cross-attention (RMSNorm q/k, no RoPE), x += o;
non-affine LayerNorm modulated -> GELU-tanh FFN, x += y * gate; head: non-affine LayerNorm with
shift/scale = head.modulation + e, Linear, unpatchify (c fastest in the output vector).
"""

import torch
import torch.nn.functional as F

PREFIX = "model.diffusion_model."


def load(path):
    """original-layout safetensors file -> dict of tensors (prefix stripped)"""
    from safetensors.torch import load_file
    W = load_file(path)
    return {(k[len(PREFIX):] if k.startswith(PREFIX) else k): v for k, v in W.items()}


def sinusoid(dim, t):
    """cos first, fp64 then fp32 (wan/modules/model.py sinusoidal_embedding_1d)"""
    half = dim // 2
    pos = torch.tensor([float(t)], dtype=torch.float64)
    freqs = torch.pow(10000.0, -torch.arange(half, dtype=torch.float64).div(half))
    a = torch.outer(pos, freqs)
    return torch.cat([torch.cos(a), torch.sin(a)], dim=1).float()  # (1, dim)


def rope_table(d, grid, theta=10000.0, max_len=1024):
    """complex128 (N, d/2): frame pairs, then row pairs, then column pairs"""
    def params(dim):
        f = 1.0 / torch.pow(theta, torch.arange(0, dim, 2, dtype=torch.float64).div(dim))
        return torch.polar(torch.ones(max_len, dim // 2, dtype=torch.float64),
                           torch.outer(torch.arange(max_len, dtype=torch.float64), f))
    dt, dh = d - 4 * (d // 6), 2 * (d // 6)
    ft, fh, fw = params(dt), params(dh), params(dh)
    f, h, w = grid
    return torch.cat([ft[:f].view(f, 1, 1, -1).expand(f, h, w, -1),
                      fh[:h].view(1, h, 1, -1).expand(f, h, w, -1),
                      fw[:w].view(1, 1, w, -1).expand(f, h, w, -1)], dim=-1).reshape(f * h * w, -1)


def rope(x, table):
    """x (N, H, d): pairs (2i, 2i+1) as complex numbers times table (N, d/2); fp64 -> x's dtype"""
    n, h, d = x.shape
    xc = torch.view_as_complex(x.double().reshape(n, h, d // 2, 2))
    return torch.view_as_real(xc * table[:, None, :]).reshape(n, h, d).to(x.dtype)


class Ops:
    """the linears and attention in the compute dtype (or mixed: bf16 operands, fp32 arithmetic), the
    rest in fp32"""
    def __init__(self, W, dtype):
        self.W, self.mixed = W, dtype in ("mixed", "mixed-head-bf16")
        self.head_fp32 = dtype != "mixed-head-bf16"
        self.dt = torch.float32 if self.mixed else dtype

    def operand(self, x, fp32=False):
        """x as a linear's or attention's operand"""
        if fp32:
            return x.float()
        return x.to(torch.bfloat16).float() if self.mixed else x.to(self.dt)

    def lin(self, name, x, fp32=False):
        w = self.operand(self.W[name + ".weight"], fp32)
        b = self.W.get(name + ".bias")
        if b is not None:
            b = b.float() if fp32 or self.mixed else b.to(self.dt)
        return F.linear(self.operand(x, fp32), w, b)

    def attn(self, q, k, v):
        """(N, H, d) each -> (Nq, H*d), softmax(q k^T / sqrt(d)) v"""
        # (1, H, N, d): SDPA's flash and cuDNN kernels take 4-D inputs only (3-D falls back to the
        # math kernel, which holds the H x N x N scores)
        o = F.scaled_dot_product_attention(*(self.operand(t.transpose(0, 1)[None]) for t in (q, k, v)))[0]
        return o.transpose(0, 1).reshape(q.shape[0], -1)


def layer_norm(x, eps, w=None, b=None):
    return F.layer_norm(x.float(), (x.shape[-1],), None if w is None else w.float(),
                        None if b is None else b.float(), eps)


def rms_norm(x, w, eps):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.float()


@torch.no_grad()
def forward(W, cfg, x, t, context, record=None, dtype=torch.float32):
    D, H, eps = cfg["dim"], cfg["num_heads"], cfg["eps"]
    d = D // H
    pt, ph, pw = cfg["patch_size"]
    op = Ops(W, dtype)
    dev = W["patch_embedding.weight"].device  # the weights' device (cpu, or cuda for gpu_dit.py)
    x = torch.as_tensor(x).float().to(dev)
    C, Fr, Hh, Ww = x.shape
    grid = (Fr // pt, Hh // ph, Ww // pw)
    n = grid[0] * grid[1] * grid[2]
    # patch embedding (Conv3d), tokens in (f, h, w) order, w fastest
    pb = W["patch_embedding.bias"]
    h = F.conv3d(op.operand(x[None]), op.operand(W["patch_embedding.weight"]), pb.float() if op.mixed else pb.to(op.dt),
                 stride=(pt, ph, pw))
    h = h.flatten(2).transpose(1, 2)[0].float()  # (N, D); fp32 after the first gated add anyway
    # time embedding (fp32 region)
    e = op.lin("time_embedding.2", F.silu(op.lin("time_embedding.0", sinusoid(cfg["freq_dim"], t).to(dev), True)), True)
    e0 = op.lin("time_projection.1", F.silu(e), True).view(6, D)
    e = e[0]
    # text: zero-padded to text_len rows
    ctx = torch.as_tensor(context).float().to(dev)
    L = cfg.get("text_len") or ctx.shape[0]
    ctx = torch.cat([ctx, ctx.new_zeros(L - ctx.shape[0], ctx.shape[1])])
    c = op.lin("text_embedding.2", F.gelu(op.lin("text_embedding.0", ctx), approximate="tanh"))
    table = rope_table(d, grid).to(dev)
    for l in range(cfg["num_layers"]):
        b = "blocks.%d." % l
        mod = W[b + "modulation"].float()[0] + e0  # (6, D)
        y = layer_norm(h, eps) * (1 + mod[1]) + mod[0]
        q = rms_norm(op.lin(b + "self_attn.q", y), W[b + "self_attn.norm_q.weight"], eps).view(n, H, d)
        k = rms_norm(op.lin(b + "self_attn.k", y), W[b + "self_attn.norm_k.weight"], eps).view(n, H, d)
        v = op.lin(b + "self_attn.v", y).view(n, H, d)
        q, k = rope(q, table), rope(k, table)
        if record is not None:
            for nm, a in (("q", q), ("k", k), ("v", v)):
                record["%s.%d" % (nm, l)] = a.float().transpose(0, 1).contiguous()
        o = op.lin(b + "self_attn.o", op.attn(q, k, v))
        h = h + o.float() * mod[2]
        y = layer_norm(h, eps, W[b + "norm3.weight"], W[b + "norm3.bias"])
        q = rms_norm(op.lin(b + "cross_attn.q", y), W[b + "cross_attn.norm_q.weight"], eps).view(n, H, d)
        k = rms_norm(op.lin(b + "cross_attn.k", c), W[b + "cross_attn.norm_k.weight"], eps).view(L, H, d)
        v = op.lin(b + "cross_attn.v", c).view(L, H, d)
        h = h + op.lin(b + "cross_attn.o", op.attn(q, k, v)).float()
        y = layer_norm(h, eps) * (1 + mod[4]) + mod[3]
        f = op.lin(b + "ffn.2", F.gelu(op.lin(b + "ffn.0", y), approximate="tanh"))
        h = h + f.float() * mod[5]
        if record is not None:
            record["hidden.%d" % l] = h.clone()
    # head (fp32 region): head.modulation + e (not e0)
    s = W["head.modulation"].float()[0] + e
    y = layer_norm(h, eps) * (1 + s[1]) + s[0]
    out = op.lin("head.head", y, op.head_fp32)
    Co = cfg["out_dim"]
    out = out.view(*grid, pt, ph, pw, Co)
    out = torch.einsum("fhwpqrc->cfphqwr", out).reshape(Co, Fr, Hh, Ww).contiguous()
    if record is not None:
        record["out"] = out
    return out


def max_rel(a, b):
    """max |a - b| / max |b|"""
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))

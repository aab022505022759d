"""wan_torch.py: the Wan2.1 text-to-video transformer in PyTorch, module and parameter names exactly
the original Wan layout (wan/modules/model.py; ../shared/reference/dit-architectures.md §1.3-1.5),
so that state_dict() is a checkpoint dsgap's engine loads. Used by train.py and check_forward.py.

Precision follows the original: the time embedding, the modulation, every LayerNorm/RMSNorm and the
residual stream in fp32; under torch.autocast(bf16) the linear layers and attention run in bf16.
Files (safetensors, config.json, the schedule): wan_files.py (numpy only).
"""
import json
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from wan_files import read_safetensors, wan_config, write_safetensors  # noqa: F401


def sinusoidal(dim, t):
    """t (B,) -> (B, dim): [cos(t f_j)] ++ [sin(t f_j)], f_j = 10000^(-j/half), in fp64 then fp32"""
    half = dim // 2
    freqs = torch.pow(10000.0, -torch.arange(half, dtype=torch.float64, device=t.device) / half)
    a = t.to(torch.float64)[:, None] * freqs[None]
    return torch.cat([torch.cos(a), torch.sin(a)], dim=1).float()


def rope_cos_sin(grid, d, theta=10000.0, device=None):
    """cos, sin (N, d/2) for the token grid (F, H, W): pairs [0, dt/2) from f, then h, then w"""
    dh = 2 * (d // 6)
    dt = d - 2 * dh
    Fg, Hg, Wg = grid

    def ang(n, dim):
        freqs = 1.0 / torch.pow(theta, torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)
        return torch.arange(n, dtype=torch.float64, device=device)[:, None] * freqs[None]

    at, ah, aw = ang(Fg, dt), ang(Hg, dh), ang(Wg, dh)
    a = torch.cat([at[:, None, None].expand(Fg, Hg, Wg, -1), ah[None, :, None].expand(Fg, Hg, Wg, -1),
                   aw[None, None, :].expand(Fg, Hg, Wg, -1)], dim=-1).reshape(Fg * Hg * Wg, d // 2)
    return torch.cos(a).float(), torch.sin(a).float()


def rope_apply(x, cos, sin):
    """x (B, N, H, d): pairs (2i, 2i+1) rotated by the table, in fp32"""
    xf = x.float().unflatten(-1, (-1, 2))
    a, b = xf[..., 0], xf[..., 1]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x = x.float()
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()


def layer_norm(x, eps):
    return F.layer_norm(x.float(), (x.shape[-1],), eps=eps)


class Attention(nn.Module):
    def __init__(self, dim, heads, eps):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.norm_q, self.norm_k = RMSNorm(dim, eps), RMSNorm(dim, eps)

    def forward(self, x, ctx=None, rope=None, record=None):
        B, N, D = x.shape
        src = x if ctx is None else ctx
        q = self.norm_q(self.q(x)).view(B, N, self.heads, -1)
        k = self.norm_k(self.k(src)).view(B, src.shape[1], self.heads, -1)
        v = self.v(src).view(B, src.shape[1], self.heads, -1)
        dt = v.dtype  # bf16 under autocast, else fp32: attention runs in the linear layers' precision
        if rope is not None:
            q, k = rope_apply(q, *rope), rope_apply(k, *rope)
        if record is not None:
            record.append((q.detach(), k.detach(), v.detach()))
        q, k, v = (a.to(dt).transpose(1, 2) for a in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v)
        return self.o(o.transpose(1, 2).reshape(B, N, D))


class Block(nn.Module):
    def __init__(self, dim, ffn_dim, heads, eps):
        super().__init__()
        self.eps = eps
        self.self_attn = Attention(dim, heads, eps)
        self.norm3 = nn.LayerNorm(dim, eps=eps, elementwise_affine=True)
        self.cross_attn = Attention(dim, heads, eps)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.GELU(approximate="tanh"), nn.Linear(ffn_dim, dim))
        self.modulation = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)

    def forward(self, x, e0, c, rope, record=None):
        m = (self.modulation.float() + e0).unbind(1)  # each (B, D), fp32
        y = layer_norm(x, self.eps) * (1 + m[1][:, None]) + m[0][:, None]
        x = x + self.self_attn(y, rope=rope, record=record).float() * m[2][:, None]
        y = F.layer_norm(x.float(), (x.shape[-1],), self.norm3.weight.float(), self.norm3.bias.float(), self.eps)
        x = x + self.cross_attn(y, ctx=c).float()
        y = layer_norm(x, self.eps) * (1 + m[4][:, None]) + m[3][:, None]
        return x + self.ffn(y).float() * m[5][:, None]


class Head(nn.Module):
    def __init__(self, dim, out, eps):
        super().__init__()
        self.eps = eps
        self.head = nn.Linear(dim, out)
        self.modulation = nn.Parameter(torch.randn(1, 2, dim) / dim ** 0.5)

    def forward(self, x, e):
        s = (self.modulation.float() + e[:, None]).unbind(1)
        return self.head(layer_norm(x, self.eps) * (1 + s[1][:, None]) + s[0][:, None])


class WanModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        D, eps = cfg["dim"], cfg["eps"]
        pt, ph, pw = cfg["patch_size"]
        self.patch_embedding = nn.Conv3d(cfg["in_dim"], D, kernel_size=(pt, ph, pw), stride=(pt, ph, pw))
        self.text_embedding = nn.Sequential(nn.Linear(cfg["text_dim"], D), nn.GELU(approximate="tanh"), nn.Linear(D, D))
        self.time_embedding = nn.Sequential(nn.Linear(cfg["freq_dim"], D), nn.SiLU(), nn.Linear(D, D))
        self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(D, 6 * D))
        self.blocks = nn.ModuleList(Block(D, cfg["ffn_dim"], cfg["num_heads"], eps) for _ in range(cfg["num_layers"]))
        self.head = Head(D, cfg["out_dim"] * pt * ph * pw, eps)
        self._rope = {}
        self.init_weights()

    def init_weights(self):
        """as WanModel.init_weights: xavier linears, zero biases, N(0, 0.02) embeddings, zero output"""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.xavier_uniform_(self.patch_embedding.weight.flatten(1))
        for s in (self.text_embedding, self.time_embedding):
            for m in s.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, std=0.02)
        nn.init.zeros_(self.head.head.weight)

    def rope(self, grid, device):
        key = (tuple(grid), str(device))
        if key not in self._rope:
            d = self.cfg["dim"] // self.cfg["num_heads"]
            self._rope[key] = rope_cos_sin(grid, d, device=device)
        return self._rope[key]

    def forward(self, x, t, context, record=None):
        """x (B, C, F, H, W), t (B,) on the 0..1000 scale, context (B, L, text_dim) already padded
        to text_len -> velocity (B, out_dim, F, H, W) in fp32. record: list of (q, k, v) per block."""
        cfg = self.cfg
        B, C, Fr, H, W = x.shape
        pt, ph, pw = cfg["patch_size"]
        grid = (Fr // pt, H // ph, W // pw)
        h = self.patch_embedding(x).flatten(2).transpose(1, 2).float()  # (B, N, D)
        dev = x.device.type
        with torch.autocast(dev, enabled=False):
            e = self.time_embedding(sinusoidal(cfg["freq_dim"], t))
            e0 = self.time_projection(e).unflatten(1, (6, -1))
        c = self.text_embedding(context)
        rope = self.rope(grid, x.device)
        for b in self.blocks:
            h = b(h, e0, c, rope, record)
        with torch.autocast(dev, enabled=False):
            out = self.head(h, e).float()  # (B, N, pt*ph*pw*C_out), c fastest
        Co = cfg["out_dim"]
        out = out.view(B, *grid, pt, ph, pw, Co)
        return torch.einsum("bfhwpqrc->bcfphqwr", out).reshape(B, Co, Fr, H, W)


# ------------------------------------------------------------------------------------------------
# checkpoints

def save_model(model, d, dtype="BF16"):
    """d/diffusion_pytorch_model.safetensors (matrices in dtype, vectors and modulation F32) and
    d/config.json. Returns the file size in bytes."""
    os.makedirs(d, exist_ok=True)
    ts = []
    for k, v in model.state_dict().items():
        a = v.detach().float().cpu().numpy()
        dt = dtype if (a.ndim >= 2 and not k.endswith("modulation")) else "F32"
        ts.append((k, dt, a))
    p = os.path.join(d, "diffusion_pytorch_model.safetensors")
    write_safetensors(p, ts, metadata={"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(wan_config(model.cfg), f, indent=2)
    return os.path.getsize(p)


def load_model(d, device="cpu"):
    """a model directory written by save_model (or any original-layout Wan checkpoint + config)"""
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    m = WanModel(cfg)
    W = read_safetensors(os.path.join(d, "diffusion_pytorch_model.safetensors"))
    sd = {k: torch.from_numpy(v) for k, v in W.items()}
    m.load_state_dict(sd, strict=True)
    return m.to(device)



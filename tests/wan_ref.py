#!/usr/bin/python3
"""wan_ref.py: an independent fp64 reference of the Wan2.1 text-to-video transformer and its
flow-matching samplers (../shared/reference/dit-architectures.md §1), and the fixtures of dsgap's
DiT engine tests. Debian's /usr/bin/python3 + numpy (h5py only for `derive`'s HDF5 inputs).

  wan_ref.py make   DIR        write the committed fixtures into DIR (tests/fixtures/wan):
                               wan_tiny.safetensors   random weights, BF16, original Wan key names
                               text / negative / noise .safetensors   the inputs
                               ref_hd64 / ref_hd128 .safetensors      reference outputs (F32)
  wan_ref.py derive DIR OUT    from the fixtures, write the test models into OUT: both key layouts,
                               F32/BF16/F16, sharded with an index, the model.diffusion_model.
                               prefix, no config.json; and broken checkpoints under OUT/bad
  wan_ref.py check  DIR        recompute the references and compare with the committed ones

One set of weights serves two configurations: dim 128 as 2 heads of head_dim 64 (RoPE split
24/20/20) and as 1 head of head_dim 128 (44/42/42); everything else: 2 layers, ffn 128,
text_dim 32, freq_dim 32, patch (1, 2, 2), 4 channels, eps 1e-6, text_len 512.

Interfaces meant for the later PyTorch/diffusers comparison (on the GPU machine): `forward(W, cfg,
x, t, context, record)` takes the weights as a dict of original Wan names, the config as a dict and
the inputs as arrays, and fills `record` with the keys the fixtures use (hidden.<layer> (N, D),
q/k/v.<layer> (H, N, d) post-norm post-RoPE, out (C, F, H, W)); a PyTorch or diffusers model run
with forward hooks can fill the same keys, and `compare(record, ref)` reports the differences.
`read_safetensors`/`write_safetensors` and `diffusers_name` need nothing but numpy.
"""
import json
import os
import struct
import sys

import numpy as np

# --------------------------------------------------------------------------------------------------
# safetensors by hand: 8-byte little-endian header length, JSON header, raw little-endian data

DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2), "F64": (np.float64, 8)}


def bf16_round(a):
    """float values -> the nearest bfloat16 values (round to nearest even), as float64"""
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def to_bf16_words(a):
    u = np.asarray(a, dtype=np.float32).view(np.uint32)
    assert np.all((u & 0xFFFF) == 0), "not bf16-exact"
    return (u >> 16).astype(np.uint16)


def write_safetensors(path, tensors, metadata=None, raw_header=None):
    """tensors: list of (name, dtype, array). Data in list order, header padded to 8 bytes."""
    header, blobs, off = {}, [], 0
    for name, dtype, a in tensors:
        a = np.asarray(a)
        if dtype == "BF16":
            b = to_bf16_words(a).tobytes()
        else:
            b = np.ascontiguousarray(a, dtype=DTYPES[dtype][0]).astype("<" + DTYPES[dtype][0]().dtype.char).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """name -> float64 array (F32, F16, BF16), in file order"""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0] if kv[0] != "__metadata__" else -1):
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        raw = data[8 + n + b:8 + n + en]
        if e["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, "<" + np.dtype(DTYPES[e["dtype"]][0]).char)
        out[name] = a.astype(np.float64).reshape(e["shape"])
    return out


# --------------------------------------------------------------------------------------------------
# the model, fp64 (reference §1.4, following wan/modules/model.py)

def softmax(s, axis):
    s = s - s.max(axis=axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)


def compare(record, ref):
    """max |a - b| / max |b| per key present in both; returns the worst"""
    worst = 0.0
    for k in sorted(set(record) & set(ref)):
        a, b = np.asarray(record[k], dtype=np.float64), np.asarray(ref[k], dtype=np.float64)
        e = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
        print("%-12s max rel diff %.3e" % (k, e))
        worst = max(worst, e)
    return worst


def linear(W, name, x):
    w = W[name + ".weight"]
    b = W.get(name + ".bias")
    y = x @ w.T
    return y + b if b is not None else y


def layer_norm(x, eps, w=None, b=None):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w + b
    return y


def rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1 + np.exp(-x))


def sinusoidal(dim, t):
    half = dim // 2
    freqs = np.power(10000.0, -np.arange(half, dtype=np.float64) / half)
    a = float(t) * freqs
    return np.concatenate([np.cos(a), np.sin(a)])


def rope_params(max_seq_len, dim, theta=10000.0):
    """complex table (max_seq_len, dim/2), as wan/modules/model.py rope_params"""
    freqs = 1.0 / np.power(theta, np.arange(0, dim, 2, dtype=np.float64) / dim)
    ang = np.outer(np.arange(max_seq_len, dtype=np.float64), freqs)
    return np.exp(1j * ang)


def rope_apply(x, grid):
    """x (N, H, d): view pairs (2i, 2i+1) as complex, multiply by the (f, h, w) table"""
    n, heads, d = x.shape
    dt = d - 4 * (d // 6)
    dh = 2 * (d // 6)
    ft, fh, fw = rope_params(1024, dt), rope_params(1024, dh), rope_params(1024, dh)
    F, Hh, Ww = grid
    table = np.concatenate([
        np.broadcast_to(ft[:F][:, None, None, :], (F, Hh, Ww, dt // 2)),
        np.broadcast_to(fh[:Hh][None, :, None, :], (F, Hh, Ww, dh // 2)),
        np.broadcast_to(fw[:Ww][None, None, :, :], (F, Hh, Ww, dh // 2)),
    ], axis=-1).reshape(n, 1, d // 2)
    xc = x.reshape(n, heads, d // 2, 2)
    xc = xc[..., 0] + 1j * xc[..., 1]
    y = xc * table
    return np.stack([y.real, y.imag], axis=-1).reshape(n, heads, d)


def attention(q, k, v):
    """q (Nq, H, d), k v (Nk, H, d) -> (Nq, H, d), softmax(q k^T / sqrt(d))"""
    d = q.shape[-1]
    s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d)
    p = softmax(s, -1)
    return np.einsum("hqk,khd->qhd", p, v)


def forward(W, cfg, x, t, context, record=None):
    """x (C, F, H, W) latents, t timestep, context (L, text_dim) -> (C_out, F, H, W).
    record: dict filled with hidden.<l> (N, D) and q/k/v.<l> (H, N, d) as attention receives them"""
    D, heads, eps = cfg["dim"], cfg["num_heads"], cfg["eps"]
    d = D // heads
    pt, ph, pw = cfg["patch_size"]
    C, Fr, Hh, Ww = x.shape
    grid = (Fr // pt, Hh // ph, Ww // pw)
    n = grid[0] * grid[1] * grid[2]
    # patch embedding: Conv3d with kernel = stride = patch, as a GEMM over (c, kt, kh, kw) vectors
    p = x.reshape(C, grid[0], pt, grid[1], ph, grid[2], pw).transpose(1, 3, 5, 0, 2, 4, 6).reshape(n, -1)
    h = p @ W["patch_embedding.weight"].reshape(D, -1).T + W["patch_embedding.bias"]
    # time embedding and projection
    e = linear(W, "time_embedding.2", silu(linear(W, "time_embedding.0", sinusoidal(cfg["freq_dim"], t))))
    e0 = linear(W, "time_projection.1", silu(e)).reshape(6, D)
    # text: zero-padded to text_len, then the MLP
    L = cfg["text_len"]
    ctx = np.zeros((L, context.shape[1]))
    ctx[:context.shape[0]] = context
    c = linear(W, "text_embedding.2", gelu_tanh(linear(W, "text_embedding.0", ctx)))
    for l in range(cfg["num_layers"]):
        b = "blocks.%d." % l
        mod = W[b + "modulation"][0] + e0
        y = layer_norm(h, eps) * (1 + mod[1]) + mod[0]
        q = rms_norm(linear(W, b + "self_attn.q", y), W[b + "self_attn.norm_q.weight"], eps)
        k = rms_norm(linear(W, b + "self_attn.k", y), W[b + "self_attn.norm_k.weight"], eps)
        v = linear(W, b + "self_attn.v", y)
        q = rope_apply(q.reshape(n, heads, d), grid)
        k = rope_apply(k.reshape(n, heads, d), grid)
        v = v.reshape(n, heads, d)
        if record is not None:
            for nm, a in (("q", q), ("k", k), ("v", v)):
                record["%s.%d" % (nm, l)] = a.transpose(1, 0, 2).copy()
        o = attention(q, k, v).reshape(n, D)
        h = h + linear(W, b + "self_attn.o", o) * mod[2]
        # cross-attention (norm3: the affine pre-norm of the original layout)
        y = layer_norm(h, eps, W[b + "norm3.weight"], W[b + "norm3.bias"])
        q = rms_norm(linear(W, b + "cross_attn.q", y), W[b + "cross_attn.norm_q.weight"], eps)
        k = rms_norm(linear(W, b + "cross_attn.k", c), W[b + "cross_attn.norm_k.weight"], eps)
        v = linear(W, b + "cross_attn.v", c)
        o = attention(q.reshape(n, heads, d), k.reshape(L, heads, d), v.reshape(L, heads, d)).reshape(n, D)
        h = h + linear(W, b + "cross_attn.o", o)
        # feed-forward
        y = layer_norm(h, eps) * (1 + mod[4]) + mod[3]
        h = h + linear(W, b + "ffn.2", gelu_tanh(linear(W, b + "ffn.0", y))) * mod[5]
        if record is not None:
            record["hidden.%d" % l] = h.copy()
    # head: modulation + e (not e0)
    s = W["head.modulation"][0] + e[None, :]
    y = layer_norm(h, eps) * (1 + s[1]) + s[0]
    out = linear(W, "head.head", y)
    Co = cfg["out_dim"]
    out = out.reshape(grid[0], grid[1], grid[2], pt, ph, pw, Co)
    out = np.einsum("fhwpqrc->cfphqwr", out).reshape(Co, grid[0] * pt, grid[1] * ph, grid[2] * pw)
    if record is not None:
        record["out"] = out.copy()
    return out


# --------------------------------------------------------------------------------------------------
# samplers (FlowUniPCMultistepScheduler of wan/utils/fm_solvers_unipc.py, written out in numpy)

def schedule(steps, shift):
    sigma_max = float(np.float32(0.999))
    s = np.linspace(sigma_max, 0.0, steps + 1)[:-1]
    s = shift * s / (1 + (shift - 1) * s)
    timesteps = (s * 1000).astype(np.int64)
    sigmas = np.concatenate([s, [0.0]]).astype(np.float32).astype(np.float64)
    return sigmas, timesteps


class UniPC:
    """bh2, solver_order 2, predict_x0, lower_order_final, final sigma 0"""
    def __init__(self, steps, shift):
        self.sigmas, self.timesteps = schedule(steps, shift)
        self.steps = steps
        self.model_outputs = [None, None]
        self.lower_order_nums = 0
        self.last_sample = None
        self.this_order = None
        self.i = 0

    def lam(self, i):
        s = self.sigmas[i]
        with np.errstate(divide="ignore"):
            return np.log(1 - s) - np.log(s)

    def _coeffs(self, hh, order):
        h_phi_1 = np.expm1(hh)
        h_phi_k = h_phi_1 / hh - 1
        B_h = np.expm1(hh)
        b, fact = [], 1
        for i in range(1, order + 1):
            b.append(h_phi_k * fact / B_h)
            fact *= i + 1
            h_phi_k = h_phi_k / hh - 1 / fact
        return h_phi_1, B_h, b

    def step(self, v, x):
        i = self.i
        m = x - self.sigmas[i] * v
        if i > 0 and self.last_sample is not None:
            x = self.corrector(m, self.last_sample, x, self.this_order)
        self.model_outputs = [self.model_outputs[1], m]
        order = min(2, self.steps - i)
        self.this_order = min(order, self.lower_order_nums + 1)
        self.last_sample = x
        x_next = self.predictor(x, self.this_order)
        self.lower_order_nums = min(self.lower_order_nums + 1, 2)
        self.i += 1
        return x_next

    def predictor(self, x, order):
        i = self.i
        m0 = self.model_outputs[-1]
        st, s0 = self.sigmas[i + 1], self.sigmas[i]
        if st == 0:
            return m0.copy()  # lambda_t = inf: h_phi_1 = -1, x_t = m0
        at = 1 - st
        h = self.lam(i + 1) - self.lam(i)
        hh = -h
        h_phi_1, B_h, _ = self._coeffs(hh, order)
        x_t = st / s0 * x - at * h_phi_1 * m0
        if order == 2:
            rk = (self.lam(i - 1) - self.lam(i)) / h
            D1 = (self.model_outputs[-2] - m0) / rk
            x_t = x_t - at * B_h * 0.5 * D1
        return x_t

    def corrector(self, m, last, x_t, order):
        i = self.i
        m0 = self.model_outputs[-1]
        st, s0 = self.sigmas[i], self.sigmas[i - 1]
        at = 1 - st
        h = self.lam(i) - self.lam(i - 1)
        hh = -h
        h_phi_1, B_h, b = self._coeffs(hh, order)
        x_ = st / s0 * last - at * h_phi_1 * m0
        if order == 1:
            return x_ - at * B_h * (0.5 * (m - m0))
        rk = (self.lam(i - 2) - self.lam(i - 1)) / h
        R = np.array([[1.0, 1.0], [rk, 1.0]])
        rho = np.linalg.solve(R, np.array(b))
        D1 = (self.model_outputs[-2] - m0) / rk
        return x_ - at * B_h * (rho[0] * D1 + rho[1] * (m - m0))


class Euler:
    def __init__(self, steps, shift):
        self.sigmas, self.timesteps = schedule(steps, shift)
        self.i = 0

    def step(self, v, x):
        x = x + (self.sigmas[self.i + 1] - self.sigmas[self.i]) * v
        self.i += 1
        return x


def sample(W, cfg, noise, cond, uncond, steps, shift, guidance, sampler):
    s = (UniPC if sampler == "unipc" else Euler)(steps, shift)
    x = noise.copy()
    for i in range(steps):
        t = s.timesteps[i]
        v = forward(W, cfg, x, t, cond)
        if guidance != 1:
            vu = forward(W, cfg, x, t, uncond)
            v = vu + guidance * (v - vu)
        x = s.step(v, x)
    return x


# --------------------------------------------------------------------------------------------------
# fixtures

DIM, FFN, TEXT_DIM, FREQ_DIM, CH, LAYERS = 128, 128, 32, 32, 4, 2
CONFIGS = {"hd64": 2, "hd128": 1}  # num_heads
LATENT = (2, 8, 12)                 # F, H, W -> grid 2 x 4 x 6 = 48 tokens
RUNS = {  # name: (steps, shift, guidance, sampler)
    "unipc_cfg": (4, 3.0, 4.0, "unipc"),
    "euler": (3, 1.0, 1.0, "euler"),
}


def base_cfg(heads):
    return {"dim": DIM, "ffn_dim": FFN, "freq_dim": FREQ_DIM, "text_dim": TEXT_DIM, "in_dim": CH,
            "out_dim": CH, "num_heads": heads, "num_layers": LAYERS, "patch_size": [1, 2, 2],
            "eps": 1e-6, "text_len": 512}


def weight_shapes():
    D, P = DIM, CH * 4
    s = [("patch_embedding.weight", (D, CH, 1, 2, 2)), ("patch_embedding.bias", (D,)),
         ("text_embedding.0.weight", (D, TEXT_DIM)), ("text_embedding.0.bias", (D,)),
         ("text_embedding.2.weight", (D, D)), ("text_embedding.2.bias", (D,)),
         ("time_embedding.0.weight", (D, FREQ_DIM)), ("time_embedding.0.bias", (D,)),
         ("time_embedding.2.weight", (D, D)), ("time_embedding.2.bias", (D,)),
         ("time_projection.1.weight", (6 * D, D)), ("time_projection.1.bias", (6 * D,))]
    for l in range(LAYERS):
        b = "blocks.%d." % l
        s.append((b + "modulation", (1, 6, D)))
        for a in ("self_attn", "cross_attn"):
            for p in "qkvo":
                s += [(b + a + "." + p + ".weight", (D, D)), (b + a + "." + p + ".bias", (D,))]
            s += [(b + a + ".norm_q.weight", (D,)), (b + a + ".norm_k.weight", (D,))]
        s += [(b + "norm3.weight", (D,)), (b + "norm3.bias", (D,))]
        s += [(b + "ffn.0.weight", (FFN, D)), (b + "ffn.0.bias", (FFN,)),
              (b + "ffn.2.weight", (D, FFN)), (b + "ffn.2.bias", (D,))]
    s += [("head.modulation", (1, 2, D)), ("head.head.weight", (P, D)), ("head.head.bias", (P,))]
    return s


def random_weights(rng):
    W = {}
    for name, shape in weight_shapes():
        if name.endswith("modulation"):
            a = rng.normal(0, 0.2, shape)
        elif "norm" in name and name.endswith(".weight"):
            a = 1 + rng.normal(0, 0.1, shape)
        elif name.endswith(".bias"):
            a = rng.normal(0, 0.05, shape)
        else:
            fan_in = int(np.prod(shape[1:]))
            a = rng.normal(0, 1 / np.sqrt(fan_in), shape)
        a = bf16_round(a)
        a[np.abs(a) < 2.0 ** -14] = 0  # every value exact in BF16, F16 and F32
        W[name] = a
    return W


def references(W, inputs, heads):
    cfg = base_cfg(heads)
    rec = {}
    forward(W, cfg, inputs["noise"], 999, inputs["text"], rec)
    out = {"out": rec["out"]}
    for l in range(LAYERS):
        out["hidden.%d" % l] = rec["hidden.%d" % l]
    for nm in "qkv":
        out["%s.1" % nm] = rec["%s.1" % nm]
    for run, (steps, shift, g, sampler) in RUNS.items():
        out[run] = sample(W, cfg, inputs["noise"], inputs["text"], inputs["negative"], steps, shift, g, sampler)
    return out


def make(d):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(20261202)
    W = random_weights(rng)
    write_safetensors(os.path.join(d, "wan_tiny.safetensors"),
                      [(n, "BF16", W[n]) for n, _ in weight_shapes()], metadata={"format": "pt"})
    inputs = {"text": rng.normal(0, 1, (10, TEXT_DIM)), "negative": rng.normal(0, 1, (5, TEXT_DIM)),
              "noise": rng.normal(0, 1, (CH,) + LATENT)}
    for k, a in inputs.items():
        a = a.astype(np.float32).astype(np.float64)
        inputs[k] = a
        write_safetensors(os.path.join(d, k + ".safetensors"), [(k, "F32", a)])
    for tag, heads in CONFIGS.items():
        ref = references(W, inputs, heads)
        write_safetensors(os.path.join(d, "ref_%s.safetensors" % tag), [(k, "F32", v) for k, v in ref.items()])
    print("wrote fixtures to", d)


def load_fixtures(d):
    W = read_safetensors(os.path.join(d, "wan_tiny.safetensors"))
    inputs = {k: read_safetensors(os.path.join(d, k + ".safetensors"))[k] for k in ("text", "negative", "noise")}
    return W, inputs


def check(d):
    W, inputs = load_fixtures(d)
    worst = 0
    for tag, heads in CONFIGS.items():
        ref = read_safetensors(os.path.join(d, "ref_%s.safetensors" % tag))
        print("config", tag)
        worst = max(worst, compare(references(W, inputs, heads), ref))
    print("worst %.2e" % worst)
    return 0 if worst < 1e-6 else 1


# --------------------------------------------------------------------------------------------------
# derived test models

def diffusers_name(n):
    """original Wan key -> diffusers key (the converter's map, norm2 <-> norm3 swapped)"""
    top = {"text_embedding.0.": "condition_embedder.text_embedder.linear_1.",
           "text_embedding.2.": "condition_embedder.text_embedder.linear_2.",
           "time_embedding.0.": "condition_embedder.time_embedder.linear_1.",
           "time_embedding.2.": "condition_embedder.time_embedder.linear_2.",
           "time_projection.1.": "condition_embedder.time_proj.", "head.head.": "proj_out."}
    if n == "head.modulation":
        return "scale_shift_table"
    for a, b in top.items():
        if n.startswith(a):
            return b + n[len(a):]
    if n.startswith("blocks."):
        _, i, rest = n.split(".", 2)
        sub = [("modulation", "scale_shift_table"), ("self_attn.o.", "attn1.to_out.0."),
               ("cross_attn.o.", "attn2.to_out.0."), ("self_attn.norm_", "attn1.norm_"),
               ("cross_attn.norm_", "attn2.norm_"), ("self_attn.", "attn1.to_"), ("cross_attn.", "attn2.to_"),
               ("norm3.", "norm2."), ("ffn.0.", "ffn.net.0.proj."), ("ffn.2.", "ffn.net.2.")]
        for a, b in sub:
            if rest.startswith(a):
                return "blocks.%s.%s%s" % (i, b, rest[len(a):])
    return n


def original_config(heads):
    return {"_class_name": "WanModel", "_diffusers_version": "0.30.0", "dim": DIM, "eps": 1e-6,
            "ffn_dim": FFN, "freq_dim": FREQ_DIM, "in_dim": CH, "model_type": "t2v", "num_heads": heads,
            "num_layers": LAYERS, "out_dim": CH, "text_len": 512, "text_dim": TEXT_DIM,
            "patch_size": [1, 2, 2]}


def diffusers_config(heads):
    return {"_class_name": "WanTransformer3DModel", "_diffusers_version": "0.33.0",
            "added_kv_proj_dim": None, "attention_head_dim": DIM // heads, "cross_attn_norm": True,
            "eps": 1e-6, "ffn_dim": FFN, "freq_dim": FREQ_DIM, "image_dim": None, "in_channels": CH,
            "num_attention_heads": heads, "num_layers": LAYERS, "out_channels": CH, "patch_size": [1, 2, 2],
            "qk_norm": "rms_norm_across_heads", "rope_max_seq_len": 1024, "text_dim": TEXT_DIM}


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


def derive(d, out):
    W, inputs = load_fixtures(d)
    names = [n for n, _ in weight_shapes()]
    os.makedirs(out, exist_ok=True)

    def model(sub, cfg, tensors, fname="diffusion_pytorch_model.safetensors", shards=0):
        p = os.path.join(out, sub)
        os.makedirs(p, exist_ok=True)
        if cfg is not None:
            write_json(os.path.join(p, "config.json"), cfg)
        if shards:
            k = (len(tensors) + shards - 1) // shards
            parts = [tensors[i:i + k] for i in range(0, len(tensors), k)]
            wm = {}
            for j, part in enumerate(parts):
                sn = "diffusion_pytorch_model-%05d-of-%05d.safetensors" % (j + 1, len(parts))
                write_safetensors(os.path.join(p, sn), part)
                for n, _, _ in part:
                    wm[n] = sn
            write_json(os.path.join(p, "diffusion_pytorch_model.safetensors.index.json"),
                       {"metadata": {"total_size": 0}, "weight_map": wm})
        else:
            write_safetensors(os.path.join(p, fname), tensors)

    orig = lambda dt, pre="": [(pre + n, dt, W[n]) for n in names]
    diff = lambda dt: [(diffusers_name(n), dt, W[n]) for n in names]
    for n in names:  # the F16 copies must hold the same values
        assert np.array_equal(W[n].astype(np.float16).astype(np.float64), W[n]), n
    model("orig_hd64", original_config(2), orig("BF16"))
    model("diff_hd64", diffusers_config(2), diff("F32"), shards=2)
    model("orig_hd128", original_config(1), orig("F16", "model.diffusion_model."), fname="wan.safetensors")
    model("diff_hd128", diffusers_config(1), diff("BF16"))
    model("shard6_hd64", diffusers_config(2), diff("BF16"), shards=6)  # as Wan-AI ships 14B: 6 shards + index
    model("infer_hd128", None, orig("F32"))  # no config.json: num_heads = dim / 128
    model("badcfg", dict(diffusers_config(1), qk_norm="rms_norm"), diff("BF16"))  # per-head qk norm
    # several prompts in one file (FILE:NAME)
    write_safetensors(os.path.join(out, "conds.safetensors"),
                      [("text", "F32", inputs["text"]), ("negative", "BF16", bf16_round(inputs["negative"]))])
    # inputs in HDF5 too
    try:
        import h5py
        with h5py.File(os.path.join(out, "text.h5"), "w") as f:
            f["embeddings"] = inputs["text"].astype(np.float32)[None]  # [1, tokens, text_dim]
        with h5py.File(os.path.join(out, "noise.h5"), "w") as f:
            f["noise"] = inputs["noise"].astype(np.float16)
    except ImportError:
        pass
    # broken checkpoints (no config.json: inferred, 1 head)
    bad = os.path.join(out, "bad")
    os.makedirs(bad, exist_ok=True)
    good = orig("BF16")
    w = lambda name, tensors, **kw: write_safetensors(os.path.join(bad, name + ".safetensors"), tensors, **kw)
    w("missing", [t for t in good if t[0] != "blocks.1.ffn.2.bias"])
    w("extra", good + [("blocks.0.extra.weight", "F32", np.zeros(4))])
    w("i2v", good + [("img_emb.proj.1.weight", "F32", np.zeros((DIM, 8)))])
    w("shape", [(n, dt, a[:, :64] if n == "blocks.0.self_attn.q.weight" else a) for n, dt, a in good])
    w("mixed", [(diffusers_name(n) if n.startswith("head.") else n, dt, a) for n, dt, a in good])
    nan = [(n, dt, a) for n, dt, a in good]
    a = W["blocks.1.cross_attn.k.weight"].copy()
    a[3, 5] = np.nan
    nan[names.index("blocks.1.cross_attn.k.weight")] = ("blocks.1.cross_attn.k.weight", "F32", a)
    w("nan", nan)
    nan[names.index("blocks.1.cross_attn.k.weight")] = ("blocks.1.cross_attn.k.weight", "BF16", a)
    w("nan_bf16", nan)  # read as stored by a table with prepare_bf16
    # header-level damage on a small valid file
    small = [("a", "F32", np.arange(6.0).reshape(2, 3)), ("b", "BF16", np.ones(4))]
    w("ok_small", small)
    hdr = lambda s: w("h_" + s[0], [], raw_header=s[1].encode())
    for s in [("dtype", '{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}'),
              ("unknown_dtype", '{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}'),
              ("json", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'),
              ("size", '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}')]:
        hdr(s)
    p = os.path.join(bad, "truncated.safetensors")
    with open(os.path.join(bad, "ok_small.safetensors"), "rb") as f:
        data = f.read()
    with open(p, "wb") as f:
        f.write(data[:-3])
    with open(os.path.join(bad, "h_length.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", 1 << 40) + b"{}")
    print("derived test models in", out)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "derive":
        derive(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 3 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    else:
        print(__doc__)
        sys.exit(2)

"""torch.py: dsgap's policies inside a diffusers transformer (the families of families.py) through
libdsgap (include/dsgap.h, ctypes in torch_abi.py): the same policy code, metadata and residual
caches as `dsgap replay` and `dsgap generate`.

    import dsgap.torch
    with dsgap.torch.attention(pipe.transformer, policy="mc-sparse", density=0.15, schedule="warmup=10"):
        pipe(prompt, num_inference_steps=50)

How (the mechanism of dsgap.capture): while installed, torch.nn.functional.scaled_dot_product_attention
is wrapped; pre/post hooks on the family's attention modules say which layer an SDPA call belongs
to, and a pre-hook on the model counts denoising steps (a new step when the timestep changes).
An SDPA call inside a layer goes to dsgap_attend for each batch item: Q/K/V/O passed by address and
strides (no copies; fp32 on the GPU is rounded to a bf16 copy, and a "video,text" token order is
permuted into dsgap's text-prefix order by a copy), on torch's current stream. The CFG branch
(dsgap's pass: 0 conditional, 1 unconditional, as in the C engine; cfg_meta=shared gives branch 1
branch 0's metadata): batched CFG (batch 2): the batch item, diffusers concatenating [uncond, cond]
(item 1 is branch 0, attended first); a processor looping over the batch (Mochi): its call within
the layer, the same way (the unconditional call comes first there: cfg_meta=shared then adopts the
conditional branch's selections one step late); sequential CFG (batch 1): the model's call within the step, the first (diffusers' Wan,
HunyuanVideo pipelines: the conditional) branch 0. A key-padding mask (padded text tokens, the
same for every query and head) or a joint padding mask (valid queries AND keys, HunyuanVideo-1.5)
is taken: dsgap attends over the kept tokens (a copy), the padded queries get torch's attention
under their own mask rows. A call that is plain dense attention under the
schedule (dsgap_site_is_dense: a warm-up step before the anchor, a dense layer) runs torch's own SDPA
(dense_sites="torch", the default: cuDNN/flash on the GPU), counted in stats()["torch_dense_calls"].
CFG branches whose prompts keep different numbers of text tokens get one libdsgap context per text
length, and the experts of one loop (Wan2.2's two) one each (self.ctxs; stats() sums them). Calls dsgap cannot take (another mask, causal,
dropout, cross or grouped-query attention, another scale) run torch's own SDPA and are counted in
stats()["fallback_calls"].
"""
import math

import torch as _torch

from . import torch_abi as _abi
from .capture import padding_keep
from .families import FAMILIES, family_of

_DTYPES = {_torch.bfloat16: _abi.BF16, _torch.float16: _abi.FP16, _torch.float32: _abi.FP32}


class _Generic:
    """the generic mode's family: every attention module (dsgap.capture's attention_modules; layer i =
    the i-th, cross-attention calls left to torch), the token layout and grid given"""
    name = "generic"

    def __init__(self, layout, grid):
        from .capture import ORDERS
        if layout not in ORDERS:
            raise _err(1, f"layout={layout!r}: pass one of {ORDERS} (dsgap.describe(model, ...) reads it)")
        if grid is None:
            raise _err(1, "the generic mode needs grid=(frames, height, width) of the video tokens (or a function "
                          "of the forward's arguments returning it; dsgap.describe(model, ...) gives the video tokens)")
        self.layout, self._grid = layout, grid

    def attention(self, m):
        from .capture import attention_modules
        return [(name, mod, self.layout) for name, mod in attention_modules(m)]

    def grid(self, m, a):
        g = self._grid(a) if callable(self._grid) else self._grid
        return tuple(int(x) for x in g)


def _err(code, message):
    """the processor's own error: "dsgap: " and a message that says what to do"""
    return _abi.DsgapError(code, message, fix="")


def _bind(module, args, kwargs):
    import inspect
    try:
        return dict(inspect.signature(module.forward).bind_partial(*args, **kwargs).arguments)
    except TypeError:
        return dict(kwargs)


def _refusal(q, k, v, is_causal, dropout_p, scale, kw):
    """why libdsgap cannot take this SDPA call (None: it can): the reason stats()["fallbacks"] counts"""
    if q.dim() != 4:
        return f"{q.dim()}-D query (4-D (batch, heads, tokens, head_dim) taken)"
    if k.shape != q.shape or v.shape != q.shape:
        return "K/V shaped unlike Q (cross attention or GQA)"
    if is_causal:
        return "causal"
    if dropout_p:
        return "dropout"
    if kw.get("enable_gqa"):
        return "enable_gqa"
    if scale is not None and abs(scale * math.sqrt(q.shape[-1]) - 1) >= 1e-6:
        return "a scale other than 1/sqrt(head_dim)"
    if q.dtype not in _DTYPES:
        return f"dtype {str(q.dtype).replace('torch.', '')}"
    return None


def _view(t):
    """(tokens, heads, head_dim) of a (heads, tokens, head_dim) tensor, by address and strides"""
    sh, st, sd = t.stride()
    return _abi.Tensor(t.data_ptr(), st, sh, sd)


class attention:
    """Install dsgap's policy on `model`'s self- and joint-attention (context manager; or
    install()/remove()). model: a transformer, or a list of expert transformers of one family that
    share the denoising loop (Wan2.2 A14B: [pipe.transformer, pipe.transformer_2]); steps count over
    the loop whichever expert runs them, and each expert keeps its own metadata (its first sparse
    step after the other's is an anchor). policy: a spec ("mc-sparse", "oracle-tile", "svg2", ...); density: one,
    or one per attention layer; schedule: "warmup=W,anchors=a;b,dense_layers=l" over the denoising
    steps and the family's attention layers; branches: 2 (CFG) or 1; dense_sites: "torch" (calls
    that are plain dense attention under the schedule, dsgap_site_is_dense: warm-up steps before the
    anchor, dense layers, the "dense" policy, run torch's own SDPA, its fastest dense kernel) or
    "dsgap" (every call through libdsgap's kernels). Generic mode (any model; forced by layout=):
    layout "video", "text,video" or "video,text" and grid (frames, height, width) or a function of the
    forward's bound arguments, as dsgap.capture's; every attention module is a layer, its self- and
    joint-attention calls go to libdsgap, cross attention runs torch's own (not a fallback)."""

    def __init__(self, model, policy="mc-sparse", density=0.15, schedule="", branches=2, dense_sites="torch", *,
                 layout=None, grid=None):
        if dense_sites not in ("torch", "dsgap"):
            raise _err(1, f"dense_sites={dense_sites!r}: pass dense_sites='torch' (the default) or 'dsgap'")
        self.models = list(model) if isinstance(model, (list, tuple)) else [model]
        if not self.models:
            raise _err(1, "no model given: pass a transformer, or a list of expert transformers")
        self.model = self.models[0]
        self.policy, self.schedule, self.branches = policy, schedule or "", branches
        self.dense_sites = dense_sites
        self.density = list(density) if isinstance(density, (list, tuple)) else [float(density)]
        self.family = family_of(self.model) if layout is None else _Generic(layout, grid)
        kinds = {type(m).__name__ for m in self.models}
        if len(kinds) > 1:
            raise _err(1, f"experts of different classes ({', '.join(sorted(kinds))}): the experts of one "
                          f"loop are transformers of one family (e.g. Wan2.2's transformer and transformer_2)")
        if self.family is None:
            raise _err(1, f"{type(self.model).__name__} is not a model dsgap.torch.attention supports: pass the "
                          f"transformer of a supported family ({', '.join(FAMILIES)}), e.g. pipe.transformer, or "
                          f"use the generic mode: dsgap.torch.attention(model, ..., layout='text,video', "
                          f"grid=(F, H, W)); dsgap.describe(model, ...) lists where the model attends, its "
                          f"layout and video tokens")
        self.ctx, self.ctxs, self.shape, self.hooks, self.installed = None, {}, None, [], False
        self.fallback_calls = self.torch_dense_calls = 0
        self.fallbacks = {}   # why a call at a site went to torch -> calls (stats()["fallbacks"])
        self._final = None   # libdsgap's counters when the context was closed (stats() after the with block)

    # --------------------------------------------------------------------------------------------
    def install(self):
        per = [self.family.attention(m) for m in self.models]
        if not per[0]:
            raise _err(1, f"{type(self.model).__name__} has no attention blocks: pass the model's transformer "
                          f"with its blocks (e.g. pipe.transformer)")
        if len({len(mods) for mods in per}) > 1:
            raise _err(1, f"experts with {', '.join(str(len(mods)) for mods in per)} attention layers: the experts "
                          f"of one loop have the same blocks")
        self.nlayers = len(per[0])
        self.fallback_calls = self.torch_dense_calls = 0   # a new run counts from zero
        self.fallbacks = {}
        self._final = None
        self.step, self.last_t, self.call_in_step, self.cur, self.layer = -1, None, 0, None, None
        self.expert = 0
        for e, (m, mods) in enumerate(zip(self.models, per)):
            for lid, (name, mod, order) in enumerate(mods):
                self.hooks.append(mod.register_forward_pre_hook(self._layer_pre(lid, order)))
                self.hooks.append(mod.register_forward_hook(self._layer_post))
            self.hooks.append(m.register_forward_pre_hook(self._pre_of(e), with_kwargs=True))
            self.hooks.append(m.register_forward_hook(self._post))
        self.orig_sdpa = _torch.nn.functional.scaled_dot_product_attention
        _torch.nn.functional.scaled_dot_product_attention = self._sdpa
        self.installed = True
        return self

    def remove(self):
        if self.installed:
            _torch.nn.functional.scaled_dot_product_attention = self.orig_sdpa
            for h in self.hooks:
                h.remove()
            self.hooks, self.installed = [], False
        if self.ctxs:
            self._final = self._ctx_stats()   # the run's numbers, for stats() after the with block
            for c in self.ctxs.values():
                c.close()
        self.ctx, self.ctxs, self.shape = None, {}, None

    def __enter__(self):
        return self.install()

    def __exit__(self, *exc):
        self.remove()
        return False

    def stats(self):
        """libdsgap's counters (dsgap_stats: calls, sparse_calls, pairs, full_pairs, seconds, ...)
        and the SDPA calls that ran torch's own attention: fallback_calls (calls dsgap cannot take) and
        fallbacks (their reasons, e.g. {"causal": 2}),
        torch_dense_calls (plain dense sites under dense_sites="torch"). Inside the with block: so
        far; after it: the whole run's (kept when the context is freed); zeros before any call"""
        if self.ctxs:
            s = self._ctx_stats()
        elif self._final is not None:
            s = dict(self._final)
        else:
            s = {name: 0 for name, _ in _abi._Stats._fields_}
        s["fallback_calls"] = self.fallback_calls
        s["fallbacks"] = dict(self.fallbacks)
        s["torch_dense_calls"] = self.torch_dense_calls
        return s

    def _ctx_stats(self):
        """libdsgap's counters summed over the contexts (one per text length, see _context)"""
        s = {name: 0 for name, _ in _abi._Stats._fields_}
        for c in self.ctxs.values():
            for k, v in c.stats().items():
                s[k] += v
        return s

    # --------------------------------------------------------------------------------------------
    def _pre_of(self, expert):
        def hook(module, args, kwargs):
            self.expert = expert
            return self._pre(module, args, kwargs)
        return hook

    def _pre(self, module, args, kwargs):
        a = _bind(module, args, kwargs)
        t = a.get("timestep", a.get("t"))
        key = None if t is None else tuple(_torch.as_tensor(t).detach().flatten()[:4].float().cpu().tolist())
        if self.step < 0 or key is None or key != self.last_t:
            self.step, self.call_in_step = self.step + 1, 0
        else:
            self.call_in_step += 1
        self.last_t = key
        hs = a.get("hidden_states", args[0] if args else None)
        grid = self.family.grid(module, a)
        self.cur = dict(B=int(hs.shape[0]) if _torch.is_tensor(hs) else 1, grid=grid,
                        video=grid[0] * grid[1] * grid[2])

    def _post(self, module, args, out):
        self.cur = None

    def _layer_pre(self, lid, order):
        def hook(mod, args):
            if self.cur is not None:
                self.layer = dict(lid=lid, order=order, calls=0)
        return hook

    def _layer_post(self, mod, args, out):
        self.layer = None

    # --------------------------------------------------------------------------------------------
    def _context(self, H, D, text, cuda):
        """the libdsgap context of the running expert's calls with `text` text tokens: one per text length,
        so that CFG branches whose prompts keep different numbers of text tokens (HunyuanVideo's padded
        prompts, joint models) each have theirs (the same state layout: branch b of its own context),
        and one per expert (its own metadata)"""
        grid, device = self.cur["grid"], "gpu" if cuda else "cpu"
        shape = (H, D, tuple(grid), device)
        if self.shape is None:
            self.shape = shape
        elif self.shape != shape:
            raise _err(4, f"attention of {H} heads x {D}, grid {grid} on {device}, but this dsgap.torch.attention "
                          f"was made for {self.shape} (heads, head_dim, grid, device): use one "
                          f"dsgap.torch.attention per resolution")
        ctx = self.ctxs.get((self.expert, text))
        if ctx is None:
            lens = sorted(t for e, t in self.ctxs if e == self.expert)
            if lens and "cfg_meta=shared" in self.policy:
                raise _err(4, f"{text} text tokens in this call, {lens} in earlier ones: cfg_meta=shared "
                              f"gives one CFG branch the other's selections, which needs one token count; pad both "
                              f"prompts to one length (the same text mask length) or drop cfg_meta=shared")
            if len(lens) >= self.branches:
                raise _err(4, f"{text} text tokens in this call, {lens} in earlier ones: more text "
                              f"lengths than the {self.branches} CFG branch(es); keep one prompt length per branch "
                              f"through the run")
            ctx = self.ctxs[(self.expert, text)] = _abi.Context(self.policy, self.density, self.schedule, self.nlayers, H, D,
                                                 self.branches, grid, text, device)
            if self.ctx is None:
                self.ctx = ctx
        return ctx

    def _key_padding(self, mask, B, S):
        """per batch item, the kept key indices (None: all) of a key-padding mask (the same for every
        query and head); None when the mask is something else"""
        m = mask
        while m.dim() < 4:
            m = m.unsqueeze(0)
        if m.shape[-1] != S or m.shape[0] not in (1, B):
            return None
        keeps = []
        for i in range(B):
            keep = padding_keep(mask, i, S)   # key padding, or valid queries AND keys (HunyuanVideo-1.5)
            if keep is None:
                return None
            keeps.append(None if keep.numel() == S else keep)
        return keeps

    def _branch(self, i, B, call):
        cur = self.cur
        if B == cur["B"] and B == 2:
            return self.branches - 1 - i if self.branches == 2 else i  # batched CFG [uncond, cond]: cond = 0
        if B == 1 and cur["B"] == 2:
            return self.branches - 1 - call if self.branches == 2 else call  # a processor looping over the batch
        if B == 1:
            return min(self.call_in_step, self.branches - 1)  # sequential CFG: the first call (cond) = 0
        raise _err(4, f"batch {B} in the attention call ({cur['B']} in the model's input): dsgap.torch.attention "
                      f"keeps state for {self.branches} branches; run one video at a time (batch 1, or 2 for "
                      f"batched CFG), or pass branches=1 for a run without CFG")

    def _torch_dense(self, query, key, value, **kw):
        """a plain dense site (dense_sites="torch"): torch's own SDPA"""
        return self.orig_sdpa(query, key, value, **kw)

    def _sdpa(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
        il, cur = self.layer, self.cur
        q, k, v = query, key, value
        why = None if il is not None and cur is not None else "outside a step"
        why = why or _refusal(q, k, v, is_causal, dropout_p, scale, kw)
        keeps = None
        if why is None and attn_mask is not None:
            keeps = self._key_padding(attn_mask, q.shape[0], q.shape[2])
            why = None if keeps is not None else "a mask that is not key padding"
        if why is not None:
            cross = q.dim() == 4 and k.dim() == 4 and k.shape[-2] != q.shape[-2]
            if il is not None and not (cross and self.family.name == "generic"):   # generic: cross attention is no site
                self.fallback_calls += 1
                self.fallbacks[why] = self.fallbacks.get(why, 0) + 1
            return self.orig_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                                  scale=scale, **kw)
        call = il["calls"]
        il["calls"] += 1
        B, H, S, D = q.shape
        video = cur["video"]
        items = []   # per batch item: (branch, i, kept key indices or None, tokens, text tokens)
        for i in range(B):
            keep = keeps[i] if keeps else None
            n = S if keep is None else int(keep.numel())
            text = n - video
            if text < 0 or (il["order"] == "video" and text):
                raise _err(4, f"layer {il['lid']}: {n} tokens in the attention call, {video} in the video grid "
                              f"{cur['grid']} (order {il['order']!r}): the model's input does not match its "
                              f"family's layout; pass the latents the pipeline makes for this model")
            items.append((self._branch(i, B, call), i, keep, n, text))
        if self.dense_sites == "torch" and all(self._context(H, D, text, q.is_cuda).site_is_dense(self.step, il["lid"], b)
                                               for b, _, _, _, text in items):
            # plain dense attention that leaves the context as it is (warm-up, dense layers): torch's own
            self.torch_dense_calls += 1
            return self._torch_dense(query, key, value, attn_mask=attn_mask, scale=scale, **kw)
        if q.is_cuda and q.dtype == _torch.float32:   # the GPU takes bf16 and fp16
            q, k, v = q.to(_torch.bfloat16), k.to(_torch.bfloat16), v.to(_torch.bfloat16)
        out = _torch.empty_like(q)
        stream = _torch.cuda.current_stream(q.device).cuda_stream if q.is_cuda else None
        # branch 0 first: cfg_meta=shared gives branch 1 the selections branch 0 makes at an anchor
        for branch, i, keep, n, text in sorted(items, key=lambda it: (it[0], it[1])):
            qi, ki, vi, oi = q[i], k[i], v[i], out[i]   # (heads, tokens, head_dim)
            if keep is not None:   # padded text tokens: dsgap attends over the others
                qi, ki, vi = qi.index_select(1, keep), ki.index_select(1, keep), vi.index_select(1, keep)
            perm = None
            if il["order"] == "video,text" and text:   # dsgap's order is text first
                perm = _torch.cat([_torch.arange(video, n), _torch.arange(0, video)]).to(q.device)
                qi, ki, vi = qi.index_select(1, perm), ki.index_select(1, perm), vi.index_select(1, perm)
            if keep is not None or perm is not None:
                oi = _torch.empty_like(qi)
            ctx = self._context(H, D, text, q.is_cuda)
            ctx.attend(self.step, il["lid"], branch, _view(qi), _view(ki), _view(vi), _view(oi), _DTYPES[q.dtype], n,
                       stream)
            if perm is not None:
                oi = oi.index_select(1, _torch.argsort(perm))
            if keep is not None:
                full = out[i]
                full.index_copy_(1, keep, oi)
                drop = _torch.ones(S, dtype=_torch.bool, device=q.device)
                drop[keep] = False
                drop = drop.nonzero().flatten()   # padded queries: torch's attention, under their own mask rows
                mi = attn_mask
                while mi.dim() < 4:
                    mi = mi.unsqueeze(0)
                mi = mi[i:i + 1] if mi.shape[0] > 1 else mi   # the padded queries' own rows: as torch would
                mi = mi.expand(mi.shape[0], mi.shape[1], S, S).index_select(2, drop)
                full.index_copy_(1, drop, self.orig_sdpa(query[i:i + 1].index_select(2, drop), key[i:i + 1],
                                                         value[i:i + 1], attn_mask=mi)[0].to(out.dtype))
            elif perm is not None:
                out[i].copy_(oi)
        return out.to(query.dtype)

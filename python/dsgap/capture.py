"""capture.py: dsgap.capture(module, path, ...) records what each self- or joint-attention call of
a PyTorch module attends to (Q and K after their norms and RoPE, and V) per denoising step, layer
and head, into a dsgap trace (docs/spec.md §6), while the model runs.

How: while the context is open, torch.nn.functional.scaled_dot_product_attention is wrapped; a
forward pre-hook on the top-level module tracks the denoising step (a new step when the timestep
changes) and the CFG branch; pre/post hooks on the family's attention modules say which layer an
SDPA call belongs to (generic mode: the attention modules reached, in order, cross attention
skipped; dsgap.describe lists them). A recorded call
is reduced to the chosen batch item and heads, its padded text tokens dropped (key-padding masks),
its tokens reordered to the trace's text-prefix order, rounded to bf16 on the device (one
contiguous copy the queue owns, with a device flag saying whether it is finite: the model's thread
never waits for the device) and handed to a background writer thread. The queue is bounded in bytes
(max_queue_bytes; on a GPU by default min(8 GiB, a quarter of the free device memory), so device
memory stays bounded and the model blocks only when the writer falls behind); the writer thread
copies each unit and its flag to pinned host memory on its own CUDA stream, reports a non-finite
unit, and hands the unit to the trace writer (trace.py: written as it is with compression "none",
the default, or deflated on a thread pool with "deflate") while the model runs on.
"""
import json
import math
import os
import platform
import queue
import sys
import threading
import time

import numpy as np
import torch

from . import trace as _trace
from .families import FAMILIES, family_of

ORDERS = ("video", "text,video", "video,text")


def padding_keep(mask, i, S):
    """the kept token indices of batch item i of an SDPA mask over S tokens: a key-padding mask (every
    query row and head the same) or a joint padding mask (valid queries AND valid keys: a padded
    query's row masks every key; HunyuanVideo-1.5); None when it is another mask"""
    m = mask
    while m.dim() < 4:
        m = m.unsqueeze(0)
    m = m[i if m.shape[0] > 1 else 0]
    valid = m if m.dtype == torch.bool else m > -1e4
    valid = valid.expand(valid.shape[0], S, S)
    if not bool((valid == valid[:1]).all()):   # heads differ
        return None
    v0 = valid[0]
    if bool((v0 == v0[:1]).all()):             # key padding
        return v0[0].nonzero().flatten()
    kv, qv = v0.any(0), v0.any(1)
    if bool((qv == kv).all()) and bool(((v0 == kv[None]) | ~qv[:, None]).all()):
        return kv.nonzero().flatten()
    return None


def attention_modules(model):
    """(path, module) of the modules whose SDPA calls are attention sites: those with an attention
    processor (diffusers' Attention and its kin) or an *Attention* class, outermost first"""
    out = []
    for name, mod in model.named_modules():
        if name and (hasattr(mod, "processor") or "attention" in type(mod).__name__.lower()) and \
                not any(name.startswith(p + ".") for p, _ in out):
            out.append((name, mod))
    return out


def text_given(a, b=0):
    """the text token counts a forward's bound arguments give (encoder_hidden_states' length, and its
    mask's valid count for batch item b), or None"""
    e = a.get("encoder_hidden_states")
    if isinstance(e, (list, tuple)):
        e = e[0] if e else None
    if not torch.is_tensor(e) or e.dim() != 3:
        return None
    counts = {int(e.shape[1])}
    for k in ("encoder_attention_mask", "encoder_hidden_states_mask", "attention_mask"):
        m = a.get(k)
        if torch.is_tensor(m) and m.dim() == 2 and m.shape[-1] == e.shape[1]:
            mi = m[min(b, m.shape[0] - 1)]
            counts.add(int((mi > 0.5).sum()) if mi.dtype != torch.bool else int(mi.sum()))
    return counts


class CaptureError(RuntimeError):
    """A capture that cannot be made (unsupported attention, a run that does not fit the request)."""


def _as_list(x, what):
    if x is None:
        return None
    if isinstance(x, int):
        x = [x]
    v = sorted(set(int(i) for i in x))
    if not v or v[0] < 0:
        raise CaptureError(f"dsgap.capture: bad {what} {x!r}: non-negative indices expected")
    return v


def _bind(module, args, kwargs):
    import inspect
    try:
        b = inspect.signature(module.forward).bind_partial(*args, **kwargs)
        return dict(b.arguments)
    except TypeError:
        return dict(kwargs)


def _jsonable(d):
    out = {}
    for k, v in dict(d).items():
        if k.startswith("_"):
            continue
        try:
            json.dumps(v)
            out[k] = v
        except TypeError:
            out[k] = list(v) if isinstance(v, tuple) else repr(v)
    return out


class _Progress:
    def __init__(self, enabled, total_units):
        self.enabled, self.total, self.t0, self.last = enabled, total_units, time.time(), 0.0

    def update(self, units, nbytes, step, final=False):
        if not self.enabled:
            return
        now = time.time()
        if not final and now - self.last < 0.5:
            return
        self.last = now
        rate = nbytes / max(now - self.t0, 1e-9) / 1e6
        tot = f"/{self.total}" if self.total else ""
        bar = ""
        if self.total:
            n = int(30 * min(units / self.total, 1.0))
            bar = "[" + "#" * n + "." * (30 - n) + "] "
        sys.stderr.write(f"\rdsgap capture {bar}{units}{tot} units, step {step}, {nbytes / 1e9:.2f} GB, {rate:.0f} MB/s")
        if final:
            sys.stderr.write("\n")
        sys.stderr.flush()


class capture:
    """Context manager: record the attention of `module` into the trace `path`.

    module: a transformer, or a list of expert transformers of one family that share the denoising
    loop (Wan2.2 A14B: [pipe.transformer, pipe.transformer_2]): one trace, each step from the expert
    that ran it (layers are block positions, the same in every expert), the trace's config naming
    the expert of every stored step (capture.experts).

    steps, layers, heads: denoising steps, attention layers (positions in the family's list of
    attention modules; in generic mode the self- and joint-attention sites in the order a forward
    reaches them, as dsgap.describe lists them: block numbers, cross attention skipped) and heads to
    keep (None: all).
    branch: "cond" or "uncond" under classifier-free guidance (batched: the second half of the
    batch is cond, as diffusers' pipelines concatenate [uncond, cond]; sequential: the first call
    of a step is cond), or an int: that batch item of every call.
    Generic mode (any module; forced by layout=): layout is the token order of the attention
    call ("video", "text,video" or "video,text") and grid the video grid (frames, height, width)
    or a function of the forward's bound arguments returning it.
    scheduler: to record /sigma from its sigmas (else sigma = timestep / 1000, flow matching);
    timestep_scale: the factor from the model's timestep argument to the 0..1000 timestep recorded in
    /timestep (1: given timesteps, Wan, HunyuanVideo; 1000: given t / 1000, FLUX, FLUX.2, Qwen-Image);
    None: the family's, else detected at the first step from the scheduler's timesteps (which of
    timesteps and timesteps / 1000 the model is given), else from the value (at most 1: 1000);
    total_steps: the run's step count when steps is None, for the disk check up front.
    dtype: "bf16" (the C writer's type, default) or "float32" (exact; dsgap reads both).
    compression: "none" (default: chunks written as they are, the writer bound by memory copies and
    the disk) or "deflate" (the C writer's shuffle + deflate 1: about 0.7x the size on disk, but
    about 27 MB/s a core); threads: deflate's pool (default min(16, cores)).
    max_queue_bytes: units waiting for the writer (device memory when the model runs on a GPU);
    None: min(8 GiB, a quarter of the free device memory) on a GPU, 1 GiB on the CPU.
    """

    def __init__(self, module, path, steps=None, layers=None, heads=None, branch="cond", *, layout=None,
                 grid=None, scheduler=None, timestep_scale=None, total_steps=None, progress=True, max_queue_bytes=None,
                 model=None, source="", config=None, threads=None, dtype="bf16",
                 compression=_trace.DEFAULT_COMPRESSION, check_text=True):
        if branch not in ("cond", "uncond") and not isinstance(branch, int):
            raise CaptureError(f"dsgap.capture: branch must be 'cond', 'uncond' or a batch index, not {branch!r}")
        self.modules = list(module) if isinstance(module, (list, tuple)) else [module]
        if not self.modules:
            raise CaptureError("dsgap.capture: no module given: pass a transformer, or a list of expert transformers")
        kinds = {type(m).__name__ for m in self.modules}
        if len(kinds) > 1:
            raise CaptureError(f"dsgap.capture: experts of different classes ({', '.join(sorted(kinds))}): the "
                               f"experts of one loop are transformers of one family (e.g. Wan2.2's transformer and "
                               f"transformer_2)")
        self.module, self.path = self.modules[0], os.fspath(path)
        self.steps, self.layers, self.heads = _as_list(steps, "steps"), _as_list(layers, "layers"), _as_list(heads, "heads")
        self.branch, self.scheduler, self.total_steps = branch, scheduler, total_steps
        self.progress_on, self.max_queue_bytes, self.threads = progress, max_queue_bytes, threads
        if dtype not in ("bf16", "float32"):
            raise CaptureError(f"dsgap.capture: dtype must be 'bf16' (the default) or 'float32', not {dtype!r}")
        self.dtype = dtype
        if compression not in _trace.COMPRESSIONS:
            raise CaptureError(f"dsgap.capture: compression must be one of {_trace.COMPRESSIONS}, not {compression!r}")
        self.compression = compression
        self.extra = dict(model=model, source=source, config=config or {})
        self.family = None if layout is not None else family_of(self.module)
        if self.family is None:
            if layout is None:
                raise CaptureError(
                    f"dsgap.capture: {type(module).__name__} is not a supported model (supported: "
                    f"{', '.join(FAMILIES)}); for any module that calls torch.nn.functional."
                    f"scaled_dot_product_attention, use the generic mode: capture(..., layout='text,video', grid=(F, H, W))")
            if layout not in ORDERS:
                raise CaptureError(f"dsgap.capture: layout must be one of {ORDERS}, not {layout!r}")
            if grid is None:
                raise CaptureError("dsgap.capture: generic mode needs grid=(frames, height, width) of the video tokens")
        self.layout, self.grid_arg, self.check_text = layout, grid, check_text
        if timestep_scale is not None and not (isinstance(timestep_scale, (int, float)) and timestep_scale > 0):
            raise CaptureError(f"dsgap.capture: timestep_scale={timestep_scale!r}: pass a positive number (1: the model "
                               f"is given timesteps in [0, 1000]; 1000: it is given t / 1000, e.g. FLUX, Qwen-Image)")
        self.ts_scale = None if timestep_scale is None else float(timestep_scale)

    # ----------------------------------------------------------------------------------------------
    def __enter__(self):
        self.hooks, self.err = [], None
        self.step = -1            # denoising step of the current forward
        self.last_t = None
        self.call_in_step = 0
        self.cur = None           # the active forward: dict(step_pos, b, grid, video)
        self.in_layer = None
        self.step_info = {}       # step position -> (step index, timestep, sigma)
        self.writer = None
        self.meta = None
        self.units_done = 0
        self.bytes_done = 0
        self.pending = 0
        self.cv = threading.Condition()
        self.q = queue.Queue()
        self.copy_stream = None
        self.werr = None
        if self.family:
            per = [self.family.attention(m) for m in self.modules]
            mods = per[0]
            if not mods:
                raise CaptureError(f"dsgap.capture: {type(self.module).__name__} has no attention blocks")
            if len({len(x) for x in per}) > 1:
                raise CaptureError(f"dsgap.capture: experts with {', '.join(str(len(x)) for x in per)} attention "
                                   f"layers: the experts of one loop have the same blocks")
            self.nlayers = len(mods)
            keep = self.layers or list(range(len(mods)))
            if keep[-1] >= len(mods):
                raise CaptureError(f"dsgap.capture: layer {keep[-1]} is outside 0..{len(mods) - 1}")
            self.layer_pos = {lid: i for i, lid in enumerate(keep)}
            for expert_mods in per:
                for lid in keep:
                    name, mod, order = expert_mods[lid]
                    self.hooks.append(mod.register_forward_pre_hook(self._attn_pre(lid, name, order)))
                    self.hooks.append(mod.register_forward_hook(self._attn_post))
        else:
            self.nlayers = None
            self.layer_pos = {lid: i for i, lid in enumerate(self.layers)} if self.layers else None
            # layers by attention module (block order), not by SDPA call: an SDPA call inside an attention
            # module (one with a processor, or an *Attention* class) is that module's site; cross attention
            # is no layer; calls outside any such module are numbered by their order in the forward
            self.site_ids, self.site_names, self.gen_stack, self.site = {}, [], [], None
            self.vproj = {}   # the text's V projection of a joint module (add_v_proj): where the text sits
            for m in self.modules:
                for name, mod in attention_modules(m):
                    self.hooks.append(mod.register_forward_pre_hook(self._gen_pre(name)))
                    self.hooks.append(mod.register_forward_hook(self._gen_post))
                    if isinstance(getattr(mod, "add_v_proj", None), torch.nn.Module):
                        self.hooks.append(mod.add_v_proj.register_forward_hook(self._grab_v(name)))
        self.expert, self.expert_of = 0, {}   # the running expert; step position -> its expert
        for e, m in enumerate(self.modules):
            self.hooks.append(m.register_forward_pre_hook(self._pre_of(e), with_kwargs=True))
            self.hooks.append(m.register_forward_hook(self._post))
        self.orig_sdpa = torch.nn.functional.scaled_dot_product_attention
        torch.nn.functional.scaled_dot_product_attention = self._sdpa
        self.thread = threading.Thread(target=self._write_loop, name="dsgap-trace-writer", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        torch.nn.functional.scaled_dot_product_attention = self.orig_sdpa
        for h in self.hooks:
            h.remove()
        self.q.put(None)
        self.thread.join()
        if exc_type is not None or self.werr is not None:
            if self.writer:
                self.writer.abort()
            if exc_type is None:
                raise self.werr
            return False
        if self.writer is None:
            raise CaptureError(f"dsgap.capture: nothing was captured into {self.path}: no attention call of "
                               f"{type(self.module).__name__} matched steps={self.steps} branch={self.branch!r} "
                               f"(did the model run inside the with block?)")
        n = self.writer.steps
        missing = [p for p in range(n) if p not in self.step_info]
        if missing:
            self.writer.abort()
            want = self.steps[missing[0]] if self.steps else missing[0]
            raise CaptureError(f"dsgap.capture: step {want} was requested but the run never reached it "
                               f"({self.step + 1} steps ran)")
        info = [self.step_info[p] for p in range(n)]
        if len(self.modules) > 1:   # written with the config at finish
            self.meta["config"]["capture"]["experts"] = dict(
                count=len(self.modules), classes=[type(m).__name__ for m in self.modules],
                expert_of_step=[self.expert_of[p] for p in range(n)])
        self.writer.finish([i[0] for i in info], [i[1] for i in info], [i[2] for i in info])
        self.prog.update(self.units_done, self.bytes_done, self.step, final=True)
        return False

    # ----------------------------------------------------------------------------------------------
    def _pre_of(self, expert):
        def hook(module, args, kwargs):
            self.expert = expert
            return self._pre(module, args, kwargs)
        return hook

    def _pre(self, module, args, kwargs):
        a = _bind(module, args, kwargs)
        t = a.get("timestep", a.get("t"))
        tkey = None if t is None else tuple(torch.as_tensor(t).detach().flatten()[:4].float().cpu().tolist())
        if self.step < 0 or tkey is None or tkey != self.last_t:
            self.step += 1
            self.call_in_step = 0
        else:
            self.call_in_step += 1
        self.last_t = tkey
        self.cur = None
        if self.steps is not None and self.step not in self.steps:
            return
        hs = a.get("hidden_states", args[0] if args else None)
        B = int(hs.shape[0]) if torch.is_tensor(hs) else 1
        if isinstance(self.branch, int):
            if self.branch >= B:
                raise CaptureError(f"dsgap.capture: branch {self.branch} but the batch has {B} items")
            b, on = self.branch, True
        elif B >= 2 and B % 2 == 0:   # batched CFG: [uncond, cond]
            b, on = (B // 2 if self.branch == "cond" else 0), self.call_in_step == 0
        else:                         # sequential CFG: cond first
            b, on = 0, self.call_in_step == (0 if self.branch == "cond" else 1)
        if not on:
            return
        if self.family:
            grid = self.family.grid(module, a)
        else:
            grid = tuple(int(x) for x in (self.grid_arg(a) if callable(self.grid_arg) else self.grid_arg))
        pos = self.steps.index(self.step) if self.steps is not None else len(self.step_info)
        tval = float(torch.as_tensor(t).detach().flatten().float()[min(b, torch.as_tensor(t).numel() - 1)]) if t is not None else float(self.step)
        timestep = tval * self._timestep_scale(tval)
        sigma = timestep / 1000.0
        if self.scheduler is not None and getattr(self.scheduler, "sigmas", None) is not None:
            ts = getattr(self.scheduler, "timesteps", None)
            if ts is not None and len(ts):
                hit = (torch.as_tensor(ts).float().cpu() - timestep).abs().argmin().item()
                sigma = float(self.scheduler.sigmas[hit])
        self.step_info[pos] = (self.step, timestep, sigma)
        self.expert_of[pos] = self.expert
        self.cur = dict(step_pos=pos, b=b, B=B, grid=grid, video=grid[0] * grid[1] * grid[2], sdpa=0,
                        text_given=None if self.family or not self.check_text else text_given(a, b))

    def _timestep_scale(self, tval):
        """the factor from the forward's timestep to the 0..1000 timestep (its sigma: / 1000): timestep_scale=,
        else the family's, else detected at the first recorded step: from the scheduler (whether the model
        is given its timesteps or timesteps / 1000), else from the value (at most 1: t / 1000)"""
        if self.ts_scale is None:
            ts = getattr(self.scheduler, "timesteps", None) if self.scheduler is not None else None
            if self.family:
                self.ts_scale = 1000.0 / self.family.sigma_scale
            elif ts is not None and len(ts):
                ts = torch.as_tensor(ts).float().cpu()
                raw = float((ts - tval).abs().min())
                div = float((ts / 1000.0 - tval).abs().min()) * 1000.0
                self.ts_scale = 1000.0 if div < raw else 1.0
            else:
                self.ts_scale = 1000.0 if abs(tval) <= 1.0 + 1e-6 else 1.0
        return self.ts_scale

    def _post(self, module, args, out):
        self.cur = None
        if self.werr is not None:
            raise self.werr

    def _gen_pre(self, name):
        def hook(mod, args):
            self.gen_stack.append([name, 0])
        return hook

    def _grab_v(self, name):
        def hook(mod, args, out):
            if self.cur is not None and torch.is_tensor(out) and out.dim() == 3:
                self.vproj[name] = out.detach()
        return hook

    def _check_layout(self, where, site, order, i, vi, S, text):
        """under a text layout, the text's V rows (add_v_proj's output, where the module has one) must be
        where the layout says: one error naming the right layout otherwise"""
        tv = self.vproj.pop(site, None) if site else None
        if tv is None or tv.shape[1] != text or tv.shape[-1] != vi.shape[0] * vi.shape[-1]:
            return
        tv = tv[min(i, tv.shape[0] - 1)].reshape(text, vi.shape[0], -1).transpose(0, 1).to(vi.dtype)
        first, last = torch.equal(vi[:, :text], tv), torch.equal(vi[:, S - text:], tv)
        right = "text,video" if first and not last else "video,text" if last and not first else None
        if right is not None and right != order:
            raise CaptureError(f"dsgap.capture: {where} ({site}): layout {order!r}, but the text's values "
                               f"(add_v_proj) are the {'first' if first else 'last'} {text} tokens of the call: "
                               f"pass layout={right!r} (dsgap.describe(model, ...) reads it)")

    def _gen_post(self, mod, args, out):
        if self.gen_stack:
            self.gen_stack.pop()

    def _attn_pre(self, lid, name, order):
        def hook(mod, args):
            if self.cur is not None:
                self.in_layer = dict(lid=lid, name=name, order=order, calls=0, mod=mod)
        return hook

    def _attn_post(self, mod, args, out):
        il = self.in_layer
        self.in_layer = None
        if il is not None and il["calls"] == 0:
            proc = type(getattr(mod, "processor", None)).__name__
            raise CaptureError(
                f"dsgap.capture: unsupported attention in layer {il['lid']} ({il['name']}, processor {proc}): it "
                f"did not call torch.nn.functional.scaled_dot_product_attention. Use diffusers' native attention "
                f"backend (model.set_attention_backend('native') or the default processor), or the generic mode")

    def _sdpa(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
        out = self.orig_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                             scale=scale, **kw)
        cur = self.cur
        if cur is None:
            return out
        if self.family:
            il = self.in_layer
            if il is None:
                return out
            call = il["calls"]
            il["calls"] += 1
            lid, order = il["lid"], il["order"]
        else:
            if query.dim() == 4 and key.dim() == 4 and key.shape[-2] != query.shape[-2]:
                return out   # cross attention: no layer
            self.site = self.gen_stack[-1][0] if self.gen_stack else None
            if self.gen_stack:
                site = self.gen_stack[-1]
                skey, sname = (site[0], site[1]), site[0] + (f" (call {site[1]})" if site[1] else "")
                site[1] += 1
            else:
                skey, sname = ("", cur["sdpa"]), f"SDPA call {cur['sdpa']} outside attention modules"
                cur["sdpa"] += 1
            lid = self.site_ids.get(skey)
            if lid is None:
                lid = self.site_ids[skey] = len(self.site_ids)
                self.site_names.append(sname)
            order, call = self.layout, 0
            if self.layer_pos is not None and lid not in self.layer_pos:
                return out
        with torch.no_grad():
            self._record(lid, order, call, query, key, value, attn_mask, dropout_p, is_causal, scale, kw)
        return out

    # ----------------------------------------------------------------------------------------------
    def _record(self, lid, order, call, q, k, v, mask, dropout_p, is_causal, scale, kw):
        cur = self.cur
        where = f"layer {lid}"
        if q.dim() != 4:
            raise CaptureError(f"dsgap.capture: unsupported attention in {where}: query of rank {q.dim()}, expected (batch, heads, tokens, head_dim)")
        if is_causal or dropout_p or kw.get("enable_gqa") or k.shape[1] != q.shape[1] or k.shape[2] != q.shape[2]:
            raise CaptureError(f"dsgap.capture: unsupported attention in {where}: causal, dropout, grouped-query "
                               f"or cross attention (query {tuple(q.shape)}, key {tuple(k.shape)})")
        D = q.shape[-1]
        if scale is not None and abs(scale * math.sqrt(D) - 1) > 1e-6:
            raise CaptureError(f"dsgap.capture: unsupported attention in {where}: scale {scale}, dsgap replays 1/sqrt(head_dim)")
        Bq, b = q.shape[0], cur["b"]
        if Bq == cur["B"]:
            i = b
        elif Bq == 1 and cur["B"] > 1:   # a processor looping over the batch (Mochi): call k is item k
            if call != b:
                return
            i = 0
        else:
            raise CaptureError(f"dsgap.capture: unsupported attention in {where}: batch {Bq} in the attention call, "
                               f"{cur['B']} in the model's input")
        qi, ki, vi = q[i], k[i], v[i]   # (H, S, D)
        S = qi.shape[1]
        if mask is not None:
            keep = padding_keep(mask, i, S)
            if keep is None:
                raise CaptureError(f"dsgap.capture: unsupported attention in {where}: the attention mask is neither "
                                   f"a key-padding mask (the same for every query and head) nor a joint padding mask "
                                   f"(valid queries AND valid keys); dsgap takes only padded tokens left out")
            if keep.numel() < S:
                qi, ki, vi = qi[:, keep], ki[:, keep], vi[:, keep]
                S = keep.numel()
        video = cur["video"]
        text = S - video
        g = "x".join(map(str, cur["grid"]))
        if text < 0 or (order == "video" and text):
            raise CaptureError(f"dsgap.capture: {where}: the attention call has {S} tokens but the video grid "
                               f"{g} has {video} (layout {order!r}): pass grid=(frames, height, width) of the "
                               f"video tokens after patchify" + (", and a layout with text ('text,video' or "
                               f"'video,text') for joint attention" if order == "video" and text > 0 else ""))
        given = cur.get("text_given")
        if given is not None and order != "video" and text not in given:
            raise CaptureError(f"dsgap.capture: {where}: the attention call has {S} tokens and grid {g} has {video} "
                               f"video tokens, so {text} would be text, but the model was given "
                               f"{' or '.join(map(str, sorted(set(given))))} text tokens (encoder_hidden_states): the "
                               f"grid does not match the video tokens; pass grid=(F, H, W) with F*H*W = "
                               f"{S - max(given)} (dsgap.describe(model, ...) lists each site's tokens), or "
                               f"check_text=False when the attention holds other extra tokens")
        if not self.family and text and S == q.shape[2]:   # no padding dropped: the rows are the call's
            self._check_layout(where, self.site, order, i, vi, S, text)
        if order == "video,text" and text:
            idx = torch.cat([torch.arange(video, S), torch.arange(0, video)]).to(qi.device)
            qi, ki, vi = qi[:, idx], ki[:, idx], vi[:, idx]
        H = qi.shape[0]
        heads = self.heads or list(range(H))
        if heads[-1] >= H:
            raise CaptureError(f"dsgap.capture: head {heads[-1]} is outside 0..{H - 1}")
        if self.writer is None:
            self._open(H, S, D, text, cur["grid"], order)
        elif (S, D, text) != (self.meta["tokens"], self.meta["head_dim"], self.meta["text_tokens"]):
            raise CaptureError(f"dsgap.capture: {where}: {S} tokens ({text} text) x {D}, but the trace holds "
                               f"{self.meta['tokens']} ({self.meta['text_tokens']} text) x {self.meta['head_dim']}")
        hidx = None if len(heads) == H else torch.tensor(heads, device=qi.device)
        lpos = self.layer_pos[lid]
        tdtype = torch.bfloat16 if self.dtype == "bf16" else torch.float32
        for name, x in zip(_trace.QKV, (qi, ki, vi)):
            # one contiguous copy the queue owns (index_select's result is one), in the trace's dtype
            owned = hidx is not None
            if owned:
                x = x.index_select(0, hidx)
            x = x.to(tdtype, memory_format=torch.contiguous_format, copy=not owned)
            self._enqueue(name, cur["step_pos"], lpos, x, torch.isfinite(x).all(), f"step {self.step} layer {lid}")

    def _open(self, H, S, D, text, grid, order):
        nh = len(self.heads) if self.heads else H
        nl = len(self.layer_pos) if self.layer_pos is not None else None
        if nl is None:
            raise CaptureError("dsgap.capture: generic mode needs layers= (which SDPA calls of a forward to keep)")
        nsteps = len(self.steps) if self.steps is not None else self.total_steps
        if nsteps is None and self.scheduler is not None and getattr(self.scheduler, "timesteps", None) is not None:
            nsteps = len(self.scheduler.timesteps)
        unit = _trace.unit_bytes(S, D) * (1 if self.dtype == "bf16" else 2)
        _trace.disk_check(self.path, 3 * (nsteps or 1) * nl * nh * unit)
        m = self.module
        cfg = {"model": _jsonable(m.config) if hasattr(m, "config") else {},
               "capture": {"family": self.family.name if self.family else "generic",
                           "branch": self.branch, "attention_order": order, "trace_order": "text,video",
                           "steps": self.steps, "layers": sorted(self.layer_pos), "heads": self.heads,
                           "total_layers": self.nlayers, "grid": list(grid), "text_tokens": text,
                           "timestep_scale": self.ts_scale,
                           "compression": self.compression},
               "run": {"captured_pass": self.branch if isinstance(self.branch, str) else f"batch {self.branch}"},
               "versions": {"torch": torch.__version__, "python": platform.python_version()}}
        try:
            import diffusers
            cfg["versions"]["diffusers"] = diffusers.__version__
        except ImportError:
            pass
        cfg.update(self.extra["config"])
        self.meta = dict(layers=nl, heads=nh, tokens=S, head_dim=D, grid=list(grid), text_tokens=text,
                         layer_index=sorted(self.layer_pos), head_index=self.heads or list(range(H)),
                         model=self.extra["model"] or type(m).__name__, source=self.extra["source"],
                         created_by="dsgap.capture (python)", config=cfg)
        self.writer = _trace.TraceWriter(self.path, self.meta, steps=len(self.steps) if self.steps else None,
                                         threads=self.threads, dtype=self.dtype, compression=self.compression)
        total = 3 * nsteps * nl * nh if nsteps else 0
        self.prog = _Progress(self.progress_on, total)

    def _queue_limit(self, x):
        if self.max_queue_bytes is None:
            if x.is_cuda:
                free, _ = torch.cuda.mem_get_info(x.device)
                self.max_queue_bytes = min(8 << 30, free // 4)
            else:
                self.max_queue_bytes = 1 << 30
        return self.max_queue_bytes

    def _enqueue(self, name, s, l, x, finite, where):
        """x: a tensor the queue owns (heads, tokens, head_dim); finite: a bool tensor on x's device,
        checked by the writer thread (where: "step S layer L" for its error); on a GPU, an event
        orders the writer's copies after the kernels that made them"""
        n = x.numel() * x.element_size()
        limit = self._queue_limit(x)
        with self.cv:
            while self.pending and self.pending + n > limit and self.werr is None:
                self.cv.wait(0.1)
            if self.werr is not None:
                raise self.werr
            self.pending += n
        ev = None
        if x.is_cuda:
            ev = torch.cuda.Event()
            ev.record()
        self.q.put((name, s, l, x, finite, where, ev, n))

    def _to_host(self, x, finite, ev):
        """the writer thread's copy of a queued unit and its finite flag to pinned host memory, on
        its own stream"""
        if ev is None:
            return x, finite
        if self.copy_stream is None:
            self.copy_stream = torch.cuda.Stream(x.device)
        host = torch.empty(x.shape, dtype=x.dtype, pin_memory=True)
        flag = torch.empty((), dtype=torch.bool, pin_memory=True)
        with torch.cuda.stream(self.copy_stream):
            self.copy_stream.wait_event(ev)
            host.copy_(x, non_blocking=True)
            flag.copy_(finite, non_blocking=True)
        self.copy_stream.synchronize()
        return host, flag

    def _write_loop(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            name, s, l, x, finite, where, ev, n = item
            del item  # the unit's device memory goes with x, not at the next get()
            try:
                if self.werr is None:
                    host, finite = self._to_host(x, finite, ev)
                    del x
                    if not bool(finite):
                        raise CaptureError(f"dsgap.capture: non-finite value in /{name} at {where}")
                    words = host.view(torch.int16).numpy().view(np.uint16) if host.dtype == torch.bfloat16 else host.numpy()
                    self.writer.put(name, s, l, words)
                    self.units_done += words.shape[0]
                    self.bytes_done += n
                    self.prog.update(self.units_done, self.bytes_done, self.step)
            except BaseException as e:  # reported to the model's thread at its next call
                self.werr = e if isinstance(e, (CaptureError, _trace.TraceError)) else CaptureError(f"dsgap.capture: writer failed: {e}")
            finally:
                with self.cv:
                    self.pending -= n
                    self.cv.notify_all()

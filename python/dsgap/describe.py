"""describe.py: dsgap.describe(model, *args, **kwargs) runs one forward of a model (no gradients)
and lists the attention sites it reaches, before any capture: what the generic mode of
dsgap.capture needs (layers, layout, grid) without trial and error.

    sites = dsgap.describe(pipe.transformer, hidden_states=x, timestep=t, encoder_hidden_states=e)
    print(sites)            # a table; sites.rows: one dict per site; sites.layout, sites.video_tokens

Per site (an SDPA call inside an attention module: one with a processor, or an *Attention* class;
calls outside any are numbered by their order): layer (dsgap.capture's generic layer index: the
self- and joint-attention sites in the order the forward reaches them; cross attention has none),
module path, kind (self, joint: text and video in one call, cross: keys of another length), heads,
head_dim, query and key tokens, text tokens (tokens less the video tokens), the mask (none, key
padding, joint padding: valid queries AND keys, other) and, where the module projects the text itself
(add_v_proj: diffusers' joint attention), where the text sits (first or last), read from V's rows.
Video tokens: grid= (frames, height, width) when given, else from hidden_states and the model's
patch sizes (when a site agrees), else the fewest tokens of a self- or joint site less the text
given to the forward (encoder_hidden_states) at joint sites.
"""
import inspect

import torch

from .capture import attention_modules, padding_keep, text_given


def _bind(module, args, kwargs):
    try:
        return dict(inspect.signature(module.forward).bind_partial(*args, **kwargs).arguments)
    except TypeError:
        return dict(kwargs)


def _video_from_input(model, a, sites):
    """the video tokens from the forward's hidden_states and the model's patch sizes: (B, S, C) is S
    tokens already; (B, C, F, H, W) and (B, C, H, W) over patch_size (and patch_size_t); None unless
    some self/joint site holds that many tokens or more in every joint site"""
    hs = a.get("hidden_states")
    cfg = getattr(model, "config", None)
    if not isinstance(hs, torch.Tensor):
        return None
    p = getattr(cfg, "patch_size", None) if cfg is not None else None
    pt = getattr(cfg, "patch_size_t", None) if cfg is not None else None
    p3 = tuple(p) if isinstance(p, (list, tuple)) else (pt or 1, p, p) if p else None
    if hs.dim() == 3:
        est = int(hs.shape[1])
    elif hs.dim() == 5 and p3:
        est = (hs.shape[2] // p3[0]) * (hs.shape[3] // p3[1]) * (hs.shape[4] // p3[2])
    elif hs.dim() == 4 and p3:
        est = (hs.shape[2] // p3[1]) * (hs.shape[3] // p3[2])
    else:
        return None
    own = [r for r in sites if r["kind"] != "cross"]
    if est > 0 and own and (any(r["tokens"] == est for r in own) or
                            all(r["tokens"] > est for r in own if r["kind"] == "joint") and
                            any(r["kind"] == "joint" for r in own)):
        return int(est)
    return None


class Description:
    """the sites of one forward: rows (dicts), video_tokens, text_tokens (given to the forward),
    layout (where joint sites hold their text, when it could be read), layers (self/joint count)"""

    def __init__(self, rows, video, text, layout):
        self.rows, self.video_tokens, self.text_tokens, self.layout = rows, video, text, layout
        self.layers = sum(1 for r in rows if r["layer"] is not None)

    def __iter__(self):
        return iter(self.rows)

    def __len__(self):
        return len(self.rows)

    def __str__(self):
        head = ("layer", "module", "kind", "heads", "head_dim", "tokens", "keys", "text", "mask", "text at")
        lines = [(("" if r["layer"] is None else str(r["layer"])), r["module"], r["kind"], str(r["heads"]),
                  str(r["head_dim"]), str(r["tokens"]), str(r["key_tokens"]),
                  "" if r["text_tokens"] is None else str(r["text_tokens"]), r["mask"], r["text_at"] or "")
                 for r in self.rows]
        w = [max(len(h), *(len(x[i]) for x in lines)) if lines else len(h) for i, h in enumerate(head)]
        fmt = "  ".join("{:<%d}" % n for n in w)
        out = [fmt.format(*head)] + [fmt.format(*x) for x in lines]
        out.append(f"{self.layers} self/joint attention layers; video tokens {self.video_tokens}; text given "
                   f"{self.text_tokens}; layout {self.layout or 'video (no text in the attention)'}")
        return "\n".join(out)

    __repr__ = __str__


def describe(model, *args, grid=None, **kwargs):
    """Run model(*args, **kwargs) once without gradients and return the attention sites it reached
    (a Description). grid: the video grid (frames, height, width) in tokens, if known."""
    sites, stack, vproj = [], [], {}
    hooks = []
    bound = {}

    def top_pre(mod, a, kw):
        bound.update(_bind(mod, a, kw))

    def pre(name):
        def hook(mod, a, kw):
            e = kw.get("encoder_hidden_states", a[1] if len(a) > 1 else None)
            stack.append(dict(name=name, calls=0, encoder=torch.is_tensor(e)))
            vproj.pop(name, None)
        return hook

    def post(mod, a, out):
        stack.pop()

    def grab(name):
        def hook(mod, a, out):
            vproj[name] = out.detach()
        return hook

    for name, mod in attention_modules(model):
        hooks.append(mod.register_forward_pre_hook(pre(name), with_kwargs=True))
        hooks.append(mod.register_forward_hook(post))
        if isinstance(getattr(mod, "add_v_proj", None), torch.nn.Module):
            hooks.append(mod.add_v_proj.register_forward_hook(grab(name)))
    hooks.append(model.register_forward_pre_hook(top_pre, with_kwargs=True))
    orig = torch.nn.functional.scaled_dot_product_attention
    loose = [0]

    def sdpa(query, key, value, attn_mask=None, *a, **kw):
        out = orig(query, key, value, attn_mask, *a, **kw)
        if query.dim() != 4:
            return out
        if stack:
            s = stack[-1]
            path = s["name"] + (f" (call {s['calls']})" if s["calls"] else "")
            s["calls"] += 1
            enc = s["encoder"]
            name = s["name"]
        else:
            path, enc, name = f"(SDPA call {loose[0]} outside attention modules)", False, None
            loose[0] += 1
        S, Sk = int(query.shape[-2]), int(key.shape[-2])
        kind = "cross" if Sk != S else ("joint" if enc else "self")
        mask = "none"
        if attn_mask is not None:
            if Sk != S:
                mask = "other"
            else:
                keep = padding_keep(attn_mask, 0, S)
                m = attn_mask
                while m.dim() < 4:
                    m = m.unsqueeze(0)
                valid = m[0] if m.dtype == torch.bool else m[0] > -1e4
                rows_same = bool((valid.expand(valid.shape[0], S, S) == valid.expand(valid.shape[0], S, S)[:, :1]).all())
                mask = "other" if keep is None else ("key padding" if rows_same else "joint padding")
        text_at = None
        vp = vproj.get(name) if name else None
        if kind == "joint" and vp is not None and vp.dim() == 3 and vp.shape[1] < S:
            T, H = int(vp.shape[1]), int(value.shape[1])
            tv = vp[:1].reshape(1, T, H, -1).transpose(1, 2).to(value.dtype)
            if tv.shape[-1] == value.shape[-1]:
                if torch.equal(value[:1, :, :T], tv):
                    text_at = "first"
                elif torch.equal(value[:1, :, S - T:], tv):
                    text_at = "last"
        sites.append(dict(module=path, kind=kind, heads=int(query.shape[1]), head_dim=int(query.shape[-1]),
                          tokens=S, key_tokens=Sk, mask=mask, text_at=text_at, layer=None, text_tokens=None))
        return out

    torch.nn.functional.scaled_dot_product_attention = sdpa
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        torch.nn.functional.scaled_dot_product_attention = orig
        for h in hooks:
            h.remove()
    given = text_given(bound)
    T = max(given) if given else 0
    if grid is not None:
        video = int(grid[0]) * int(grid[1]) * int(grid[2])
    else:
        video = _video_from_input(model, bound, sites)
        if video is None:
            cand = [r["tokens"] - (T if r["kind"] == "joint" else 0) for r in sites if r["kind"] != "cross"]
            video = min(cand) if cand else None
    layer, ids = 0, {}
    for r in sites:
        if r["kind"] == "cross":
            continue
        if r["module"] not in ids:
            ids[r["module"]] = layer
            layer += 1
        r["layer"] = ids[r["module"]]
        r["text_tokens"] = None if video is None or r["tokens"] < video else r["tokens"] - video
    at = {r["text_at"] for r in sites if r["text_at"]}
    layout = None
    if len(at) == 1:
        layout = "text,video" if at == {"first"} else "video,text"
    elif any((r["text_tokens"] or 0) > 0 for r in sites):
        layout = "unknown (text in the attention, its place not read: no add_v_proj)"
    return Description(sites, video, T or None, layout)

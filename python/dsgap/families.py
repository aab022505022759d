"""families.py: where each supported diffusers transformer keeps its self- or joint-attention
modules, how its tokens are laid out in the attention call, and its video grid after patchify.

A family gives, for a top-level module:
  attention(module)   the ordered attention modules (trace layer i = the i-th)
  order               token order inside the attention call: "video", "text,video" or "video,text"
  grid(module, args)  (frames, height, width) in tokens from the forward's arguments
  timestep(args)      the forward's timestep tensor; sigma_from_t: how sigma follows from it
Recognised by class name, so diffusers is not imported here.
"""
import math


class Family:
    def __init__(self, name, attention, order, grid, sigma_scale=1000.0):
        self.name, self._attention, self.order, self._grid = name, attention, order, grid
        self.sigma_scale = sigma_scale  # sigma = timestep / sigma_scale when no scheduler is given

    def attention(self, m):
        return [(name, mod, self.order(name) if callable(self.order) else self.order) for name, mod in self._attention(m)]

    def grid(self, m, a):
        return tuple(int(x) for x in self._grid(m, a))


def _cfg(m, k, default=None):
    return getattr(m.config, k, default) if hasattr(m, "config") else default


def _patch3(m):
    p = _cfg(m, "patch_size")
    return tuple(p) if isinstance(p, (list, tuple)) else (1, p, p)


def _wan_grid(m, a):
    _, _, F, H, W = a["hidden_states"].shape
    pt, ph, pw = _patch3(m)
    return F // pt, H // ph, W // pw


def _hunyuan_grid(m, a):
    _, _, F, H, W = a["hidden_states"].shape
    p, pt = _cfg(m, "patch_size"), _cfg(m, "patch_size_t", 1) or 1
    return F // pt, H // p, W // p


def _cogvideox_grid(m, a):
    _, F, _, H, W = a["hidden_states"].shape
    p, pt = _cfg(m, "patch_size"), _cfg(m, "patch_size_t") or 1
    return math.ceil(F / pt), H // p, W // p


def _mochi_grid(m, a):
    _, _, F, H, W = a["hidden_states"].shape
    p = _cfg(m, "patch_size")
    return F, H // p, W // p


def _ltx_grid(m, a):
    return a["num_frames"], a["height"], a["width"]


def _ltx2_grid(m, a):
    p, pt = _cfg(m, "patch_size", 1) or 1, _cfg(m, "patch_size_t", 1) or 1
    return a["num_frames"] // pt, a["height"] // p, a["width"] // p


def _flux_grid(m, a):
    ids = a.get("img_ids")
    S = a["hidden_states"].shape[1]
    if ids is not None:
        ids = ids[0] if ids.dim() == 3 else ids
        h, w = int(ids[:, 1].max()) + 1, int(ids[:, 2].max()) + 1
        if h * w == S:
            return 1, h, w
    return 1, 1, S


def _flux2_grid(m, a):
    """FLUX.2's image ids (frames, height, width, layer) per token"""
    ids = a.get("img_ids")
    S = a["hidden_states"].shape[1]
    if ids is not None:
        ids = ids[0] if ids.dim() == 3 else ids
        f, h, w = (int(ids[:, i].max()) + 1 for i in range(3))
        if f * h * w == S:
            return f, h, w
    return 1, 1, S


def _sd3_grid(m, a):
    _, _, H, W = a["hidden_states"].shape
    p = _cfg(m, "patch_size")
    return 1, H // p, W // p


def _qwen_grid(m, a):
    """Qwen-Image's img_shapes: (frames, height, width) in tokens, per batch item (or a list of them)"""
    s = a["img_shapes"][0]
    if isinstance(s, list):
        s = s[0]
    return tuple(s)


def _blocks(attr, sub):
    def f(m):
        return [(f"{attr}.{i}.{sub}", getattr(b, sub)) for i, b in enumerate(getattr(m, attr, []) or [])]
    return f


def _two(a, b):
    return lambda m: a(m) + b(m)


FAMILIES = {
    "WanTransformer3DModel": Family("wan", _blocks("blocks", "attn1"), "video", _wan_grid),
    "HunyuanVideoTransformer3DModel": Family(
        "hunyuanvideo", _two(_blocks("transformer_blocks", "attn"), _blocks("single_transformer_blocks", "attn")),
        "video,text", _hunyuan_grid),
    "CogVideoXTransformer3DModel": Family("cogvideox", _blocks("transformer_blocks", "attn1"), "text,video",
                                          _cogvideox_grid),
    "MochiTransformer3DModel": Family("mochi", _blocks("transformer_blocks", "attn1"), "video,text", _mochi_grid),
    "LTXVideoTransformer3DModel": Family("ltx-video", _blocks("transformer_blocks", "attn1"), "video", _ltx_grid),
    # LTX-2: the video self-attention attn1 of each audio-video block (not attn2, the audio streams or the
    # audio<->video cross-attention)
    "LTX2VideoTransformer3DModel": Family("ltx-2", _blocks("transformer_blocks", "attn1"), "video", _ltx2_grid),
    # issue 51: SkyReels-V2 (Wan's blocks), Cosmos (self-attention attn1; attn2 is cross), SD3/3.5 (the
    # joint attention attn only, not SD3.5's image-only attn2; text last), Qwen-Image (joint, text first,
    # given t / 1000), FLUX.2 (dual + single stream, text first, given t / 1000)
    "SkyReelsV2Transformer3DModel": Family("skyreels-v2", _blocks("blocks", "attn1"), "video", _wan_grid),
    "CosmosTransformer3DModel": Family("cosmos", _blocks("transformer_blocks", "attn1"), "video", _wan_grid),
    "SD3Transformer2DModel": Family("sd3", _blocks("transformer_blocks", "attn"), "video,text", _sd3_grid),
    "QwenImageTransformer2DModel": Family("qwen-image", _blocks("transformer_blocks", "attn"), "text,video",
                                          _qwen_grid, sigma_scale=1.0),
    "Flux2Transformer2DModel": Family(
        "flux2", _two(_blocks("transformer_blocks", "attn"), _blocks("single_transformer_blocks", "attn")),
        "text,video", _flux2_grid, sigma_scale=1.0),
    # HunyuanVideo-1.5: the double-stream blocks' joint attention (text, second text and image tokens last),
    # under a valid-queries-AND-keys mask; the text refiner's self-attention is no layer
    "HunyuanVideo15Transformer3DModel": Family("hunyuanvideo-1.5", _blocks("transformer_blocks", "attn"), "video,text",
                                               _hunyuan_grid),
    "FluxTransformer2DModel": Family(
        "flux", _two(_blocks("transformer_blocks", "attn"), _blocks("single_transformer_blocks", "attn")),
        "text,video", _flux_grid, sigma_scale=1.0),
}


def family_of(module):
    return FAMILIES.get(type(module).__name__)

"""wan_files.py: numpy-only helpers of data/: safetensors writer/reader, the original-layout
config.json, and the engine's flow-matching schedule (src/sampler.c). No torch needed, so that
check_forward.py --fixture runs with Debian's python3 (numpy, h5py)."""
import json
import os
import struct

import numpy as np


def wan_config(cfg):
    """config.json of the original layout (dsgap reads these keys; see src/wan_config.c)"""
    keys = ["dim", "ffn_dim", "freq_dim", "text_dim", "in_dim", "out_dim", "num_heads", "num_layers",
            "text_len", "eps", "patch_size"]
    j = {"_class_name": "WanModel", "model_type": "t2v"}
    j.update({k: cfg[k] for k in keys})
    j.update({"qk_norm": True, "cross_attn_norm": True, "window_size": [-1, -1]})
    return j


def _bf16_words(a):
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF).astype("<u2")


def bf16_round(a):
    """fp32 array -> the nearest bf16 values (round to nearest even), fp32"""
    return (_bf16_words(a).astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, dtype "F32"|"BF16", array); data in list order, header padded to 8"""
    header, blobs, off = {}, [], 0
    for name, dtype, a in tensors:
        a = np.asarray(a, dtype=np.float32)
        b = _bf16_words(a).tobytes() if dtype == "BF16" else np.ascontiguousarray(a, "<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path):
    """name -> float32 numpy array (F32, BF16, F16)"""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        raw = data[8 + n + b:8 + n + en]
        if e["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] == "F16":
            a = np.frombuffer(raw, "<f2").astype(np.float32)
        else:
            a = np.frombuffer(raw, "<f4")
        out[name] = a.reshape(e["shape"]).copy()
    return out


def flow_schedule(steps, shift):
    """the engine's schedule (src/sampler.c dg_flow_schedule): sigmas (steps+1,), timesteps (steps,)"""
    smax = float(np.float32(0.999))
    s = np.array([i * ((0.0 - smax) / steps) + smax for i in range(steps)])
    sig = shift * s / (1 + (shift - 1) * s)
    t = np.trunc(sig * 1000)
    sigmas = np.concatenate([sig.astype(np.float32).astype(np.float64), [0.0]])
    return sigmas, t


def shift_sigma(u, shift):
    return shift * u / (1 + (shift - 1) * u)

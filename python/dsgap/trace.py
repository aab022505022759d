"""trace.py: the dsgap trace file (docs/spec.md §6) written from Python, readable by the C reader
(src/trace/trace.c): /q /k /v (steps, layers, heads, tokens, head_dim) in dsgap's bf16 HDF5 type, one
chunk per (step, layer, head) unit, no fill; the index vectors and root attributes of the C writer.
Units arrive as raw bf16 words (uint16) and go to the file as finished chunks through HDF5's direct
chunk write, in one of two layouts (compression=):
  "none" (DEFAULT_COMPRESSION): no filters; each head's words are the chunk, written from the
    caller's array without a copy; put() returns once they are written, so the writer is bound by
    memory copies and the disk (h5py releases the GIL meanwhile).
  "deflate": the C writer's layout, shuffle + deflate 1, byte-identical chunks; the chunks are made
    on a thread pool (numpy's copy and zlib release the GIL) and written in order as they complete:
    put() returns once a unit's chunks are queued, with at most 4 x threads chunks in flight (bounded
    memory). Bound by deflate: about 27 MB/s a core.
Readers decode both alike (h5py, dsgap); the two files hold the same values.
"""
import collections
import json
import os
import zlib
from concurrent.futures import ThreadPoolExecutor

import h5py
import numpy as np

FORMAT = "dsgap-trace"
VERSION = 1
QKV = ("q", "k", "v")
COMPRESSIONS = ("none", "deflate")
DEFAULT_COMPRESSION = "none"


class TraceError(RuntimeError):
    """A trace that cannot be written or read; the message names the file and the problem."""


def bf16_type():
    """dsgap's bf16: sign bit 15, exponent bits 7..14 (bias 127), mantissa bits 0..6, little-endian."""
    t = h5py.h5t.IEEE_F32LE.copy()
    t.set_fields(15, 7, 8, 0, 7)
    t.set_size(2)
    t.set_ebias(127)
    return t


def f32_to_bf16(x):
    """float32 array -> uint16 bf16 words, round to nearest even (as the C writer)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((u >> 16) & 1) + 0x7FFF
    return ((u + r) >> 16).astype(np.uint16)


def bf16_to_f32(w):
    return (np.asarray(w, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _chunk(words, level=1):
    """HDF5 shuffle (by element size) then deflate: the bytes of one chunk as the filters make them.
    words: one head's (tokens, head_dim), C-contiguous; the shuffled copy goes to zlib as it is."""
    b = words.view(np.uint8).reshape(-1, words.dtype.itemsize)
    return zlib.compress(np.ascontiguousarray(b.T), level)


def unit_bytes(tokens, head_dim):
    return tokens * head_dim * 2


def disk_check(path, nbytes):
    """Refuse a trace the disk cannot hold, naming the size needed."""
    d = os.path.dirname(os.path.abspath(path))
    st = os.statvfs(d)
    free = st.f_bavail * st.f_frsize
    if nbytes > free:
        raise TraceError(f"cannot write {path}: the trace needs up to {nbytes / 2**30:.2f} GiB uncompressed, "
                         f"{free / 2**30:.2f} GiB free in {d}: capture fewer steps, layers or heads")
    return free


class TraceWriter:
    """Write a trace unit by unit. steps may be None: the steps axis then grows as units arrive.

    meta: dict with layers, heads, tokens, head_dim, grid (3), text_tokens, layer_index, head_index,
    and model, source, created_by, config (dict or JSON string). step_index, timestep and sigma
    are given to finish(). The file is PATH.tmp.PID until finish() renames it.
    compression: "none" (default) or "deflate" (the module's header); threads: deflate's pool
    (default min(16, cores)).
    """

    def __init__(self, path, meta, steps=None, threads=None, dtype="bf16", compression=DEFAULT_COMPRESSION):
        self.path = path
        self.tmp = f"{path}.tmp.{os.getpid()}"
        self.meta = dict(meta)
        m = self.meta
        T, D = int(m["tokens"]), int(m["head_dim"])
        g = [int(x) for x in m["grid"]]
        if len(g) != 3 or min(g) < 1 or m["text_tokens"] < 0 or g[0] * g[1] * g[2] + m["text_tokens"] != T:
            raise TraceError(f"cannot write {path}: grid {g} + {m['text_tokens']} text tokens does not make {T} tokens")
        if not 1 <= D <= 1024:
            raise TraceError(f"cannot write {path}: head_dim {D}, expected 1..1024")
        if unit_bytes(T, D) >= 0xFFFFFFFF:
            raise TraceError(f"cannot write {path}: one unit ({T} tokens x {D}) exceeds HDF5's 4 GiB chunk limit")
        self.L, self.H, self.T, self.D = int(m["layers"]), int(m["heads"]), T, D
        if dtype not in ("bf16", "float32"):
            raise TraceError(f"cannot write {path}: dtype {dtype!r}, expected 'bf16' or 'float32'")
        self.dtype = np.uint16 if dtype == "bf16" else np.float32
        if compression not in COMPRESSIONS:
            raise TraceError(f"cannot write {path}: compression {compression!r}, expected one of {COMPRESSIONS}")
        self.deflate = compression == "deflate"
        self.fixed_steps = steps
        self.steps = steps or 0
        self.written = set()
        self.bytes_in = 0
        self.bytes_out = 0
        workers = threads or min(16, os.cpu_count() or 1)
        self.pool = ThreadPoolExecutor(max_workers=workers) if self.deflate else None
        self.inflight = collections.deque()  # (which, s, l, h, future of the chunk's bytes, input bytes)
        self.max_inflight = 4 * workers
        try:
            self.f = h5py.File(self.tmp, "w", libver="earliest")
            self.bf16 = bf16_type() if dtype == "bf16" else h5py.h5t.IEEE_F32LE.copy()
            n = steps or 1
            dims = (n, self.L, self.H, T, D)
            maxdims = (steps if steps else h5py.h5s.UNLIMITED, self.L, self.H, T, D)
            space = h5py.h5s.create_simple(dims, maxdims)
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_chunk((1, 1, 1, T, D))
            if self.deflate:
                dcpl.set_shuffle()
                dcpl.set_deflate(1)
            dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
            self.dset = {}
            for name in QKV:
                did = h5py.h5d.create(self.f.id, name.encode(), self.bf16, space, dcpl=dcpl)
                self.dset[name] = h5py.Dataset(did)
        except OSError as e:
            self._remove()
            raise TraceError(f"cannot create {path}: {e}") from None

    def _grow(self, s):
        if s < self.steps:
            return
        if self.fixed_steps:
            raise TraceError(f"cannot write {self.path}: step position {s} outside 0..{self.steps - 1}")
        self.steps = s + 1
        for d in self.dset.values():
            d.id.set_extent((self.steps, self.L, self.H, self.T, self.D))

    def put(self, which, s, l, words):
        """Write heads (H, tokens, head_dim) at step position s, layer position l: uint16 bf16 words
        (a float32 trace: float32 values; a C-contiguous array is used as it is, no copy).
        "none": written when put returns. "deflate": the chunks are made from words on the thread
        pool; the caller leaves words unchanged until finish()."""
        words = np.ascontiguousarray(words)
        if words.shape != (self.H, self.T, self.D) or words.dtype != self.dtype:
            raise TraceError(f"cannot write {self.path}: /{which} unit of shape {words.shape} {words.dtype}, "
                             f"expected ({self.H}, {self.T}, {self.D}) {np.dtype(self.dtype)}")
        self._grow(s)
        for h in range(self.H):
            if self.deflate:
                self.inflight.append((which, s, l, h, self.pool.submit(_chunk, words[h]), words[h].nbytes))
                self._drain(self.max_inflight)
            else:
                self._write(which, s, l, h, words[h], words[h].nbytes)

    def _write(self, which, s, l, h, chunk, nbytes):
        """one finished chunk (bytes, or an array for "none") of nbytes of words into the file"""
        self.dset[which].id.write_direct_chunk((s, l, h, 0, 0), chunk, 0)
        self.written.add((which, s, l, h))
        self.bytes_in += nbytes
        self.bytes_out += len(chunk) if self.deflate else nbytes

    def _drain(self, keep):
        """write the finished chunks at the front of the queue, waiting while more than keep are queued"""
        q = self.inflight
        while q and (len(q) > keep or q[0][4].done()):
            which, s, l, h, fu, nbytes = q.popleft()
            self._write(which, s, l, h, fu.result(), nbytes)

    def finish(self, step_index, timestep, sigma):
        try:
            self._drain(0)
        except BaseException:
            self.abort()
            raise
        n = self.steps
        if not (len(step_index) == len(timestep) == len(sigma) == n):
            self.abort()
            raise TraceError(f"cannot write {self.path}: {len(step_index)} step indices for {n} steps")
        for which in QKV:
            for s in range(n):
                for l in range(self.L):
                    for h in range(self.H):
                        if (which, s, l, h) not in self.written:
                            m = self.meta
                            self.abort()
                            raise TraceError(f"cannot write {self.path}: /{which} at step {step_index[s]} layer "
                                             f"{m['layer_index'][l]} head {m['head_index'][h]} was never written")
        m, f = self.meta, self.f
        i32, f32 = np.dtype("<i4"), np.dtype("<f4")
        f.create_dataset("step_index", data=np.asarray(step_index, dtype=i32))
        f.create_dataset("timestep", data=np.asarray(timestep, dtype=f32))
        f.create_dataset("sigma", data=np.asarray(sigma, dtype=f32))
        f.create_dataset("layer_index", data=np.asarray(m["layer_index"], dtype=i32))
        f.create_dataset("head_index", data=np.asarray(m["head_index"], dtype=i32))
        f.create_dataset("grid", data=np.asarray(m["grid"], dtype=i32))
        f.create_dataset("text_tokens", data=np.int32(m["text_tokens"]), dtype=i32)
        cfg = m.get("config", {})
        str_t = h5py.string_dtype("utf-8")
        attrs = [("format", FORMAT), ("model", m.get("model", "")), ("created_by", m.get("created_by", "")),
                 ("source", m.get("source", "")), ("config", cfg if isinstance(cfg, str) else json.dumps(cfg))]
        f.attrs.create("version", np.int32(VERSION), dtype=i32)
        for k, v in attrs:
            f.attrs.create(k, v, dtype=str_t)
        if self.pool:
            self.pool.shutdown()
        f.close()
        os.replace(self.tmp, self.path)

    def _remove(self):
        try:
            os.remove(self.tmp)
        except OSError:
            pass

    def abort(self):
        self.inflight.clear()
        if self.pool:
            self.pool.shutdown(wait=False, cancel_futures=True)
        try:
            self.f.close()
        except Exception:
            pass
        self._remove()


def write_trace(path, q, k, v, grid, text_tokens=0, step_index=None, timestep=None, sigma=None,
                layer_index=None, head_index=None, model="", source="", config=None, compression=DEFAULT_COMPRESSION):
    """A whole trace from arrays (steps, layers, heads, tokens, head_dim) of float32 (or uint16 bf16 words)."""
    q, k, v = (np.asarray(x) for x in (q, k, v))
    S, L, H, T, D = q.shape
    meta = dict(layers=L, heads=H, tokens=T, head_dim=D, grid=list(grid), text_tokens=text_tokens,
                layer_index=list(range(L)) if layer_index is None else list(layer_index),
                head_index=list(range(H)) if head_index is None else list(head_index),
                model=model, source=source, created_by="dsgap (python) write_trace", config=config or {})
    w = TraceWriter(path, meta, steps=S, compression=compression)
    try:
        for name, x in zip(QKV, (q, k, v)):
            if x.dtype != np.uint16 and not np.isfinite(x).all():
                raise TraceError(f"cannot write {path}: non-finite value in /{name}")
            for s in range(S):
                for l in range(L):
                    w.put(name, s, l, x[s, l] if x.dtype == np.uint16 else f32_to_bf16(x[s, l]))
    except BaseException:
        w.abort()
        raise
    w.finish(list(range(S)) if step_index is None else step_index,
             [0.0] * S if timestep is None else timestep, [0.0] * S if sigma is None else sigma)


def read_trace(path):
    """(meta dict, q, k, v float32 arrays): a small trace read whole (tests; real traces: read per unit)."""
    with h5py.File(path, "r") as f:
        meta = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        for k in ("step_index", "timestep", "sigma", "layer_index", "head_index", "grid"):
            meta[k] = f[k][()]
        meta["text_tokens"] = int(f["text_tokens"][()])
        out = [f[n][()].astype(np.float32) for n in QKV]
    return (meta, *out)

"""bench_capture.py: the Python capture's performance targets (issue 20) on a GPU machine with
torch and diffusers: Wan2.1-1.3B architecture, random weights, 480p x 81 frames (latent 21x60x104,
32760 tokens), 50 steps through diffusers' WanTransformer3DModel with sequential CFG (two calls per
step), once without capture and once for each capture of CAPTURES with the default compression:
issue 51's (3 steps x 10 layers x 2 heads, 1.5 GB of bf16) and the whole model's (2 steps x 30
layers x 12 heads, 18.1 GB), and the trace writer alone on synthetic units in each compression
("none", "deflate": python/dsgap/trace.py).

  python python/bench/bench_capture.py [--steps 50] [--out DIR]     (DIR default $OUT or .)
  python python/bench/bench_capture.py --writer-only [--layers N]  (no GPU: the writer part alone)

Writes DIR/bench_capture.csv and DIR/bench_capture.md: generation seconds without and with capture,
the overhead (target <= 10%), the writer's GB/s in each mode (target >= 1 GB/s for the default), the
trace sizes, the cores and the load average. Not run in CI (no GPU there); run on an H200 by
scripts/device_python.sh.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dsgap  # noqa: E402


def wan13b():
    from diffusers import WanTransformer3DModel
    torch.manual_seed(0)
    m = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16,
                              out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30,
                              cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.02)
    return m.to("cuda", torch.bfloat16).eval()


# name: (captured steps, layers (None: all), heads (None: all)); the units' bf16 bytes: 3 x steps x layers x
# heads x 32760 x 128 x 2
CAPTURES = {"issue51": ([10, 20, 30], list(range(10)), [0, 1]), "all_layers": ([10, 30], None, None)}


def unit_bytes(name):
    steps, layers, heads = CAPTURES[name]
    return 3 * len(steps) * len(layers or range(30)) * len(heads or range(12)) * 32760 * 128 * 2


def generate(m, steps, capture_path=None, capture=None):
    """steps of a flow-matching Euler loop with sequential CFG, capturing CAPTURES[capture]; seconds"""
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(1, 16, 21, 60, 104, device="cuda", dtype=torch.bfloat16, generator=g)
    cond = torch.randn(1, 512, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    unc = torch.randn(1, 512, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    sig = torch.linspace(1, 0, steps + 1)
    ctx = None
    if capture_path:
        cs, cl, ch = CAPTURES[capture]
        ctx = dsgap.capture(m, capture_path, steps=cs, layers=cl, heads=ch, progress=False)
    torch.cuda.synchronize()
    t0 = time.time()
    with torch.no_grad():
        if ctx:
            ctx.__enter__()
        try:
            for i in range(steps):
                t = torch.full((1,), float(sig[i] * 1000), device="cuda")
                c = m(hidden_states=x, timestep=t, encoder_hidden_states=cond)[0]
                u = m(hidden_states=x, timestep=t, encoder_hidden_states=unc)[0]
                x = x + (sig[i + 1] - sig[i]) * (u + 5.0 * (c - u))
        finally:
            if ctx:
                ctx.__exit__(None, None, None)
    torch.cuda.synchronize()
    return time.time() - t0


def writer_rate(path, compression, layers=10, tokens=32760, head_dim=128):
    """the trace writer alone: layers x 12 heads of Q, K and V (3 x layers x 101 MB), the bf16 words
    as the capture hands them; (GB/s of input, bytes in, bytes on disk)"""
    rng = np.random.default_rng(0)
    base = rng.standard_normal((12, tokens, head_dim)).astype(np.float32)
    words = dsgap.f32_to_bf16(base)
    L = layers
    meta = dict(layers=L, heads=12, tokens=tokens, head_dim=head_dim, grid=[21, 30, 52], text_tokens=0,
                layer_index=list(range(L)), head_index=list(range(12)), model="bench", source="", config={})
    w = dsgap.TraceWriter(path, meta, steps=1, compression=compression)
    t0 = time.time()
    for name in ("q", "k", "v"):
        for l in range(L):
            w.put(name, 0, l, words)
    w.finish([0], [0.0], [0.0])
    dt = time.time() - t0
    size = os.path.getsize(path)
    os.remove(path)
    return w.bytes_in / dt / 1e9, w.bytes_in, size


def writer_rows(tmp, layers):
    """the writer alone in each compression, the default first; the machine's cores and load"""
    rows = [("writer_default", dsgap.trace.DEFAULT_COMPRESSION)]
    modes = sorted(dsgap.trace.COMPRESSIONS, key=lambda c: c != dsgap.trace.DEFAULT_COMPRESSION)
    for c in modes:
        load = os.getloadavg()[0]
        gbs, nbytes, size = writer_rate(os.path.join(tmp, f"writer_{c}.h5"), c, layers)
        rows += [(f"writer_{c}_gb_per_s", f"{gbs:.3f}"), (f"writer_{c}_bytes", str(nbytes)),
                 (f"writer_{c}_bytes_on_disk", str(size)), (f"writer_{c}_load_before", f"{load:.2f}")]
        if c == dsgap.trace.DEFAULT_COMPRESSION:
            rows += [("writer_target_gb_per_s", "1.0"), ("writer_ok", str(gbs >= 1.0))]
    return rows + [("cpus", str(os.cpu_count())), ("load_after", f"{os.getloadavg()[0]:.2f}")]


def report(out, title, rows):
    with open(os.path.join(out, "bench_capture.csv"), "w") as f:
        f.write("metric,value\n" + "".join(f"{k},{v}\n" for k, v in rows))
    with open(os.path.join(out, "bench_capture.md"), "w") as f:
        f.write(f"# {title}\n\n| metric | value |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in rows))
    print(open(os.path.join(out, "bench_capture.md")).read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--writer-only", action="store_true", help="the writer part alone (no GPU needed)")
    ap.add_argument("--layers", type=int, default=10, help="the writer part's layers (3 x layers x 101 MB)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="dsgap_bench_", dir=os.environ.get("TMPDIR", "/tmp"))
    if a.writer_only:
        report(a.out, "dsgap trace writer alone (bf16 units of 32760 tokens x 128)", writer_rows(tmp, a.layers))
        return 0
    if not torch.cuda.is_available():
        sys.exit("bench_capture: needs a CUDA device (--writer-only does not)")
    m = wan13b()
    generate(m, 2)  # warm-up
    base = generate(m, a.steps)
    rows = [("generation_s_no_capture", f"{base:.2f}"), ("capture_compression", dsgap.trace.DEFAULT_COMPRESSION),
            ("capture_overhead_target", "0.10")]
    for name in CAPTURES:
        path = os.path.join(tmp, f"trace_{name}.h5")
        cap = generate(m, a.steps, path, name)
        size = os.path.getsize(path)
        os.remove(path)
        over = cap / base - 1
        rows += [(f"{name}_generation_s", f"{cap:.2f}"), (f"{name}_overhead", f"{over:.4f}"),
                 (f"{name}_overhead_ok", str(over <= 0.10)), (f"{name}_trace_bytes_on_disk", str(size)),
                 (f"{name}_trace_bytes_bf16", str(unit_bytes(name)))]
    rows += writer_rows(tmp, a.layers)
    rows += [("device", torch.cuda.get_device_name()), ("torch", torch.__version__), ("steps", str(a.steps))]
    report(a.out, f"dsgap.capture benchmark (Wan2.1-1.3B architecture, random weights, 480p x 81, {a.steps} steps, CFG)",
           rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

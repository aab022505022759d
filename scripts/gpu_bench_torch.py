#!/usr/bin/env python3
"""gpu_bench_torch.py: PyTorch baselines for dsgap's attention kernels, same shape, same run (docs/spec.md §8).

Measures cuDNN SDPA (torch.nn.attention.sdpa_kernel(SDPBackend.CUDNN_ATTENTION)), PyTorch's
FlashAttention-2 backend, and compiled FlexAttention with a block-sparse BlockMask (each 128-query
block keeps ceil(rho*n/128) random 128-key blocks, the same computed pairs as dsgap's sparse benchmark)
at densities 0.05..0.5. bf16, (1, heads, n, d), non-causal; warm-up, CUDA events, median of --reps.
Prints and appends CSV lines name,value,unit,device,date,commit. With --ours FILE (the CSV written by
dsgap-bench-kernels in the same device call) it also writes the side-by-side ratios:
dense_over_cudnn, sparse_over_cudnn@rho, sparse_over_flex@rho, sparse_block_over_cudnn@0.15, and
sparse_over_cudnn_pairs@rho: cuDNN dense on the same (query, key) pairs as the sparse kernel (every
query against the first ceil(rho*n/128)*128 keys, contiguous: cudnn_pairs_ms@rho) over our sparse time,
i.e. how near the gather kernel comes to a dense kernel doing its work (above 1: faster than cuDNN),
and dense_pairs_over_cudnn_pairs@0.15: our dense kernel on those pairs (dense_pairs_ms@0.15) against cuDNN's.
With --sweep NS (a comma list of token counts) it measures only cuDNN SDPA dense at every n of NS and
every head count of --sweep-heads (default 12,24,40) and appends rows n,heads,d,cudnn_ms,reps,device,date,
commit to --csv (a header first when the file is new): the dense reference of `dsgap callspeed`
(experiments/kernel_speed.sh --length); reps fall to a third above 65536 tokens, half above 16384.
Run with the GPU machine's python3 (PyTorch with CUDA):
  python3 scripts/gpu_bench_torch.py [--n 32760] [--heads 12] [--d 128] [--reps 20] [--ours F] [--csv F]
  python3 scripts/gpu_bench_torch.py --sweep 1024,2048,...,131072 [--sweep-heads 12,24,40] --csv F
"""
import argparse
import datetime
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=32760)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--ours", default=None, help="CSV from dsgap-bench-kernels (same run)")
    ap.add_argument("--csv", default=None, help="append CSV lines here")
    ap.add_argument("--densities", default="0.05,0.1,0.15,0.2,0.3,0.5")
    ap.add_argument("--sweep", default=None, help="token counts: cuDNN dense only, tidy rows")
    ap.add_argument("--sweep-heads", default="12,24,40")
    a = ap.parse_args()

    dev = torch.cuda.get_device_name(0)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    commit = os.environ.get("DG_COMMIT", "unknown")
    out = open(a.csv, "a") if a.csv else None

    def emit(name, value, unit):
        line = f"{name},{value:.6g},{unit},{dev},{date},{commit}"
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    def bench(fn, reps=a.reps):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1))
        return statistics.median(ts)

    if a.sweep is not None:
        if not all(x.strip().isdigit() and int(x) > 0 for x in a.sweep.split(",")):
            print(f"gpu_bench_torch.py: --sweep {a.sweep!r}: not a comma list of token counts", file=sys.stderr)
            return 2
        return sweep(a, dev, date, commit, bench)

    n, h, d = a.n, a.heads, a.d
    print(f"# gpu_bench_torch: {dev}, torch {torch.__version__}, n={n} heads={h} d={d} reps={a.reps}", flush=True)
    g = torch.Generator(device="cuda").manual_seed(1)

    def rnd(lo, hi, off):
        sc = torch.exp(lo + (hi - lo) * torch.rand(1, h, n, 1, device="cuda", generator=g))
        return (sc * torch.randn(1, h, n, d, device="cuda", generator=g) + off).to(torch.bfloat16)

    q, k, v = rnd(-1.0, 1.0, 0.0), rnd(-0.5, 0.5, 0.0), rnd(-0.3, 0.3, 0.2)
    flop = 4.0 * n * n * d * h
    from torch.nn.attention import SDPBackend, sdpa_kernel

    res = {}
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        t = bench(lambda: F.scaled_dot_product_attention(q, k, v))
    res["cudnn"] = t
    emit("cudnn_ms", t, "ms")
    emit("cudnn_tflops", flop / t * 1e-9, "TFLOP/s")
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            t = bench(lambda: F.scaled_dot_product_attention(q, k, v))
        emit("torch_fa2_tflops", flop / t * 1e-9, "TFLOP/s")
    except Exception as e:  # noqa: BLE001
        print(f"# flash backend unavailable: {e}", flush=True)

    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    flex = torch.compile(flex_attention, dynamic=False)
    nb = (n + 127) // 128
    for rho in [float(x) for x in a.densities.split(",")]:
        keep = min(nb, math.ceil(rho * n / 128))
        order = torch.rand(h, nb, nb, device="cuda", generator=g).argsort(dim=-1)[..., :keep]
        blocks = torch.zeros(h, nb, nb, dtype=torch.bool, device="cuda")
        blocks.scatter_(-1, order, True)

        def mask_mod(b, hh, q_idx, kv_idx):
            return blocks[hh, q_idx // 128, kv_idx // 128]

        try:
            bm = create_block_mask(mask_mod, 1, h, n, n, device="cuda", BLOCK_SIZE=128, _compile=True)
        except TypeError:
            bm = create_block_mask(mask_mod, 1, h, n, n, device="cuda", BLOCK_SIZE=128)
        t = bench(lambda: flex(q, k, v, block_mask=bm))
        res[f"flex@{rho:g}"] = t
        emit(f"flex_ms@{rho:g}", t, "ms")
        emit(f"flex_eff_tflops@{rho:g}", 4.0 * d * h * n * keep * 128 / t * 1e-9, "TFLOP/s")
        emit(f"flex_over_cudnn@{rho:g}", res["cudnn"] / t, "x")
        kv = keep * 128
        kp, vp = k[:, :, :kv].contiguous(), v[:, :, :kv].contiguous()
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            t = bench(lambda: F.scaled_dot_product_attention(q, kp, vp))
        del kp, vp
        res[f"cudnn_pairs@{rho:g}"] = t
        emit(f"cudnn_pairs_ms@{rho:g}", t, "ms")
        emit(f"cudnn_pairs_tflops@{rho:g}", 4.0 * d * h * n * kv / t * 1e-9, "TFLOP/s")
        del bm, blocks, order

    if a.ours and os.path.exists(a.ours):
        ours = {}
        for line in open(a.ours):
            f = line.strip().split(",")
            if len(f) >= 2:
                try:
                    ours[f[0]] = float(f[1])
                except ValueError:
                    pass
        tc = res["cudnn"]
        if "dense_ms" in ours:
            emit("dense_over_cudnn", tc / ours["dense_ms"], "x")
        for key, t in sorted(ours.items()):
            if key.startswith("sparse_ms@"):
                rho = key.split("@")[1]
                emit(f"sparse_over_cudnn@{rho}", tc / t, "x")
                tf = res.get(f"flex@{float(rho):g}")
                if tf:
                    emit(f"sparse_over_flex@{rho}", tf / t, "x")
                tp = res.get(f"cudnn_pairs@{float(rho):g}")
                if tp:
                    emit(f"sparse_over_cudnn_pairs@{rho}", tp / t, "x")
        tp = res.get("cudnn_pairs@0.15")
        if tp and "dense_pairs_ms@0.15" in ours:
            emit("dense_pairs_over_cudnn_pairs@0.15", tp / ours["dense_pairs_ms@0.15"], "x")
        if "sparse_block_ms@0.15" in ours:
            emit("sparse_block_over_cudnn@0.15", tc / ours["sparse_block_ms@0.15"], "x")
        if "sparse_query_ms@0.15" in ours:
            emit("sparse_query_over_cudnn@0.15", tc / ours["sparse_query_ms@0.15"], "x")
    if out:
        out.close()


def sweep(a, dev, date, commit, bench):
    """cuDNN SDPA dense at every n x heads: rows n,heads,d,cudnn_ms,reps,device,date,commit"""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    new = not a.csv or not os.path.exists(a.csv) or os.path.getsize(a.csv) == 0
    out = open(a.csv, "a") if a.csv else sys.stdout
    if new:
        out.write("n,heads,d,cudnn_ms,reps,device,date,commit\n")
    g = torch.Generator(device="cuda").manual_seed(1)
    for h in [int(x) for x in a.sweep_heads.split(",")]:
        for n in [int(x) for x in a.sweep.split(",")]:
            q, k, v = (torch.randn(1, h, n, a.d, device="cuda", generator=g).to(torch.bfloat16) for _ in range(3))
            reps = max(2, a.reps // 3 if n > 65536 else a.reps // 2 if n > 16384 else a.reps)
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                t = bench(lambda: F.scaled_dot_product_attention(q, k, v), reps)
            out.write(f"{n},{h},{a.d},{t:.6g},{reps},{dev},{date},{commit}\n")
            out.flush()
            print(f"cudnn n={n} heads={h}: {t:.4g} ms", flush=True)
            del q, k, v
    if a.csv:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

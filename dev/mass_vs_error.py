#!/usr/bin/env python3
"""mass_vs_error.py: why per-token selection keeps more probability mass than block selection yet
gives a larger output error (issue 50, item 7), recomputed from a trace with numpy alone.

    /opt/dsgap-venv/bin/python dev/mass_vs_error.py TRACE.h5 [--metrics METRICS.csv]
        [--density 0.15] [--warmup 3] [--group 128]

For every post-warm-up (step, layer, head) unit of the trace, in float64 from the stored Q, K, V:
dense attention P = softmax(q k^T / sqrt(d)), O = P V; raster query groups of 128 queries in token
order; each group's exact score s_j = mean over its queries of P_ij (docs/spec.md §3.1); the
oracle-tile selection (the K best single keys by s, K = 128 ceil(rho N / 128), ties to the lower
index) and the oracle-block selection (the best blocks of 128 keys by the summed s until they hold
K keys). For a query i with kept set S, retained mass m_i = sum_{j in S} P_ij and

    O^_i - O_i = (1 - m_i) (mean_kept_i - mean_dropped_i)

where mean_kept_i = sum_{j in S} P_ij v_j / m_i and mean_dropped_i the same over the keys not kept:
the output error is the dropped mass times how far the kept keys' mean value lies from the dropped
keys'. Per-token selection maximises the group's retained mass (so 1 - m is smaller on average), but
it keeps exactly the keys most like the queries, so the kept mean moves away from the dropped mean;
whole blocks keep lower-probability neighbours too and leave higher-probability keys among the
dropped ones, so the two means stay closer. The script prints, per selection, E = mean rel_l2 over
the units, the mean retained mass, the dropped mass (1 - m) and the gap |mean_kept - mean_dropped| /
|O| (both averaged with the weights that make E: rel_l2^2 = sum_i (1-m_i)^2 gap_i^2 / |O|^2), checks
the identity per unit, and with --metrics compares E and the mass with dsgap replay's metrics.csv of
the same trace (the oracle-tile and oracle-block rows at the density).
"""
import argparse
import csv
import math
import sys

import h5py
import numpy as np


def selections(P, n_group, K, block):
    """Masks (groups, N) of the oracle-tile and oracle-block selections."""
    N = P.shape[1]
    G = P.reshape(-1, n_group, N) if N % n_group == 0 else None
    if G is None:
        raise SystemExit("mass_vs_error: tokens not a multiple of the group size")
    s = G.mean(axis=1)  # (groups, N) exact scores
    ng = s.shape[0]
    tile = np.zeros((ng, N), bool)
    order = np.argsort(-s, axis=1, kind="stable")  # ties: the lower index first
    np.put_along_axis(tile, order[:, :K], True, axis=1)
    nb = -(-N // block)
    bs = np.add.reduceat(s, np.arange(0, N, block), axis=1)  # (groups, blocks) summed scores
    border = np.argsort(-bs, axis=1, kind="stable")
    blk = np.zeros((ng, N), bool)
    for g in range(ng):
        kept = 0
        for b in border[g]:
            lo, hi = b * block, min(N, (b + 1) * block)
            blk[g, lo:hi] = True
            kept += hi - lo
            if kept >= K:
                break
    assert nb == bs.shape[1]
    return tile, blk


def unit_stats(P, O, v, mask, n_group):
    """rel_l2, mean mass, and per query (1 - m), gap, err norms for one selection mask (groups, N)."""
    N = P.shape[1]
    M = np.repeat(mask, n_group, axis=0)  # (N queries, N keys)
    Pk = np.where(M, P, 0.0)
    m = Pk.sum(axis=1)
    kept = (Pk @ v) / m[:, None]
    dropped_mass = 1.0 - m
    Pd = P - Pk
    with np.errstate(invalid="ignore", divide="ignore"):
        dropped = (Pd @ v) / dropped_mass[:, None]
    Ohat = kept
    err = Ohat - O
    ident = dropped_mass[:, None] * (kept - dropped)
    ok = np.isfinite(dropped).all(axis=1)
    idres = np.abs(err[ok] - ident[ok]).max() / np.abs(O).max() if ok.any() else 0.0
    gap = np.linalg.norm(np.where(ok[:, None], kept - dropped, 0.0), axis=1)
    rel = np.linalg.norm(err) / np.linalg.norm(O)
    return rel, m.mean(), dropped_mass, gap, idres


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--metrics", help="dsgap replay's metrics.csv of the same trace")
    ap.add_argument("--density", type=float, default=0.15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--group", type=int, default=128)
    a = ap.parse_args()
    with h5py.File(a.trace, "r") as f:
        q, k, v = f["q"], f["k"], f["v"]
        steps = np.asarray(f["step_index"])
        layers = np.asarray(f["layer_index"])
        heads = np.asarray(f["head_index"])
        S, L, H, N, d = q.shape
        K = min(N, max(128, 128 * math.ceil(a.density * N / 128)))
        acc = {name: {"rel": [], "mass": [], "d2": 0.0, "d2g2": 0.0, "nq": 0, "id": 0.0}
               for name in ("oracle-tile", "oracle-block")}
        mine = {}
        for si in range(S):
            if steps[si] < a.warmup:
                continue
            for li in range(L):
                for hi in range(H):
                    qq = np.asarray(q[si, li, hi], np.float64)
                    kk = np.asarray(k[si, li, hi], np.float64)
                    vv = np.asarray(v[si, li, hi], np.float64)
                    sc = qq @ kk.T / math.sqrt(d)
                    sc -= sc.max(axis=1, keepdims=True)
                    P = np.exp(sc)
                    P /= P.sum(axis=1, keepdims=True)
                    O = P @ vv
                    orms = np.linalg.norm(O) / math.sqrt(N)  # RMS norm of an output row
                    tile, blk = selections(P, a.group, K, 128)
                    for name, mask in (("oracle-tile", tile), ("oracle-block", blk)):
                        rel, mass, dm, gap, idres = unit_stats(P, O, vv, mask, a.group)
                        x = acc[name]
                        x["rel"].append(rel)
                        x["mass"].append(mass)
                        x["d2"] += (dm ** 2).sum()
                        x["d2g2"] += (dm ** 2 * (gap / orms) ** 2).sum()  # = N rel^2
                        x["nq"] += N
                        x["id"] = max(x["id"], idres)
                        mine[(name, int(steps[si]), int(layers[li]), int(heads[hi]))] = (rel, mass)
    print(f"trace {a.trace}: {N} tokens, head_dim {d}, density {a.density} (K = {K} keys a group of "
          f"{a.group} queries), units with step >= {a.warmup}: {len(acc['oracle-tile']['rel'])}")
    print("rel_l2^2 of a unit = mean over its queries of (1 - m)^2 gap^2, gap = |kept mean - dropped "
          "mean| / RMS |O_i|;\nso RMS rel_l2 = RMS dropped mass x gap (weighted by the dropped mass "
          "squared), exactly:")
    print("selection     E (mean rel_l2)  mean mass  RMS rel_l2 = RMS(1 - m) x gap   identity residual")
    for name, x in acc.items():
        rms_rel = math.sqrt(x["d2g2"] / x["nq"])
        rms_drop = math.sqrt(x["d2"] / x["nq"])
        gap = math.sqrt(x["d2g2"] / x["d2"])
        print(f"{name:13s} {np.mean(x['rel']):.6f}         {np.mean(x['mass']):.6f}   "
              f"{rms_rel:.6f} = {rms_drop:.6f} x {gap:.4f}   {x['id']:.1e}")
    t, b = acc["oracle-tile"], acc["oracle-block"]
    more_mass = np.mean(t["mass"]) > np.mean(b["mass"])
    more_err = np.mean(t["rel"]) > np.mean(b["rel"])
    drop_ratio = math.sqrt(t["d2"] / b["d2"])
    gap_ratio = math.sqrt(t["d2g2"] / t["d2"]) / math.sqrt(b["d2g2"] / b["d2"])
    print(f"per-token keeps {'more' if more_mass else 'less'} mass and gives "
          f"{'more' if more_err else 'less'} error: its RMS dropped mass is {drop_ratio:.3f}x "
          f"block's, the gap between the kept and the dropped keys' mean value {gap_ratio:.3f}x")
    rc = 0
    if a.metrics:
        worst_e = worst_m = 0.0
        n = 0
        with open(a.metrics) as f:
            for row in csv.DictReader(f):
                key = (row["policy"], int(row["step"]), int(row["layer"]), int(row["head"]))
                if key in mine and abs(float(row["density_target"]) - a.density) < 1e-12:
                    rel, mass = mine[key]
                    worst_e = max(worst_e, abs(float(row["rel_l2"]) - rel) / max(rel, 1e-30))
                    worst_m = max(worst_m, abs(float(row["mass_mean"]) - mass))
                    n += 1
        print(f"against {a.metrics}: {n} rows ({n // 2} units x 2 selections), rel_l2 within {worst_e:.1e} relative, mass_mean "
              f"within {worst_m:.1e}")
        rc = 0 if n == len(mine) and worst_e < 1e-3 and worst_m < 1e-4 else 1
    return rc


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""list_overlap.py (dev): how many selected keys two PCA groups share, the quantity that decides whether
a sparse kernel that gathers the keys of two groups once (their union, or their intersection shared
across a CTA pair) would move fewer K/V bytes per useful FLOP (issue 21: the gather kernel is bound
by its K/V gathers, dev/kernels/HISTORY.md v13-v18).

For every unit (step, layer, head) of a trace: PCA groups of 128 queries by recursive halving along
the principal direction (numpy's eigenvector, not dsgap's 4 power iterations: an estimate of the
grouping, not its bits), exact group scores s(G, j) = mean_{i in G} softmax_i(j), top-K keys per
group (K = 128 ceil(rho N / 128), docs/spec.md 3.4). Per pair of sibling groups (the two leaves of
one split) and per pair of random groups: overlap |L_a & L_b| / K, and the gather bytes of the pair
against two separate gathers, |L_a | L_b| / 2K.
  usage: list_overlap.py TRACE.h5 [--rho 0.15] [--units N]   (h5py, numpy)"""
import argparse, math
import h5py, numpy as np

ap = argparse.ArgumentParser()
ap.add_argument('trace'); ap.add_argument('--rho', type=float, default=0.15); ap.add_argument('--units', type=int, default=0)
a = ap.parse_args()
f = h5py.File(a.trace, 'r')
Q, K = f['q'], f['k']
S, L, H, N, D = Q.shape
B = 128
kk = min(N, max(B, B * math.ceil(a.rho * N / B)))
rng = np.random.default_rng(0)

def pddp(q):
    """leaves (lists of query indices) in tree order; siblings are leaves 2m, 2m+1 where both exist"""
    out = []
    def split(idx):
        if len(idx) <= B:
            out.append(idx); return
        x = q[idx] - q[idx].mean(0)
        w, v = np.linalg.eigh(x.T @ x)
        p = x @ v[:, -1]
        o = idx[np.argsort(p, kind='stable')]
        nb = math.ceil(len(idx) / B)
        cut = B * math.ceil(nb / 2)
        split(o[:cut]); split(o[cut:])
    split(np.arange(len(q)))
    return out

rows = []
units = [(s, l, h) for s in range(S) for l in range(L) for h in range(H)]
if a.units:
    units = units[:a.units]
for s, l, h in units:
    q = np.asarray(Q[s, l, h], dtype=np.float64); k = np.asarray(K[s, l, h], dtype=np.float64)
    groups = pddp(q)
    lists = []
    for g in groups:  # a group's rows at a time: (128, N) logits, not (N, N)
        lg = q[g] @ k.T / math.sqrt(D)
        sc = np.exp(lg - np.logaddexp.reduce(lg, axis=1, keepdims=True)).mean(0)
        lists.append(set(np.argsort(-sc, kind='stable')[:kk].tolist()))
    sib = [len(lists[i] & lists[i + 1]) / kk for i in range(0, len(lists) - 1, 2)]
    rnd = []
    for _ in range(len(sib)):
        i, j = rng.choice(len(lists), 2, replace=False)
        rnd.append(len(lists[i] & lists[j]) / kk)
    rows.append((s, l, h, np.mean(sib), np.min(sib), np.mean(rnd)))
    print(f'step {s} layer {l} head {h}: {len(groups)} groups, K {kk}: sibling overlap mean {np.mean(sib):.3f} '
          f'(min {np.min(sib):.3f}), random pairs {np.mean(rnd):.3f}', flush=True)
r = np.array([x[3:] for x in rows])
print(f'units {len(rows)}, N {N}, rho {a.rho}, K {kk}: sibling overlap {r[:, 0].mean():.3f} '
      f'[{np.percentile(r[:, 0], 5):.3f}, {np.percentile(r[:, 0], 95):.3f}] (5-95% of units), worst sibling pair {r[:, 1].min():.3f}; '
      f'random pairs {r[:, 2].mean():.3f}; gather bytes of a sibling pair, union against two lists: {1 - r[:, 0].mean() / 2:.3f}')

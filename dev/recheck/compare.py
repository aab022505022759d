#!/usr/bin/env python3
"""dev/recheck/compare.py OLD.csv NEW.csv: DiTFastAttn's closed-loop rows of two runs of the comparison's
fidelity cells (dsgap run's closed_loop.csv), paired by (prompt, seed, density): per density, the mean
PSNR / SSIM of each run, the largest per-sample differences, whether the computed densities agree.
Prints a Markdown table."""
import csv
import sys


def rows(path):
    out = {}
    for r in csv.DictReader(open(path, newline="")):
        if r["policy"].startswith("ditfastattn"):
            out[(r["prompt"], r["seed"], r["density_target"])] = r
    return out


def main():
    old, new = rows(sys.argv[1]), rows(sys.argv[2])
    if set(old) != set(new):
        sys.exit("compare.py: the runs have different samples")
    print("| ρ | samples | PSNR old / new (mean, dB) | max per-sample ΔPSNR (dB) | SSIM old / new | max ΔSSIM | densities equal |")
    print("|---|--:|---|--:|---|--:|---|")
    for dt in sorted({k[2] for k in old}, key=float):
        ks = sorted(k for k in old if k[2] == dt)
        f = lambda d, k, c: float(d[k][c])
        mean = lambda d, c: sum(f(d, k, c) for k in ks) / len(ks)
        dp = max(abs(f(new, k, "psnr") - f(old, k, "psnr")) for k in ks)
        ds = max(abs(f(new, k, "ssim") - f(old, k, "ssim")) for k in ks)
        eq = all(old[k]["density"] == new[k]["density"] for k in ks)
        print(f"| {dt} | {len(ks)} | {mean(old, 'psnr'):.4f} / {mean(new, 'psnr'):.4f} | {dp:.4f} | "
              f"{mean(old, 'ssim'):.5f} / {mean(new, 'ssim'):.5f} | {ds:.5f} | {'yes' if eq else 'no'} |")


if __name__ == "__main__":
    main()

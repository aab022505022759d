#!/usr/bin/env python3
"""random_model.py: the bundled model's architecture with random weights (the initialisation train.py
starts from, WanModel.init_weights: Xavier linears, zero biases, N(0, 0.02) modulation, zero output
head), written like the trained model (same config.json, the same conds.safetensors), as the
baseline of the learned-attention summary (results/attention/, `dsgap attnstats`).

  random_model.py [--model data/model] [--seed 0] --out DIR      (needs torch)
"""
import argparse
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wan_torch import WanModel, save_model  # noqa: E402


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(here, "model"), help="the trained model (its config, conds)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    torch.manual_seed(a.seed)
    size = save_model(WanModel(cfg), a.out)
    shutil.copy(os.path.join(a.model, "conds.safetensors"), a.out)
    print("wrote %s: random weights (seed %d), %.1f MB" % (a.out, a.seed, size / 1e6))


if __name__ == "__main__":
    main()

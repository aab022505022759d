#!/usr/bin/env bash
# attention.sh: is the bundled model's attention learned? -> results/attention/ (attnstats.{csv,md},
# attnstats.{png,pdf}): per layer and head, the row entropy and the per-query oracle's retained mass
# at density 0.15 of the bundled model (data/model) against the same architecture with random weights
# (data/random_model.py: the initialisation train.py starts from), both captured by the same command
# (class cockatoo, seed 1, latent 16x32x32 = 4096 tokens, 10 UniPC steps, shift 3, CFG 3; layers
# 0, 3, 7 — the demo's capture). About 3 minutes on 2 CPU cores.
#   experiments/attention.sh [--out DIR | --update-results]   (PYTHON: a python with torch, default
#   python3; --out defaults to a fresh build/results/attention-DATE, --update-results writes results/attention)
source "$(dirname "$0")/lib.sh"
exp_init attention "$@"
cd "$ROOT"
PYTHON=${PYTHON:-python3}
W=build/attention
mkdir -p "$W"
[ -f "$W/random/config.json" ] || "$PYTHON" data/random_model.py --out "$W/random"
for m in learned:data/model random:$W/random; do
  label=${m%%:*} dir=${m#*:}
  exp_say "capturing $label (4096 tokens, 10 steps; about 1-2 min on 2 CPU cores)"
  exp_capture "$W/$label.h5" "$dir" 10
done
"$DSGAP" attnstats --density 0.15 --out "$RESULTS" --quiet learned="$W/learned.h5" random="$W/random.h5"

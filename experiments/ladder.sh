#!/usr/bin/env bash
# ladder.sh: experiment 1, the oracle ladder vs density (experiments/ladder.ini) -> results/ladder/:
# decomposition.{md,tex,csv} (the three sources of the gap at every density, all layers and per
# layer, 95% cluster-bootstrap intervals), figures (error vs density; sources per layer at 0.15;
# sources vs density, all layers and per layer, by experiments/ladder_fig.sh; retained mass), the
# peer methods at matched density beside the ladder (decomposition.md), summary.{csv,md}, metrics.csv.
# Synthetic trace; the bundled model's ladder and factorial over its 24 samples are results/samples/
# (experiments/samples.sh). 238 s on 2 shared CPU cores (README: times). Extra arguments go to dsgap run
# (e.g. --workers 2, or --gpus all with [device] device = gpu).
source "$(dirname "$0")/lib.sh"
exp_init ladder "$@"
exp_run
run=synthetic.w2
exp_analyse $run
exp_collect $run "$RESULTS"

# sources vs density, diverging stacks (positive sources up from 0, negative ones down from 0), one
# panel for all layers and one per layer; the computed densities under the targets
bash "$ROOT/experiments/ladder_fig.sh" "$RESULTS"

exp_readme "# Experiment 1: the oracle ladder vs density (synthetic trace; the bundled model: results/samples/)

The bundled model: its ladder and factorial over 24 samples (12 classes x 2 seeds, two-level
intervals, sign stability) are \`results/samples/\` (experiments/samples.sh), their one home, not
repeated here for a single capture.

Source: **synthetic** — a structured synthetic trace (\`synth: grid=5x16x32 heads=4 layers=3 steps=6
head_dim=64 seed=1\`: 2560 tokens; local, frame, sink and diffuse heads), not a model capture.
Policies: \`dense\` and the oracle ladder (\`est-block oracle-block oracle-tile oracle-pca oracle
oracle+res\`, refresh=step) at top-k densities 0.05, 0.1, 0.15, 0.25, 0.5; warm-up 2 steps.
\`decomposition.md\`: selection = E(est-block) − E(oracle-block), grouping = E(oracle-block) −
E(oracle), lost contributions = E(oracle), per density, for all layers and per layer, with 95%
(layer, head)-cluster bootstrap intervals. Figures: \`figures/sources_vs_density.png\` (stacked
sources vs density, all layers and per layer), \`error_vs_density\`, \`sources_per_layer-rho0.15\` (diverging stacks),
\`mass_distribution-rho0.15\`.
Peers (issue 7): each \`decomposition.md\` density section lists the peer methods (src/policy/peers.h,
labelled by their paper) at matched density beside the ladder: per method the configuration run whose
effective density is closest to the target (top-k peers follow the density: \`xattention\`,
\`spargeattn\` (theta=-0.1) and \`svg2\` with budget=topk, \`chipmunk\`, \`pisa\`; DiTFastAttn's window
is tuned per density, STA's window swept over 1-3 tiles, Radial at its default), its effective density
(marked † when more than 20% off: Radial cannot go below 0.83 on 5 frames, STA moves in steps of 1/8
here) and E with the paired difference to E(est-block)." "$RESULTS/run.json"

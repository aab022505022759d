#!/usr/bin/env bash
# ablation.sh: experiment 2, the MC-Sparse factorial ablation (experiments/ablation.ini) ->
# results/ablation/: ablation.{md,tex,csv} (E of the 8 cells, Shapley shares of G, S, R and
# interactions, 95% cluster-bootstrap intervals, per layer), figures (ablation, shapley, error vs
# steps since the anchor, error vs density, retained mass), the peer methods at matched density
# beside the factorial (ablation.md), summary.{csv,md}, metrics.csv.
# Synthetic trace; the bundled model's ladder and factorial over its 24 samples are results/samples/
# (experiments/samples.sh). 541 s on 2 shared CPU cores (README: times). Extra arguments go to dsgap run.
source "$(dirname "$0")/lib.sh"
exp_init ablation "$@"
exp_run
run=synthetic.w3
exp_analyse $run
exp_collect $run "$RESULTS"
exp_readme "# Experiment 2: MC-Sparse ablation with Shapley shares (synthetic trace; the bundled model: results/samples/)

The bundled model: its ladder and factorial over 24 samples (12 classes x 2 seeds, two-level
intervals, sign stability) are \`results/samples/\` (experiments/samples.sh), their one home, not
repeated here for a single capture.

Source: **synthetic** — a structured synthetic trace (\`synth: grid=5x16x32 heads=4 layers=4 steps=10
head_dim=64 seed=1\`: 2560 tokens; local, frame, sink and diffuse heads), not a model capture.
Policies: \`dense\` and the 2³ factorial \`baseline mc-grouping mc-selection mc-residual mc-gs mc-gr
mc-sr mc-sparse\` (refresh=anchor: groups, selection and residual made at the anchor, step 2, and
reused on steps 3–9) at top-k densities 0.1, 0.15, 0.25; warm-up 3 steps.
\`ablation.md\`: E (mean rel_l2 over post-warm-up units) of every cell, Shapley shares φ_G, φ_S, φ_R of
E(baseline) − E(mc-sparse) (they sum to it exactly), interactions, 95% (layer, head)-cluster
bootstrap intervals, per layer. Figures (NAME-rhoX: at density X): \`figures/ablation-rho0.15.png\`, \`shapley.png\`,
\`error_vs_staleness-rho0.15.png\` (error vs steps since the anchor), \`error_vs_density.png\`,
\`mass_distribution-rho0.15.png\`.
Peers (issue 7): each \`ablation.md\` density section lists the peer methods (src/policy/peers.h, labelled by
their paper) at matched density beside the factorial: per method the configuration run whose effective
density is closest to the target (top-k peers follow the density: \`xattention\`, \`spargeattn\`
(theta=-0.1) and \`svg2\` with budget=topk, \`chipmunk\`, \`pisa\`; DiTFastAttn's window tuned per
density, STA's window 1-2 tiles, Radial at its default), its effective density (marked † when more
than 20% off) and E with the paired difference to E(mc-sparse)." "$RESULTS/run.json"

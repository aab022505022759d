#!/usr/bin/env bash
# peers.sh: the peer methods beside MC-Sparse (experiments/peers.ini) -> results/peers/: peers.{md,csv,tex}
# (per policy and target density: effective density, mean rel_l2, cosine and retained mass over
# post-warm-up units), figures/peers_error_vs_density.png (error against the effective density each method
# actually ran at), summary and metrics.csv. Synthetic trace. About 1-2
# minutes on 2 CPU cores. Extra arguments go to dsgap run.
source "$(dirname "$0")/lib.sh"
exp_init peers "$@"
exp_run
run=synthetic.w2
# no dsgap decompose: the peers are neither the ladder nor the factorial; the table below is theirs
exp_collect $run "$RESULTS"
# the tables (peers.{csv,md,tex}: cluster-bootstrap intervals, one row per distinct configuration)
# and the figure (figures/peers_error_vs_density.*): experiments/peers_tables.sh
exp_say "peers tables and figure"
rm -f "$RESULTS"/figures/peers_*.dat "$RESULTS"/figures/error_vs_density.*
bash "$ROOT/experiments/peers_tables.sh" "$WORK/$run/metrics.csv" "$RESULTS" 2 "synthetic trace"

exp_readme "# Peers beside MC-Sparse (synthetic trace)

Source: **synthetic** — a structured synthetic trace (\`synth: grid=5x16x32 heads=4 layers=2 steps=6
head_dim=64 seed=1\`: 2560 tokens; local, frame, sink and diffuse heads), not a model capture.
Policies: \`dense\`, \`baseline\`, \`mc-sparse\` and the eight peers (src/policy/peers.h) at their published
defaults (svg2, spargeattn, xattention, radial, sta, ditfastattn run at their own density, whatever
--density says; chipmunk and pisa are top-k methods and follow it), plus matched budgets
(\`PEER/budget=matched\`, docs/spec.md §3.6: each peer's own knob calibrated per unit to the target;
also \`spargeattn/theta=-0.1/budget=matched\` below SpargeAttn's self-similarity floor); a target a
peer cannot reach within 0.02 is \"cannot reach ρ\" in the tables (and not plotted), see run.json's
\`unreached_densities\`; at target densities 0.1, 0.15, 0.25; warm-up 2 steps (anchor at
step 1 for the anchor-based policies: mc-sparse, baseline, ditfastattn, chipmunk).
\`peers.md\`: effective density, E (mean rel_l2), cosine and retained mass per policy and target
density, with 95% cluster-bootstrap intervals (\`peers.tex\` too; a method whose mask ignores the target is one row with its targets listed); \`figures/peers_error_vs_density.png\`: E against the effective density each method ran at. The
peers' defaults were tuned for 30k-115k-token videos; on this 2560-token trace SpargeAttn's
self-similarity filter (theta 0.6) keeps every block, STA's 6x8x8 tiles cover most of the grid and
Radial keeps most blocks: their densities are reported as they are." "$RESULTS/run.json"

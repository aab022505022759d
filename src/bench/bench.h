/*
 * bench.h: `dsgap bench [--device gpu|cpu] [--tokens N] [--heads H] [--head-dim D] [--precise on|off]
 * [--csv F]`:
 * the replay-level benchmarks of docs/spec.md §8, through the same backend the replay runs on:
 *   dense pass, anchor step (dense + LSE + PCA groups + exact scores + top-k + residual) with its
 *   breakdown (device seconds per backend phase, dg_backend.phases, and the rest: host gaps), the
 *   sparse reuse pass at densities 0.05..0.5 (PCA groups, token top-k), and the whole oracle ladder
 *   plus factorial on one layer-step of a synthetic trace (replay_layer_step_s); all in the P.V mode of
 *   --precise (dg_backend.precise; default off, the fast mode). On the GPU also the dense and sparse
 *   passes in both modes side by side (pv_fast_*, pv_precise_*, pv_precise_over_fast_*).
 * Inputs are random bf16 Q/K/V with varied row scales (never zeros); times are device events (GPU)
 * or wall clock (CPU), medians of --reps after a warm-up. Appends `name,value,unit,device,date,
 * commit` lines to --csv (default results/bench/bench.csv) and prints them. The kernel-level
 * comparison against cuDNN and FlexAttention is dsgap-bench-kernels + scripts/gpu_bench_torch.py.
 */
#ifndef DG_BENCH_H
#define DG_BENCH_H

#include <stdbool.h>

#define DG_BENCH_DEFAULT_CSV "results/bench/bench.csv" /* relative to the repository root */

/* what dsgap bench measures (the command line's defaults: cli/cmd_bench.c): device "cpu" or "gpu",
 * csv "" for none, grid the layer-step's FxHxW or "none", n tokens, heads, head dim d, reps */
typedef struct {
	const char *device, *csv, *grid;
	int n, heads, d, reps;
	bool precise;
} dg_bench_opts;

/* Runs the benchmarks, prints each line and appends it to o->csv. Returns the exit status (0; 1:
 * failed; 2: a bad layer-step grid). */
int dg_bench(const dg_bench_opts *o);

#endif

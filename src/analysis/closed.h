/*
 * closed.h: the decomposition of the closed loop (issue 50, item 3): the oracle ladder and the
 * MC-Sparse factorial over whole generations, in the tables of the open loop (decompose.h).
 *
 *   dsgap decompose --closed RUN [RUN ...] --out OUT [--boot N] [--seed X]
 *
 * A RUN is a merged closed-loop run folder of dsgap run (RUN/closed_loop.csv, RUN/run.json; read as
 * dsgap compare reads them, compare.h): one row per sample (prompt, seed) x policy x density with the
 * final latents' rel_l2 and PSNR against the sample's dense run. The runs' samples are pooled (the
 * same steps and warm-up). Each sample is one results set of one unit per policy and density (one
 * cluster), so decompose.h's tables apply unchanged: the estimates are means over the samples, the
 * intervals a percentile bootstrap over the samples (paired across policies), the per-sample
 * estimates and sign counts as in the open loop; there are no per-layer rows. The computed density
 * of a unit is the run's computed density over the calls past the warm-up, (density - W/S) / (1 - W/S)
 * (compare.h's sparse_density): peers at matched density are matched on it.
 *
 * Two measures, two pairs of tables in OUT (each with NAME-samples.csv):
 *   decomposition.*, ablation.*            E(p) = mean rel-L2 of p's final latents (the open
 *                                          loop's E, on whole generations)
 *   decomposition-psnr.*, ablation-psnr.*  E(p) = -(mean PSNR in dB): differences are dB lost, a
 *                                          Shapley share dB won; left out (a warning) when a
 *                                          sparse policy's PSNR is infinite (identical to dense)
 * All published together, or nothing. Bad input: one line naming the file and the problem, exit 1.
 */
#ifndef DG_CLOSED_H
#define DG_CLOSED_H

#include <stdbool.h>

/* Whether the command line asks for the closed loop (--closed); dg_cmd_decompose hands it here. */
bool dg_decompose_is_closed(int argc, char **argv);
/* The whole command; returns the exit status (0, 1: failed, 2: bad command line). */
int dg_decompose_closed(int argc, char **argv);

#endif

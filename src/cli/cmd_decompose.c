/*
 * cmd_decompose.c: `dsgap decompose DIR [--boot N] [--seed X]`: the oracle ladder (sources of
 * the dense-sparse gap) and the MC-Sparse factorial ablation (Shapley shares, interactions)
 * from DIR/metrics.csv and DIR/run.json, with 95% cluster-bootstrap intervals (docs/spec.md §5).
 * Writes DIR/decomposition.{csv,md,tex} and DIR/ablation.{csv,md,tex}, each atomically.
 *   dsgap decompose results/demo --boot 2000 --seed 7
 * Several samples (issue 19): `dsgap decompose [LABEL=]DIR... --out OUT` or `--samples LIST --out
 * OUT`: one pair of tables over all of them, two-level bootstrap (analysis/samples.c). The closed
 * loop: `dsgap decompose --closed RUN... --out OUT` (analysis/closed.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "analysis/closed.h"
#include "analysis/decompose.h"
#include "analysis/results.h"
#include "analysis/samples.h"
#include "util/files.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap decompose DIR [--boot N] [--seed X]\n"
		   "       dsgap decompose [LABEL=]DIR [[LABEL=]DIR ...] --out OUT [--boot N] [--seed X]\n"
		   "       dsgap decompose --samples LIST --out OUT [--boot N] [--seed X]\n"
		   "  DIR          results directory with metrics.csv and run.json (dsgap replay)\n"
		   "  --boot N     bootstrap replicates per table cell (default 1000; 0: no intervals)\n"
		   "  --seed X     seed of the bootstrap generator, mt19937 (default 1)\n"
		   "writes DIR/decomposition.{csv,md,tex} (oracle ladder) and DIR/ablation.{csv,md,tex}\n"
		   "(factorial: Shapley shares and interactions), per density, all layers and per layer\n"
		   "several DIRs (one per sample: class or prompt x seed) or --samples: tables over the\n"
		   "sample set in OUT, two-level bootstrap (samples, then clusters), per-sample estimates\n"
		   "and sign stability (dsgap decompose --out X --help)\n"
		   "       dsgap decompose --closed RUN [RUN ...] --out OUT: the same tables over\n"
		   "whole generations of merged closed-loop runs (dsgap decompose --closed --help)\n");
}

static void summary(const dg_results *r, const dg_table *t)
{
	for (int i = 0; i < t->n_rows; i++) {
		const dg_row *w = &t->row[i];
		const double *q = w->est;
		if (w->layer != DG_ANY)
			continue;
		if (t->kind == DG_TABLE_LADDER)
			printf("  density %g: E(est-block) %.4g = selection %.4g + grouping %.4g + "
			       "lost %.4g (check %.2g)\n", r->density[w->density], q[DG_LAD_E_EST],
			       q[DG_LAD_SELECTION], q[DG_LAD_GROUPING], q[DG_LAD_LOST], w->check);
		else
			printf("  density %g: E(baseline) - E(mc-sparse) %.4g = G %.4g + S %.4g + "
			       "R %.4g (check %.2g)\n", r->density[w->density], q[DG_ABL_TOTAL],
			       q[DG_ABL_PHI + DG_COMP_G], q[DG_ABL_PHI + DG_COMP_S],
			       q[DG_ABL_PHI + DG_COMP_R], w->check);
	}
}

int dg_cmd_decompose(int argc, char **argv)
{
	if (dg_decompose_is_closed(argc, argv))
		return dg_decompose_closed(argc, argv);
	if (dg_decompose_is_samples(argc, argv))
		return dg_decompose_samples(argc, argv);
	dg_results_args a;
	int rc = dg_results_args_parse(&a, "decompose", false, argc, argv, usage);
	if (rc)
		return rc > 0 ? 0 : 2;
	/* the folder is ours while the tables are made; they are published together or not at all */
	dg_results r;
	if (dg_results_load(&r, a.dir))
		return 1;
	dg_dir_lock_t lock;
	if (dg_dir_lock(&lock, a.dir)) {
		dg_results_free(&r);
		return 1;
	}
	char *inputs[] = { dg_path_join(a.dir, "metrics.csv"), dg_path_join(a.dir, "run.json") };
	dg_input_add(inputs[0]);
	dg_input_add(inputs[1]);
	free(inputs[0]);
	free(inputs[1]);
	dg_publish pub = { 0 };
	dg_out_defer(&pub);
	int *layers = dg_malloc(r.n_clusters * sizeof *layers);
	printf("decompose: %s: %zu units, %d policies, %d densities, %d (layer, head) clusters; "
	       "post-warm-up: step >= %d in %d layers (%d dense layers out)\n", r.dir, r.n_units,
	       r.n_policies, r.n_densities, r.n_clusters, r.warmup, dg_results_layers(&r, layers),
	       r.n_dense_layers);
	free(layers);
	int built = 0, wrote[DG_TABLE_COUNT] = { 0 };
	for (int k = 0; k < DG_TABLE_COUNT && !rc; k++) {
		dg_table t;
		if (dg_table_build(&r, k, -1, (int)a.boot, a.seed, &t)) {
			dg_warn("decompose: %s: no density has the policies of the %s table",
				r.dir, dg_table_name(k));
			dg_table_free(&t);
			continue;
		}
		built++;
		printf("%s (%d rows, %ld bootstrap replicates, seed %lu): %s sum to %s within %.2g\n",
		       dg_table_name(k), t.n_rows, a.boot, a.seed,
		       k == DG_TABLE_LADDER ? "sources" : "Shapley shares",
		       k == DG_TABLE_LADDER ? "E(est-block)" : "the total reduction",
		       dg_table_check(&t));
		summary(&r, &t);
		rc = dg_table_write(&r, &t);
		wrote[k] = !rc;
		dg_table_free(&t);
	}
	dg_out_defer(NULL);
	if (!rc && !built)
		rc = dg_error("decompose: %s: nothing to decompose (needs est-block, oracle-block and "
			      "oracle, or the 8 factorial cells, after warm-up)", r.dir);
	if (rc) {
		dg_publish_abort(&pub);
	} else {
		rc = dg_publish_commit(&pub);
		for (int k = 0; k < DG_TABLE_COUNT && !rc; k++)
			if (wrote[k])
				printf("wrote %s/%s.{csv,md,tex}\n", r.dir, dg_table_name(k));
	}
	dg_results_free(&r);
	dg_dir_unlock(&lock);
	return rc ? 1 : 0;
}

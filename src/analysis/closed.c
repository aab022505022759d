/*
 * closed.c: `dsgap decompose --closed`: the closed loop's ladder and factorial in the open loop's
 * tables. See closed.h.
 */
#include "analysis/closed.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/compare.h"
#include "analysis/decompose.h"
#include "analysis/results.h"
#include "util/files.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dsgap decompose --closed RUN [RUN ...] --out OUT [--boot N] [--seed X]\n"
		"  RUN          a merged closed-loop run folder of dsgap run (closed_loop.csv, run.json);\n"
		"               the samples (prompt, seed) of every RUN are pooled (same steps, warm-up)\n"
		"  --out OUT    where the tables go (created)\n"
		"  --boot N     bootstrap replicates per table cell (default 1000; 0: no intervals)\n"
		"  --seed X     seed of the bootstrap generator, mt19937 (default 1)\n"
		"The oracle ladder (selection, query grouping, key blocking, lost contributions) and the\n"
		"MC-Sparse factorial (Shapley shares, interactions) of the final latents' error against\n"
		"the dense run, means over the samples with 95%% intervals over them: rel-L2 in\n"
		"OUT/{decomposition,ablation}.{csv,md,tex}, minus the PSNR (dB) in\n"
		"OUT/{decomposition,ablation}-psnr.{csv,md,tex}; each with -samples.csv.\n");
}

bool dg_decompose_is_closed(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--closed"))
			return true;
	return false;
}

/* the distinct samples of rs in order of first appearance: their row's index into first (n) */
static int distinct_samples(const dg_loop_rows *rs, int *first)
{
	int n = 0;
	for (int i = 0; i < rs->n; i++) {
		int k = 0;
		while (k < n && strcmp(rs->r[first[k]].sample, rs->r[i].sample))
			k++;
		if (k == n)
			first[n++] = i;
	}
	return n;
}

/*
 * One results set per sample, each of one cluster (layer 0, head 0) and one unit per sparse policy
 * and density: rel_l2 holds the measure (rel-L2, or minus the PSNR), density_eff the computed
 * density past the warm-up. The samples without a sparse row are left out (a warning). Returns the
 * number of samples built into r (labels into label), or -1 when a PSNR is infinite.
 */
static int build_samples(const dg_loop_rows *rs, dg_measure m, const int *first, int ns,
			 dg_results *r, char **label)
{
	const double wf = (double)rs->warmup / rs->steps;
	int n = 0;
	for (int k = 0; k < ns; k++) {
		const char *name = rs->r[first[k]].sample;
		dg_results *x = &r[n];
		memset(x, 0, sizeof *x);
		for (int i = 0; i < rs->n; i++) {
			const dg_loop_row *w = &rs->r[i];
			if (strcmp(w->sample, name) || !strcmp(w->policy, "dense"))
				continue;
			if (m == DG_MEASURE_PSNR && !isfinite(w->psnr)) {
				dg_warn("decompose: sample %s: %s at %g has PSNR %g (identical to dense): "
					"no PSNR tables", name, w->policy, w->rho, w->psnr);
				dg_results_free(x);
				for (int j = 0; j < n; j++)
					dg_results_free(&r[j]);
				return -1;
			}
			dg_unit u = { .density_target = w->rho, .step = 0, .layer = 0, .head = 0,
				      .rel_l2 = m == DG_MEASURE_PSNR ? -w->psnr : w->rel_l2,
				      .density_eff = (w->density - wf) / (1 - wf), .psnr = w->psnr,
				      .mass_mean = NAN, .mass_p5 = NAN };
			dg_results_add(x, w->policy, &u);
		}
		if (!x->n_units) {
			if (m == DG_MEASURE_REL_L2)
				dg_warn("decompose: sample %s has only dense rows: left out", name);
			dg_results_free(x);
			continue;
		}
		x->dir = dg_strdup(name);
		x->trace_path = dg_strdup(name);
		x->model = dg_strdup("closed loop");
		x->source = dg_strdup("closed loop");
		x->git_commit = dg_strdup("");
		x->device = dg_strdup(rs->device);
		x->date = dg_strdup("");
		if (dg_results_index(x)) { /* a duplicate is refused by the reader first */
			dg_results_free(x);
			continue;
		}
		label[n++] = x->dir;
	}
	return n;
}

/* the rows of t for all layers only: a closed-loop sample has one cluster, so the per-layer row
 * would repeat it */
static void keep_all_rows(dg_table *t)
{
	int k = 0;
	for (int i = 0; i < t->n_rows; i++) {
		if (t->row[i].layer == DG_ANY)
			t->row[k++] = t->row[i];
		else
			free(t->row[i].sample_est);
	}
	t->n_rows = k;
}

/* both tables of one measure into out; returns 0, -1 (failed) or 1 (nothing to decompose) */
static int tables(const dg_results *r, int n, char **label, const dg_loop_info *info, int boot,
		  unsigned long seed, const char *out)
{
	int built = 0;
	for (int k = 0; k < DG_TABLE_COUNT; k++) {
		dg_table t;
		if (dg_table_build_samples(r, n, (const char *const *)label, k, -1, boot, seed, &t)) {
			dg_table_free(&t);
			continue;
		}
		t.loop = info;
		keep_all_rows(&t);
		built++;
		for (int i = 0; i < t.n_rows; i++) {
			const dg_row *w = &t.row[i];
			const bool lad = k == DG_TABLE_LADDER;
			printf("  %s%s, density %g (computed %.3g past the warm-up), %d samples:",
			       dg_table_name(k), info->measure == DG_MEASURE_PSNR ? " (E = -PSNR, dB)" : "",
			       r[0].density[w->density], w->density_eff, w->n_samples);
			static const int lq[] = { DG_LAD_SELECTION, DG_LAD_QGROUP, DG_LAD_KBLOCK,
						  DG_LAD_LOST };
			static const int aq[] = { DG_ABL_PHI + 0, DG_ABL_PHI + 1, DG_ABL_PHI + 2,
						  DG_ABL_TOTAL };
			for (int j = 0; j < 4; j++) {
				int q = lad ? lq[j] : aq[j];
				printf(" %s %.3g [%.3g, %.3g]%s", dg_quantity_key(k, q), w->est[q], w->lo[q],
				       w->hi[q], j < 3 ? ";" : "\n");
			}
		}
		int rc = dg_table_write_dir(r, &t, out);
		dg_table_free(&t);
		if (rc)
			return -1;
	}
	return built ? 0 : 1;
}

int dg_decompose_closed(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "closed", no_argument, NULL, 'c' },
		{ "out", required_argument, NULL, 'o' },
		{ "boot", required_argument, NULL, 'b' },
		{ "seed", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL;
	long boot = 1000;
	unsigned long seed = 1;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
		switch (c) {
		case 'c': break;
		case 'o': out = optarg; break;
		case 'b':
			if (dg_opt_long("decompose", "boot", optarg, 0, 10000000, &boot))
				return 2;
			break;
		case 's':
			if (dg_opt_seed("decompose", "seed", optarg, &seed))
				return 2;
			break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("decompose", c, argv, opts);
		}
	}
	if (!out || optind == argc) {
		dg_error("decompose: --closed needs --out OUT and at least one RUN folder");
		usage(stderr);
		return 2;
	}
	dg_loop_rows rs = { 0 };
	int rc = 0;
	size_t runs_len = 1;
	for (int i = optind; i < argc; i++)
		runs_len += strlen(argv[i]) + 2;
	char *runs = dg_calloc(runs_len, 1);
	for (int i = optind; i < argc && !rc; i++) {
		rc = dg_loop_rows_read(argv[i], &rs, "decompose");
		char *shown = dg_path_shown(argv[i]); /* never longer than argv[i] */
		snprintf(runs + strlen(runs), runs_len - strlen(runs), "%s%s", i > optind ? ", " : "", shown);
		free(shown);
		char *m = dg_path_join(argv[i], "closed_loop.csv"), *j = dg_path_join(argv[i], "run.json");
		dg_input_add(m); /* no table may overwrite an input */
		dg_input_add(j);
		free(m);
		free(j);
	}
	/* one schedule: the decomposition pairs each policy's sample with its dense run and the others' */
	for (int i = 1; i < rs.nruns && !rc; i++)
		if (rs.runs[i].warmup != rs.runs[0].warmup || rs.runs[i].nanchors != rs.runs[0].nanchors ||
		    memcmp(rs.runs[i].anchors, rs.runs[0].anchors, (size_t)rs.runs[0].nanchors * sizeof(int)))
			rc = dg_error("decompose: --closed: %s has another schedule than %s (decompose one schedule "
				      "at a time)", argv[optind + i], argv[optind]);
	for (int i = 0; i < rs.nruns && !rc; i++)
		if (rs.runs[i].ndense_layers)
			rc = dg_error("decompose: --closed: %s: a schedule with dense layers (the sparse calls' "
				      "density is not derived for it)", argv[optind + i]);
	int *first = dg_malloc((rs.n + 1) * sizeof *first);
	const int ns = rc ? 0 : distinct_samples(&rs, first);
	dg_results *r = dg_calloc(ns + 1, sizeof *r);
	char **label = dg_calloc(ns + 1, sizeof *label);
	if (!rc && dg_output_folder_check("decompose", out))
		rc = 2;
	dg_made_dirs made = { 0 }; /* removed again (when empty) if the tables are not published */
	if (!rc && dg_mkdir_track(out, &made))
		rc = 1;
	dg_dir_lock_t lock;
	bool locked = !rc && !dg_dir_lock(&lock, out);
	if (!rc && !locked)
		rc = 1;
	dg_publish pub = { 0 };
	dg_out_defer(&pub); /* every table published together, or none */
	if (!rc)
		printf("decompose --closed: %d rows of %d samples from %d runs (%d steps, warm-up %d; "
		       "%s); bootstrap over the samples, %ld replicates, seed %lu\n", rs.n, ns,
		       argc - optind, rs.steps, rs.warmup, rs.device, boot, seed);
	int built = 0;
	for (int m = DG_MEASURE_REL_L2; m <= DG_MEASURE_PSNR && !rc; m++) {
		int n = build_samples(&rs, m, first, ns, r, label);
		if (n < 0)
			continue;
		dg_loop_info info = { .measure = m, .steps = rs.steps, .warmup = rs.warmup,
				      .runs = runs, .device = rs.device };
		int t = n ? tables(r, n, label, &info, (int)boot, seed, out) : 1;
		if (t < 0)
			rc = 1;
		built += t == 0;
		for (int i = 0; i < n; i++)
			dg_results_free(&r[i]);
	}
	dg_out_defer(NULL);
	if (!rc && !built)
		rc = dg_error("decompose: nothing to decompose in %s (needs est-block, oracle-block and "
			      "oracle, or the 8 factorial cells, at one density)", runs);
	if (rc) {
		dg_publish_abort(&pub);
	} else {
		rc = dg_publish_commit(&pub);
		if (!rc)
			printf("wrote %s: closed-loop decomposition and ablation tables, rel-L2 and PSNR "
			       "(.csv .md .tex, -samples.csv)\n", out);
	}
	if (locked)
		dg_dir_unlock(&lock);
	if (rc)
		dg_made_dirs_remove(&made);
	dg_made_dirs_free(&made);
	free(label);
	free(r);
	free(first);
	free(runs);
	free(rs.r), free(rs.runs);
	return rc == 2 ? 2 : rc ? 1 : 0;
}

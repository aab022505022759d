/*
 * cmd_attnstats.c: dsgap attnstats, is a model's attention learned? For every unit (step, layer,
 * head) of one or more traces: the mean over queries of the row entropy of softmax(q k^T / sqrt d),
 * normalised by ln N (1 = uniform), and the mean retained probability mass of the per-query oracle
 * at density rho (each query keeps its own top K = dg_topk_count(rho, N) keys). Random weights give
 * near-uniform rows (entropy near 1, mass near rho); learned attention is peaked.
 *   dsgap attnstats --density 0.15 --out DIR bundled=T1.h5 random=T2.h5
 * Writes DIR/attnstats.csv (one row per source and unit), DIR/attnstats.md (per source, layer and
 * head: means over steps) and DIR/attnstats.{dat,gp,pdf,png} (both quantities per layer and head).
 */
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/attention.h"
#include "cli/commands.h"
#include "analysis/plot.h"
#include "policy/select.h"
#include "analysis/style_gp.h"
#include "trace/trace.h"
#include "util/csv.h"
#include "util/util.h"

#define MAX_SOURCES 8

typedef struct {
	int n;
	dg_budget budget;
	double *entropy, *mass; /* (n) per query */
	int **idx;              /* per thread: (n) selected keys */
	void **work;            /* per thread: dg_select_row scratch */
} row_stats;

/* one probability row p (n) of query i: its entropy / ln n and the mass of its top K */
static void stats_row(void *ctx, int i, const float *p)
{
	row_stats *rs = ctx;
	int t = omp_get_thread_num(), n = rs->n;
	double h = 0;
	for (int j = 0; j < n; j++)
		if (p[j] > 0)
			h -= (double)p[j] * log(p[j]);
	rs->entropy[i] = h / log(n);
	int c = dg_select_row(p, n, &rs->budget, rs->idx[t], rs->work[t]);
	double m = 0;
	for (int j = 0; j < c; j++)
		m += p[rs->idx[t][j]];
	rs->mass[i] = m;
}

static double mean(const double *x, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += x[i];
	return s / n;
}

typedef struct {
	const char *label, *path;
	dg_trace_meta meta;     /* the trace's, for the tables */
	double *entropy, *mass; /* (steps, layers, heads) unit means */
} source;

static int measure(source *src, double rho, bool quiet)
{
	dg_trace t;
	if (dg_trace_open(&t, src->path))
		return -1;
	const dg_trace_meta *m = &t.meta;
	int n = m->tokens, d = m->head_dim, threads = omp_get_max_threads();
	size_t units = (size_t)m->steps * m->layers * m->heads, nd = (size_t)n * d;
	float *q = dg_malloc(nd * sizeof(float)), *k = dg_malloc(nd * sizeof(float)),
	      *v = dg_malloc(nd * sizeof(float)), *o = dg_malloc(nd * sizeof(float)),
	      *lse = dg_malloc((size_t)n * sizeof(float));
	row_stats rs = { .n = n, .budget = { .kv = DG_KV_TOKEN, .budget = DG_BUDGET_TOPK, .rho = rho } };
	rs.entropy = dg_malloc((size_t)n * sizeof(double));
	rs.mass = dg_malloc((size_t)n * sizeof(double));
	rs.idx = dg_malloc((size_t)threads * sizeof *rs.idx);
	rs.work = dg_malloc((size_t)threads * sizeof *rs.work);
	for (int i = 0; i < threads; i++) {
		rs.idx[i] = dg_malloc((size_t)n * sizeof(int));
		rs.work[i] = dg_malloc(dg_select_work_size(n));
	}
	src->entropy = dg_malloc(units * sizeof(double));
	src->mass = dg_malloc(units * sizeof(double));
	int rc = 0;
	for (size_t u = 0; u < units && !rc; u++) {
		int s = (int)(u / ((size_t)m->layers * m->heads)), l = (int)(u / m->heads % m->layers),
		    h = (int)(u % m->heads);
		rc = dg_trace_read(&t, DG_QKV_Q, s, l, h, q) || dg_trace_read(&t, DG_QKV_K, s, l, h, k) ||
		     dg_trace_read(&t, DG_QKV_V, s, l, h, v);
		if (rc)
			break;
		dg_attn_dense(q, k, v, n, n, d, o, lse); /* the exact LSE of every row */
		dg_scores_exact(q, k, lse, n, d, NULL, 0, stats_row, &rs);
		src->entropy[u] = mean(rs.entropy, n);
		src->mass[u] = mean(rs.mass, n);
		if (!quiet)
			fprintf(stderr, "\rattnstats: %s unit %zu/%zu", src->label, u + 1, units);
	}
	if (!quiet)
		fputc('\n', stderr);
	for (int i = 0; i < threads; i++)
		free(rs.idx[i]), free(rs.work[i]);
	free(rs.idx), free(rs.work), free(rs.entropy), free(rs.mass);
	free(q), free(k), free(v), free(o), free(lse);
	if (!rc) { /* keep the metadata: steal it from the trace before closing */
		src->meta = t.meta;
		memset(&t.meta, 0, sizeof t.meta);
	}
	dg_trace_close(&t);
	return rc ? -1 : 0;
}

/* mean over steps of x for (layer, head) */
static double over_steps(const source *s, const double *x, int l, int h)
{
	const dg_trace_meta *m = &s->meta;
	double sum = 0;
	for (int st = 0; st < m->steps; st++)
		sum += x[((size_t)st * m->layers + l) * m->heads + h];
	return sum / m->steps;
}

/* s as a gnuplot single-quoted string (a quote inside doubled); control characters as '?' */
static void gp_string(FILE *f, const char *s)
{
	putc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			putc('\'', f);
		putc((unsigned char)*s < 0x20 ? '?' : *s, f);
	}
	putc('\'', f);
}

static int write_outputs(const char *dir, source *src, int ns, double rho, const char *cmdline)
{
	char *path = dg_path_join(dir, "attnstats.csv");
	dg_out o;
	int rc = dg_out_open(&o, path);
	free(path);
	if (rc)
		return -1;
	fprintf(o.f, "source,trace,step,layer,head,tokens,entropy_norm,oracle_mass,density\n");
	for (int i = 0; i < ns; i++) {
		const dg_trace_meta *m = &src[i].meta;
		for (int s = 0; s < m->steps; s++)
			for (int l = 0; l < m->layers; l++)
				for (int h = 0; h < m->heads; h++) {
					size_t u = ((size_t)s * m->layers + l) * m->heads + h;
					dg_csv_field(o.f, src[i].label);
					putc(',', o.f);
					dg_csv_field(o.f, src[i].path);
					fprintf(o.f, ",%d,%d,%d,%d,%.6f,%.6f,%g\n", m->step_index[s], m->layer_index[l],
						m->head_index[h], m->tokens, src[i].entropy[u], src[i].mass[u], rho);
				}
	}
	if (dg_out_commit(&o))
		return -1;

	path = dg_path_join(dir, "attnstats.md");
	rc = dg_out_open(&o, path);
	free(path);
	if (rc)
		return -1;
	fprintf(o.f, "# Is the attention learned? Entropy and per-query oracle mass\n\n"
		     "`%s` (dsgap %s, commit %s). Per (layer, head), means over the stored steps and all "
		     "queries: **H** = row entropy of softmax(qk^T/sqrt d) / ln N (1 = uniform); **mass** = "
		     "probability mass kept by the per-query oracle at density %g (K = %d of N keys; a "
		     "uniform row keeps %.3f).\n\n", cmdline, DG_VERSION, dg_git_commit(), rho,
		dg_topk_count(rho, src[0].meta.tokens), (double)dg_topk_count(rho, src[0].meta.tokens) /
		src[0].meta.tokens);
	for (int i = 0; i < ns; i++) {
		const dg_trace_meta *m = &src[i].meta;
		fprintf(o.f, "## %s: %s (%s; %d tokens, steps %d..%d)\n\n| layer |", src[i].label,
			src[i].path, m->model ? m->model : "?", m->tokens, m->step_index[0],
			m->step_index[m->steps - 1]);
		for (int h = 0; h < m->heads; h++)
			fprintf(o.f, " H h%d | mass h%d |", m->head_index[h], m->head_index[h]);
		fprintf(o.f, "\n|---|");
		for (int h = 0; h < m->heads; h++)
			fprintf(o.f, "---|---|");
		fputc('\n', o.f);
		double allh = 0, allm = 0;
		for (int l = 0; l < m->layers; l++) {
			fprintf(o.f, "| %d |", m->layer_index[l]);
			for (int h = 0; h < m->heads; h++) {
				double e = over_steps(&src[i], src[i].entropy, l, h),
				       ms = over_steps(&src[i], src[i].mass, l, h);
				allh += e, allm += ms;
				fprintf(o.f, " %.3f | %.3f |", e, ms);
			}
			fputc('\n', o.f);
		}
		fprintf(o.f, "\nAll layers and heads: H %.3f, mass %.3f.\n\n", allh / (m->layers * m->heads),
			allm / (m->layers * m->heads));
	}
	if (dg_out_commit(&o))
		return -1;

	/* the figure: x = layer (heads dodged), H and mass per source in two panels */
	path = dg_path_join(dir, "attnstats.dat");
	rc = dg_out_open(&o, path);
	free(path);
	if (rc)
		return -1;
	fprintf(o.f, "# attnstats.dat: per source (gnuplot index), layer and head: means over steps\n"
		     "# made by %s (commit %s)\n# columns: layer head entropy_norm oracle_mass\n", cmdline,
		dg_git_commit());
	for (int i = 0; i < ns; i++) {
		const dg_trace_meta *m = &src[i].meta;
		fprintf(o.f, "# %s\n", src[i].label);
		for (int l = 0; l < m->layers; l++)
			for (int h = 0; h < m->heads; h++)
				fprintf(o.f, "%d %d %.6f %.6f\n", m->layer_index[l], m->head_index[h],
					over_steps(&src[i], src[i].entropy, l, h),
					over_steps(&src[i], src[i].mass, l, h));
		fprintf(o.f, "\n\n");
	}
	if (dg_out_commit(&o))
		return -1;
	path = dg_path_join(dir, "style.gp");
	rc = dg_out_open(&o, path);
	free(path);
	if (rc)
		return -1;
	fputs(DG_STYLE_GP, o.f);
	if (dg_out_commit(&o))
		return -1;
	path = dg_path_join(dir, "attnstats.gp");
	rc = dg_out_open(&o, path);
	free(path);
	if (rc)
		return -1;
	/* one key, right of the second panel (outside the data); x ticks at the captured layers */
	const dg_trace_meta *m0 = &src[0].meta;
	fprintf(o.f, "# attnstats.gp: entropy and oracle mass per layer and head (gnuplot attnstats.gp)\n"
		     "load 'style.gp'\n"
		     "do for [fmt in \"pdf png\"] {\n"
		     "if (fmt eq \"pdf\") { set terminal pdfcairo size 6.5in,2.6in font 'Liberation Sans,8' }"
		     " else { set terminal pngcairo size 1950,780 font 'Liberation Sans,8' fontscale 2.5"
		     " linewidth 2 }\n"
		     "set output 'attnstats.'.fmt\n"
		     "set multiplot layout 1,2\n"
		     "set xlabel 'layer (heads side by side)'\nset xrange [%g:%g]\nset xtics (",
		m0->layer_index[0] - 0.5, m0->layer_index[m0->layers - 1] + 0.15 * (m0->heads - 1) + 0.5);
	for (int l = 0; l < m0->layers; l++)
		fprintf(o.f, "%s%d", l ? ", " : "", m0->layer_index[l]);
	fprintf(o.f, ")\nunset key\nset title '(a) row entropy'\n"
		     "set ylabel 'row entropy / ln N'\nset yrange [0:1.05]\n"
		     "plot");
	for (int i = 0; i < ns; i++) {
		fprintf(o.f, "%s 'attnstats.dat' index %d using ($1+0.15*$2):3 with points ls %d notitle",
			i ? "," : "", i, i + 1);
	}
	fprintf(o.f, "\nset key outside right center vertical noenhanced\n"
		     "set title '(b) retained mass of the per-query oracle'\n"
		     "set ylabel 'oracle mass at density %g'\nset yrange [0:1.05]\nplot", rho);
	for (int i = 0; i < ns; i++) {
		fprintf(o.f, "%s 'attnstats.dat' index %d using ($1+0.15*$2):4 with points ls %d title ",
			i ? "," : "", i, i + 1);
		gp_string(o.f, src[i].label);
	}
	fprintf(o.f, ", %g with lines dt 2 lc rgb 'gray' title 'uniform rows'\n"
		     "unset multiplot\nset output\n}\n",
		(double)dg_topk_count(rho, src[0].meta.tokens) / src[0].meta.tokens);
	if (dg_out_commit(&o))
		return -1;
	return dg_gnuplot(dir, "attnstats");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap attnstats [--density RHO] --out DIR LABEL=TRACE.h5 [LABEL=TRACE.h5 ...]\n\n"
		   "Per unit of each trace: the mean row entropy of the attention (/ ln N) and the mean\n"
		   "probability mass kept by the per-query oracle at density RHO (default 0.15).\n"
		   "Writes DIR/attnstats.{csv,md} and the figure DIR/attnstats.{dat,gp,pdf,png}.\n");
}

int dg_cmd_attnstats(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "density", required_argument, 0, 'd' }, { "out", required_argument, 0, 'o' },
		{ "quiet", no_argument, 0, 'q' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	double rho = 0.15;
	const char *out = NULL;
	bool quiet = false;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":d:o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (dg_parse_doubles(optarg, &rho, 1) != 1 || !(rho > 0 && rho <= 1))
				return dg_error("attnstats: --density '%s' is not in (0, 1]", optarg), 2;
			break;
		case 'o': out = optarg; break;
		case 'q': quiet = true; break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("attnstats", c, argv, opts);
		}
	}
	int ns = argc - optind;
	if (!out || ns < 1 || ns > MAX_SOURCES) {
		usage(stderr);
		return 2;
	}
	char *cmdline = dg_join_args(argc, argv);
	source src[MAX_SOURCES] = { 0 };
	for (int i = 0; i < ns; i++) {
		char *a = argv[optind + i], *eq = strchr(a, '=');
		if (!eq || eq == a || !eq[1]) {
			free(cmdline);
			return dg_error("attnstats: '%s' is not LABEL=TRACE.h5", a), 2;
		}
		*eq = 0;
		src[i].label = a;
		src[i].path = eq + 1;
	}
	int rc = 0;
	for (int i = 0; i < ns && !rc; i++)
		rc = measure(&src[i], rho, quiet);
	if (!rc && !(rc = dg_mkdir_p(out)))
		rc = write_outputs(out, src, ns, rho, cmdline);
	for (int i = 0; i < ns; i++) {
		free(src[i].entropy), free(src[i].mass);
		dg_trace_meta_free(&src[i].meta);
	}
	free(cmdline);
	if (!rc)
		printf("attnstats: %s/attnstats.{csv,md,pdf,png}\n", out);
	return rc ? 1 : 0;
}

/*
 * attnstats.c: dsgap attnstats's statistics (attnstats.h): each trace's unit means of the row
 * entropy and the per-query oracle's mass, pooled over the samples with the two-level bootstrap, and
 * the tables and figure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/attnstats.h"
#include "analysis/bootstrap.h"
#include "analysis/decompose.h"
#include "analysis/plot.h"
#include "analysis/style_gp.h"
#include "policy/attention.h"
#include "policy/select.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/util.h"

#define MAX_Q (4 * DG_ATTN_MAX_SOURCES)

typedef struct {
	int n, k;               /* keys, and the oracle's K = dg_topk_count(rho, n) */
	double *entropy, *mass; /* (n) per query */
} row_stats;

/* one probability row p (n) of query i, with its logs lp: its entropy / ln n (summed in double) and
 * the mass of its top K */
static void stats_row(void *ctx, int i, const float *p, const float *lp)
{
	row_stats *rs = ctx;
	int n = rs->n;
	double h = 0;
	for (int j = 0; j < n; j++)
		h -= (double)p[j] * lp[j];
	rs->entropy[i] = h / log(n);
	rs->mass[i] = dg_topk_sum(p, n, rs->k);
}

static double mean(const double *x, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += x[i];
	return s / n;
}

static int measure(dg_attn_source *src, double rho, bool quiet)
{
	dg_trace t;
	if (dg_trace_open(&t, src->path))
		return -1;
	dg_attn_init_threads(); /* OpenBLAS single-threaded inside the OpenMP rows (else 3x slower) */
	const dg_trace_meta *m = &t.meta;
	int n = m->tokens, d = m->head_dim;
	size_t units = (size_t)m->steps * m->layers * m->heads, nd = (size_t)n * d;
	float *q = dg_malloc(nd * sizeof(float)), *k = dg_malloc(nd * sizeof(float));
	row_stats rs = { .n = n, .k = dg_topk_count(rho, n) };
	rs.entropy = dg_malloc((size_t)n * sizeof(double));
	rs.mass = dg_malloc((size_t)n * sizeof(double));
	src->entropy = dg_malloc(units * sizeof(double));
	src->mass = dg_malloc(units * sizeof(double));
	int rc = 0;
	dg_progress pr = { 0 };
	double t0 = dg_now();
	for (size_t u = 0; u < units && !rc; u++) {
		int s = (int)(u / ((size_t)m->layers * m->heads)), l = (int)(u / m->heads % m->layers),
		    h = (int)(u % m->heads);
		rc = dg_trace_read(&t, DG_QKV_Q, s, l, h, q) || dg_trace_read(&t, DG_QKV_K, s, l, h, k);
		if (rc)
			break;
		dg_attn_rows(q, k, n, d, stats_row, &rs);
		src->entropy[u] = mean(rs.entropy, n);
		src->mass[u] = mean(rs.mass, n);
		char eta[32];
		if (!quiet)
			dg_progress_show(&pr, u + 1 == units, "attnstats: %s unit %zu/%zu, ETA %s", src->label, u + 1, units,
					 dg_duration_str((dg_now() - t0) / (u + 1) * (units - u - 1), eta, sizeof eta));
	}
	free(rs.entropy), free(rs.mass);
	free(q), free(k);
	if (!rc) { /* keep the metadata: steal it from the trace before closing */
		src->meta = t.meta;
		memset(&t.meta, 0, sizeof t.meta);
	}
	dg_trace_close(&t);
	return rc ? -1 : 0;
}

/* Pooled cluster c = s * lh + layer * heads + head; "policy" 2i: source i's entropy, 2i + 1: its
 * mass (sum over steps, count = steps). */
/* one row of the tables: all layers (layer = head = -1), one layer (head -1), or one cluster */
typedef struct {
	int layer, head; /* trace positions, -1: all */
	double est[MAX_Q], lo[MAX_Q], hi[MAX_Q], *per; /* per: (ns, MAX_Q) each sample's own */
	int n_pos[MAX_Q], n_fin[MAX_Q];
	int n_units, n_clusters, n_samples; /* per source: its units, (layer, head) clusters, samples */
} row;

static int n_src; /* the statistic's sources (dg_boot_stat_fn has no context; compare.c does the same) */
static int n_quant(int nsrc) { return 2 * nsrc + 2 * (nsrc - 1); }

/* E -> H_i, mass_i, then for i >= 1: H_i - H_0 and mass_0 - mass_i (> 0: source 0 more peaked) */
static void attn_stat(const double *E, double *q)
{
	for (int p = 0; p < 2 * n_src; p++)
		q[p] = E[p];
	for (int i = 1; i < n_src; i++) {
		q[2 * n_src + 2 * (i - 1)] = E[2 * i] - E[0];
		q[2 * n_src + 2 * (i - 1) + 1] = E[1] - E[2 * i + 1];
	}
}

static void build_row(const dg_attn_sources *S, const double *sum, const double *count, row *w, int boot)
{
	const int nc = S->ns * S->lh, heads = S->src[0].meta.heads, nq = n_quant(S->nsrc);
	unsigned char *keep = dg_malloc(nc);
	int *off = dg_malloc((S->ns + 1) * sizeof *off), *member = dg_malloc(nc * sizeof *member),
	    *group = dg_malloc((S->ns + 1) * sizeof *group), *gsample = dg_malloc((S->ns + 1) * sizeof *gsample), nm;
	for (int s = 0; s <= S->ns; s++)
		off[s] = s * S->lh;
	for (int c = 0; c < nc; c++) {
		int l = c % S->lh / heads, h = c % heads;
		keep[c] = (w->layer < 0 || l == w->layer) && (w->head < 0 || h == w->head);
	}
	int ng = dg_boot_members(off, S->ns, keep, member, &nm, group, gsample);
	w->n_units = 0;
	for (int i = 0; i < nm; i++)
		w->n_units += (int)count[member[i]]; /* source 0's entropy: every source has the same units */
	w->n_clusters = nm;
	w->n_samples = ng;
	dg_boot_data data = { .n_pol = 2 * S->nsrc, .n_clusters = nc, .sum = sum, .count = count,
			      .member = member, .n_member = nm, .group = group, .n_groups = ng };
	n_src = S->nsrc;
	dg_boot_stat(&data, attn_stat, nq, S->ns > 1 ? boot : 0, 1, w->est, w->lo, w->hi);
	w->per = dg_malloc((size_t)S->ns * MAX_Q * sizeof *w->per);
	dg_boot_signs(&data, attn_stat, nq, gsample, MAX_Q, w->per, w->n_pos, w->n_fin);
	free(keep), free(off), free(member), free(group), free(gsample);
}

/* rows: all layers, each layer, each (layer, head); returns their number */
static int build_rows(const dg_attn_sources *S, row *rows, int boot)
{
	const dg_trace_meta *m = &S->src[0].meta;
	const int nc = S->ns * S->lh, np = 2 * S->nsrc;
	double *sum = dg_calloc((size_t)2 * np * nc, sizeof *sum), *count = sum + (size_t)np * nc;
	for (int i = 0; i < S->nsrc; i++)
		for (int s = 0; s < S->ns; s++) {
			const dg_attn_source *it = &S->src[i * S->ns + s];
			for (int st = 0; st < m->steps; st++)
				for (int c = 0; c < S->lh; c++) {
					size_t u = (size_t)st * S->lh + c, k = (size_t)s * S->lh + c;
					sum[(size_t)2 * i * nc + k] += it->entropy[u];
					sum[(size_t)(2 * i + 1) * nc + k] += it->mass[u];
					count[(size_t)2 * i * nc + k] += 1;
					count[(size_t)(2 * i + 1) * nc + k] += 1;
				}
		}
	int n = 0;
	for (int l = -1; l < m->layers; l++)
		for (int h = -1; h < (l < 0 ? 0 : m->heads); h++) {
			rows[n] = (row){ .layer = l, .head = h };
			build_row(S, sum, count, &rows[n++], boot);
		}
	free(sum);
	return n;
}

/* "0.123 [0.100, 0.140]" (the interval only with several samples) */
static const char *cell(char *buf, const dg_attn_sources *S, const row *w, int q)
{
	char a[32], b[32], c[32];
	if (S->ns > 1)
		snprintf(buf, 128, "%s [%s, %s]", dg_sig3(a, w->est[q]), dg_sig3(b, w->lo[q]), dg_sig3(c, w->hi[q]));
	else
		snprintf(buf, 128, "%s", dg_sig3(a, w->est[q]));
	return buf;
}

static void md_tables(FILE *f, const dg_attn_sources *S, const row *rows, int nrows)
{
	const dg_trace_meta *m = &S->src[0].meta;
	char b1[128], b2[128];
	for (int i = 0; i < S->nsrc; i++) {
		const dg_attn_source *it = &S->src[i * S->ns];
		fprintf(f, "## %s: %s%s (%s; %d tokens, steps %d..%d)\n\n| layer |", it->label, it->path,
			S->ns > 1 ? ", ..." : "", it->meta.model ? it->meta.model : "?", it->meta.tokens,
			it->meta.step_index[0], it->meta.step_index[it->meta.steps - 1]);
		for (int h = 0; h < m->heads; h++)
			fprintf(f, " H h%d | mass h%d |", m->head_index[h], m->head_index[h]);
		fprintf(f, " H | mass | units | clusters | samples |\n|---|");
		for (int h = 0; h <= m->heads; h++)
			fprintf(f, "---|---|");
		fputs("--:|--:|--:|\n", f);
		for (int r = 1; r < nrows; r++) {
			if (rows[r].head >= 0)
				continue;
			fprintf(f, "| %d |", m->layer_index[rows[r].layer]);
			for (int h = 1; h <= m->heads; h++)
				fprintf(f, " %s | %s |", cell(b1, S, &rows[r + h], 2 * i), cell(b2, S, &rows[r + h], 2 * i + 1));
			fprintf(f, " %s | %s | %d | %d | %d |\n", cell(b1, S, &rows[r], 2 * i),
				cell(b2, S, &rows[r], 2 * i + 1), rows[r].n_units, rows[r].n_clusters, rows[r].n_samples);
		}
		fprintf(f, "\nAll layers and heads: H %s, mass %s (%d units in %d clusters of %d sample%s).\n\n",
			cell(b1, S, &rows[0], 2 * i), cell(b2, S, &rows[0], 2 * i + 1), rows[0].n_units,
			rows[0].n_clusters, rows[0].n_samples, rows[0].n_samples > 1 ? "s" : "");
	}
	if (S->nsrc < 2)
		return;
	const int q0 = 2 * S->nsrc;
	fprintf(f, "## Is %s more peaked than the other sources?\n\nΔH = H(other) − H(%s) and Δmass = "
		   "mass(%s) − mass(other): positive when %s is more peaked%s; units per source.\n\n| row | "
		   "other | ΔH | ΔH > 0 in | Δmass | Δmass > 0 in | units | clusters | samples |\n"
		   "|---|---|---|---|---|---|--:|--:|--:|\n", S->src[0].label,
		S->src[0].label, S->src[0].label, S->src[0].label,
		S->ns > 1 ? "; \"> 0 in k of n\": the samples whose own estimate is positive" : "");
	for (int r = 0; r < nrows; r++) {
		if (rows[r].head >= 0)
			continue;
		for (int i = 1; i < S->nsrc; i++) {
			int q = q0 + 2 * (i - 1);
			char name[32];
			if (rows[r].layer < 0)
				snprintf(name, sizeof name, "all layers");
			else
				snprintf(name, sizeof name, "layer %d", m->layer_index[rows[r].layer]);
			fprintf(f, "| %s | %s | %s | %d of %d | %s | %d of %d | %d | %d | %d |\n", name,
				S->src[i * S->ns].label, cell(b1, S, &rows[r], q), rows[r].n_pos[q], rows[r].n_fin[q],
				cell(b2, S, &rows[r], q + 1), rows[r].n_pos[q + 1], rows[r].n_fin[q + 1],
				rows[r].n_units, rows[r].n_clusters, rows[r].n_samples);
		}
	}
	fputc('\n', f);
}

static int write_outputs(const char *dir, const dg_attn_sources *S, const row *rows, int nrows, double rho,
			 int boot, const char *cmdline)
{
	const dg_trace_meta *m0 = &S->src[0].meta;
	const int nitems = S->nsrc * S->ns, nq = n_quant(S->nsrc);
	dg_out o;
	if (dg_out_open_in(&o, dir, "attnstats.csv"))
		return -1;
	fprintf(o.f, "source,sample,trace,step,layer,head,tokens,entropy_norm,oracle_mass,density\n");
	for (int i = 0; i < nitems; i++) {
		const dg_trace_meta *m = &S->src[i].meta;
		for (int s = 0; s < m->steps; s++)
			for (int l = 0; l < m->layers; l++)
				for (int h = 0; h < m->heads; h++) {
					size_t u = ((size_t)s * m->layers + l) * m->heads + h;
					dg_csv_field(o.f, S->src[i].label);
					putc(',', o.f);
					dg_csv_field(o.f, S->src[i].sample);
					putc(',', o.f);
					dg_csv_field(o.f, S->src[i].path);
					fprintf(o.f, ",%d,%d,%d,%d,%.6f,%.6f,%g\n", m->step_index[s], m->layer_index[l],
						m->head_index[h], m->tokens, S->src[i].entropy[u], S->src[i].mass[u], rho);
				}
	}
	if (dg_out_commit(&o) || dg_out_open_in(&o, dir, "attnstats.md"))
		return -1;
	int K = dg_topk_count(rho, m0->tokens);
	char u[32];
	fprintf(o.f, "# Is the attention learned? Entropy and per-query oracle mass\n\n"
		     "`%s` (dsgap %s, commit %s). Per (layer, head), means over the stored steps and all "
		     "queries: **H** = row entropy of softmax(qk^T/sqrt d) / ln N (1 = uniform); **mass** = "
		     "probability mass kept by the per-query oracle at density %g (K = %d of N keys; a "
		     "uniform row keeps %s). Units, clusters and samples of a row: those of its pooled H and "
		     "mass (per source); a head's cells: its (layer, head) cluster in each sample. Numbers to 3 "
		     "significant figures.", cmdline, DG_VERSION, dg_git_commit(), rho, K,
		dg_sig3(u, (double)K / m0->tokens));
	if (S->ns > 1) {
		fprintf(o.f, " Pooled over %d samples (", S->ns);
		for (int s = 0; s < S->ns; s++)
			fprintf(o.f, "%s%s", s ? ", " : "", S->src[s].sample);
		fprintf(o.f, "), with 95%% intervals from a two-level bootstrap (%d replicates, seed 1: "
			     "the samples with replacement, then (layer, head) clusters within each; a "
			     "(layer, head) cell resamples the samples).", boot);
	} else {
		fputs(" One sample per source: no intervals.", o.f);
	}
	fputs("\n\n", o.f);
	md_tables(o.f, S, rows, nrows);
	if (dg_out_commit(&o))
		return -1;
	if (S->ns > 1) {
		if (dg_out_open_in(&o, dir, "attnstats-samples.csv"))
			return -1;
		fprintf(o.f, "sample,layer,quantity,estimate\n");
		for (int s = 0; s < S->ns; s++)
			for (int r = 0; r < nrows; r++) {
				if (rows[r].head >= 0)
					continue;
				for (int q = 0; q < nq; q++) {
					int i = q < 2 * S->nsrc ? q / 2 : (q - 2 * S->nsrc) / 2 + 1;
					dg_csv_field(o.f, S->src[s].sample);
					if (rows[r].layer < 0)
						fputs(",all,", o.f);
					else
						fprintf(o.f, ",%d,", m0->layer_index[rows[r].layer]);
					fprintf(o.f, "%s(%s)%s,%.6f\n", q < 2 * S->nsrc ? (q % 2 ? "mass" : "H") :
						(q % 2 ? "dmass" : "dH"), S->src[i * S->ns].label,
						q < 2 * S->nsrc ? "" : "-first", rows[r].per[(size_t)s * MAX_Q + q]);
				}
			}
		if (dg_out_commit(&o))
			return -1;
	}

	/* the figure attnstats-rhoX (X: the density of panel (b), in the name so that another density's
	 * figure never overwrites it, issue 19): x = layer (heads dodged, then sources), H and mass per
	 * source in two panels */
	char name[64], file[80];
	snprintf(name, sizeof name, "attnstats-rho%g", rho);
	snprintf(file, sizeof file, "%s.dat", name);
	if (dg_out_open_in(&o, dir, file))
		return -1;
	fprintf(o.f, "# %s.dat: per source (gnuplot index), layer and head: means over steps%s\n"
		     "# made by %s (commit %s)\n# columns: layer head entropy_norm lo hi oracle_mass lo hi\n",
		name, S->ns > 1 ? " and samples, two-level 95% intervals" : " (one sample: lo = hi)", cmdline,
		dg_git_commit());
	for (int i = 0; i < S->nsrc; i++) {
		fprintf(o.f, "# %s\n", S->src[i * S->ns].label);
		for (int r = 0; r < nrows; r++) {
			const row *w = &rows[r];
			if (w->head < 0)
				continue;
			double lo[2], hi[2];
			for (int j = 0; j < 2; j++) {
				bool ci = S->ns > 1 && !isnan(w->lo[2 * i + j]);
				lo[j] = ci ? w->lo[2 * i + j] : w->est[2 * i + j];
				hi[j] = ci ? w->hi[2 * i + j] : w->est[2 * i + j];
			}
			fprintf(o.f, "%d %d %.6f %.6f %.6f %.6f %.6f %.6f\n", m0->layer_index[w->layer],
				m0->head_index[w->head], w->est[2 * i], lo[0], hi[0], w->est[2 * i + 1], lo[1], hi[1]);
		}
		fprintf(o.f, "\n\n");
	}
	if (dg_out_commit(&o) || dg_out_open_in(&o, dir, "style.gp"))
		return -1;
	fputs(DG_STYLE_GP, o.f);
	snprintf(file, sizeof file, "%s.gp", name);
	if (dg_out_commit(&o) || dg_out_open_in(&o, dir, file))
		return -1;
	/* one key, right of the second panel (outside the data); x ticks at the captured layers */
	/* heads, then sources, side by side, centred on the layer */
	const int nd = m0->heads * S->nsrc;
	const double dx = 0.3 / nd, x0 = -dx * (nd - 1) / 2;
	fprintf(o.f, "# %s.gp: entropy and oracle mass per layer and head (gnuplot %s.gp)\n"
		     "load 'style.gp'\n"
		     "do for [fmt in \"pdf png\"] {\n"
		     "if (fmt eq \"pdf\") { set terminal pdfcairo size 6.5in,2.6in font 'Liberation Sans,8' }"
		     " else { set terminal pngcairo size 1950,780 font 'Liberation Sans,8' fontscale 2.5"
		     " linewidth 2 }\n"
		     "set output '%s.'.fmt\n"
		     "set multiplot layout 1,2 title \"%d sample%s%s\"\n"
		     "set xlabel 'layer (heads side by side)'\nset xrange [%g:%g]\nset xtics (",
		name, name, name, S->ns, S->ns > 1 ? "s" : "", S->ns > 1 ? ", means with two-level bootstrap 95% intervals" : "",
		m0->layer_index[0] - 0.5, m0->layer_index[m0->layers - 1] + 0.5);
	for (int l = 0; l < m0->layers; l++)
		fprintf(o.f, "%s%d", l ? ", " : "", m0->layer_index[l]);
	fprintf(o.f, ")\nunset key\nset title '(a) row entropy'\n"
		     "set ylabel 'row entropy / ln N'\nset yrange [0:1.05]\nplot");
	for (int i = 0; i < S->nsrc; i++)
		fprintf(o.f, "%s '%s.dat' index %d using ($1%+g+%g*(%d*$2+%d)):3:4:5 with yerrorbars ls %d notitle",
			i ? "," : "", name, i, x0, dx, S->nsrc, i, i + 1);
	fprintf(o.f, "\nset key outside right center vertical noenhanced\n"
		     "set title '(b) retained mass of the per-query oracle'\n"
		     "set ylabel 'oracle mass at density %g (computed K/N %.3g)'\nset yrange [0:1.05]\nplot",
		rho, (double)K / m0->tokens);
	for (int i = 0; i < S->nsrc; i++) {
		fprintf(o.f, "%s '%s.dat' index %d using ($1%+g+%g*(%d*$2+%d)):6:7:8 with yerrorbars ls %d title ",
			i ? "," : "", name, i, x0, dx, S->nsrc, i, i + 1);
		dg_gp_string(o.f, S->src[i * S->ns].label);
	}
	fprintf(o.f, ", %g with lines dt 2 lc rgb 'gray' title 'uniform rows'\n"
		     "unset multiplot\nset output\n}\n", (double)K / m0->tokens);
	if (dg_out_commit(&o))
		return -1;
	if (!dg_gnuplot_found()) { /* e.g. the GPU machine: render NAME.gp elsewhere */
		dg_warn("attnstats: no gnuplot: %s/%s.gp not rendered", dir, name);
		return 0;
	}
	return dg_gnuplot(dir, name);
}

/* every trace has the first one's steps, layers and heads */
static int same_layout(const dg_attn_sources *S)
{
	const dg_trace_meta *a = &S->src[0].meta;
	for (int i = 1; i < S->nsrc * S->ns; i++) {
		const dg_trace_meta *b = &S->src[i].meta;
		bool same = a->steps == b->steps && a->layers == b->layers && a->heads == b->heads;
		for (int l = 0; same && l < a->layers; l++)
			same = a->layer_index[l] == b->layer_index[l];
		if (!same)
			return dg_error("attnstats: %s: other steps, layers or heads than %s", S->src[i].path,
					S->src[0].path);
	}
	return 0;
}

/* The work of every trace from its header (per unit, each row of softmax(q k^T): 2d flops a key for
 * the scores, about 16 for the softmax, entropy and top-k mass), bounded before any (util.h) */
static int bound_work(const dg_attn_source *src, int n, bool quiet)
{
	double flops = 0, units = 0;
	int tokens = 0;
	for (int i = 0; i < n; i++) {
		dg_trace t;
		if (dg_trace_open(&t, src[i].path))
			return -1;
		const dg_trace_meta *m = &t.meta;
		double u = (double)m->steps * m->layers * m->heads;
		units += u;
		flops += u * m->tokens * (double)m->tokens * (2.0 * m->head_dim + 16);
		tokens = m->tokens > tokens ? m->tokens : tokens;
		dg_trace_close(&t);
	}
	double secs = dg_cpu_seconds(flops);
	char what[160];
	snprintf(what, sizeof what, "%.0f units of up to %d tokens, %.2g flop", units, tokens, flops);
	return dg_work_bound("attnstats", what, secs, !quiet && secs > 300,
			     "traces of fewer tokens, steps or heads (dsgap capture --latent, --steps)");
}

int dg_attnstats(dg_attn_sources *S, const char *out, double rho, int boot, bool quiet, const char *cmdline)
{
	if (bound_work(S->src, S->nsrc * S->ns, quiet))
		return -1;
	for (int i = 0; i < S->nsrc * S->ns; i++)
		if (measure(&S->src[i], rho, quiet))
			return -1;
	if (same_layout(S))
		return -1;
	S->lh = S->src[0].meta.layers * S->src[0].meta.heads;
	row *rows = dg_malloc((size_t)(1 + S->src[0].meta.layers * (1 + S->src[0].meta.heads)) * sizeof *rows);
	int nrows = build_rows(S, rows, boot), rc;
	dg_stage st; /* made whole in a staging folder, then published */
	if (!(rc = dg_stage_open(&st, out, "attnstats")))
		rc = dg_stage_close(&st, write_outputs(st.path, S, rows, nrows, rho, boot, cmdline));
	for (int r = 0; r < nrows; r++)
		free(rows[r].per);
	free(rows);
	return rc ? -1 : 0;
}

void dg_attn_sources_free(dg_attn_sources *S)
{
	for (int i = 0; S->src && i < S->nsrc * S->ns; i++) {
		free(S->src[i].entropy), free(S->src[i].mass), free(S->src[i].sample);
		dg_trace_meta_free(&S->src[i].meta);
	}
	free(S->src);
	S->src = NULL;
}

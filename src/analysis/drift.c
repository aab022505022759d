/*
 * drift.c: the closed loop's staleness, drift and sensitivity tables and figures (drift.h).
 */
#include "analysis/drift.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "analysis/bootstrap.h"
#include "analysis/decompose.h"
#include "analysis/plot.h"
#include "analysis/style_gp.h"
#include "policy/policy.h"
#include "util/files.h"
#include "util/json.h"
#include "util/util.h"

#define KEY_MAX 160
/* drift.md marks a row whose interval rests on fewer samples than this (issue 50 item 7) */
#define FEW_SAMPLES 5
#define FEW(n) ((n) < FEW_SAMPLES ? " ‡" : "")

typedef struct {
	char sample[KEY_MAX], policy[DG_POLICY_NAME_MAX];
	double rho, psnr, rel; /* closed_loop.csv: the final latents */
	int step;              /* drift.csv: the step (rel: its rel_l2); -1 for a final row */
} row;

typedef struct {
	char name[256], label[64], spec[512];
	row *fin, *st;
	int nfin, nst;
} run_t;

/* a (policy, density) of a run's rows and its samples */
typedef struct {
	char policy[DG_POLICY_NAME_MAX];
	double rho;
} pd;

static int g_nq; /* the identity statistic's length (dg_boot_stat_fn has no context) */
static void ident(const double *E, double *q) { memcpy(q, E, (size_t)g_nq * sizeof *q); }
static void diff01(const double *E, double *q) { q[0] = E[0] - E[1]; }

/* means over ns samples of v (npol, ns) (non-finite: missing) by fn, with 95% intervals over the
 * samples (each sample a cluster) */
static void boot(const double *v, int npol, int ns, dg_boot_stat_fn fn, int nq, const dg_drift_opts *o, double *est,
		 double *lo, double *hi)
{
	double *sum = dg_calloc((size_t)npol * ns, sizeof *sum), *cnt = dg_calloc((size_t)npol * ns, sizeof *cnt);
	int *member = dg_malloc((size_t)ns * sizeof *member);
	for (int p = 0; p < npol; p++)
		for (int c = 0; c < ns; c++)
			if (isfinite(v[(size_t)p * ns + c]))
				sum[(size_t)p * ns + c] = v[(size_t)p * ns + c], cnt[(size_t)p * ns + c] = 1;
	for (int c = 0; c < ns; c++)
		member[c] = c;
	dg_boot_data d = { npol, ns, sum, cnt, member, ns, NULL, 0 };
	g_nq = nq;
	dg_boot_stat(&d, fn, nq, o->boot, o->seed, est, lo, hi);
	free(sum), free(cnt), free(member);
}

/* ---- reading --------------------------------------------------------------------------------- */

static int col_of(char **f, int nf, const char *name)
{
	for (int i = 0; i < nf; i++)
		if (!strcmp(f[i], name))
			return i;
	return -1;
}

/* the rows of a CSV with the named columns (prompt, seed, policy, density_target, then the value
 * columns vals[0..nv)) appended to *rows; missing file: 0 rows when optional. 0 or -1. */
static int read_rows(const char *path, bool optional, const char *const *vals, int nv, row **rows, int *n)
{
	size_t len;
	char *text = dg_read_all(path, 1u << 30, &len);
	if (!text) {
		if (optional && errno == ENOENT)
			return 0;
		return dg_error("drift: cannot read %s: %s", path, dg_strerror(errno));
	}
	static const char *const keys[4] = { "prompt", "seed", "policy", "density_target" };
	int col[8], cap = 0, lineno = 0, rc = 0, maxc = 0;
	char *line = text, *next;
	for (; line && *line && !rc; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		char *f[32];
		int nf = dg_split(line, ',', f, 32);
		if (++lineno == 1) {
			for (int c = 0; c < 4 + nv; c++) {
				const char *want = c < 4 ? keys[c] : vals[c - 4];
				if ((col[c] = col_of(f, nf, want)) < 0)
					rc = dg_error("drift: %s: no column %s", path, want);
				maxc = col[c] > maxc ? col[c] : maxc;
			}
			continue;
		}
		if (nf <= maxc) {
			rc = dg_error("drift: %s:%d: %d fields, expected at least %d", path, lineno, nf, maxc + 1);
			break;
		}
		if (*n == cap)
			*rows = dg_realloc(*rows, (size_t)(cap = cap ? 2 * cap : 256) * sizeof **rows);
		row *r = &(*rows)[(*n)++];
		memset(r, 0, sizeof *r);
		snprintf(r->sample, sizeof r->sample, "%s s%s", f[col[0]], f[col[1]]);
		snprintf(r->policy, sizeof r->policy, "%s", f[col[2]]);
		char *end;
		r->rho = strtod(f[col[3]], &end);
		bool bad = *end != 0;
		r->step = -1;
		double x[2] = { NAN, NAN };
		for (int v = 0; v < nv; v++) {
			x[v] = strtod(f[col[4 + v]], &end); /* "inf" and "nan" read as such */
			bad |= *end != 0;
		}
		if (nv == 2 && !strcmp(vals[0], "step")) {
			r->step = (int)x[0];
			r->rel = x[1];
			bad |= x[0] != r->step || r->step < 0 || r->step > 1000000;
		} else {
			r->psnr = x[0], r->rel = x[1];
		}
		if (bad)
			rc = dg_error("drift: %s:%d: a number expected in every value column", path, lineno);
	}
	free(text);
	return rc;
}

static int read_run(const char *dir, run_t *r)
{
	memset(r, 0, sizeof *r);
	const char *base = strrchr(dir, '/');
	snprintf(r->name, sizeof r->name, "%s", base && base[1] ? base + 1 : dir);
	char *jp = dg_path_join(dir, "run.json");
	size_t n;
	char *text = dg_read_all(jp, 1u << 24, &n);
	const char *why = "";
	int line = 0, rc = 0;
	cJSON *j = text ? dg_json_parse(text, n, &why, &line) : NULL;
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "schedule");
	const cJSON *label = cJSON_GetObjectItemCaseSensitive(s, "label"), *spec = cJSON_GetObjectItemCaseSensitive(s, "spec");
	if (!text)
		rc = dg_error("drift: cannot read %s: %s", jp, dg_strerror(errno));
	else if (!j)
		rc = dg_error("drift: %s:%d: %s", jp, line, why);
	else if (!cJSON_IsString(label) || !cJSON_IsString(spec))
		rc = dg_error("drift: %s: not a closed-loop run.json of dsgap run (no schedule label and spec)", jp);
	if (!rc) {
		snprintf(r->label, sizeof r->label, "%s", label->valuestring);
		snprintf(r->spec, sizeof r->spec, "%s", spec->valuestring);
	}
	cJSON_Delete(j);
	free(text), free(jp);
	static const char *const fin[2] = { "psnr", "rel_l2" }, *const st[2] = { "step", "rel_l2" };
	char *cp = dg_path_join(dir, "closed_loop.csv"), *dp = dg_path_join(dir, "drift.csv");
	if (!rc)
		rc = read_rows(cp, false, fin, 2, &r->fin, &r->nfin) || read_rows(dp, true, st, 2, &r->st, &r->nst) ? -1 : 0;
	free(cp), free(dp);
	return rc;
}

/* the distinct (policy, density) of rows (first appearance order) */
static int distinct_pd(const row *rows, int n, pd **out)
{
	int k = 0;
	*out = dg_malloc((size_t)(n ? n : 1) * sizeof **out);
	for (int i = 0; i < n; i++) {
		int j = 0;
		while (j < k && (strcmp((*out)[j].policy, rows[i].policy) || (*out)[j].rho != rows[i].rho))
			j++;
		if (j == k) {
			snprintf((*out)[k].policy, sizeof (*out)[k].policy, "%s", rows[i].policy);
			(*out)[k++].rho = rows[i].rho;
		}
	}
	return k;
}

/* the index of sample key s in keys (added if new) */
static int sample_ix(char (*keys)[KEY_MAX], int *n, const char *s)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(keys[i], s))
			return i;
	snprintf(keys[*n], KEY_MAX, "%s", s);
	return (*n)++;
}

static void gp_head(FILE *f, const char *name, const char *size_pdf, const char *size_png)
{
	fprintf(f, "# %s.gp: re-render inside this directory: gnuplot %s.gp\nload 'style.gp'\n"
		   "do for [fmt in \"pdf png\"] {\n"
		   "if (fmt eq \"pdf\") { set terminal pdfcairo size %s font 'Liberation Sans,8' }"
		   " else { set terminal pngcairo size %s font 'Liberation Sans,8' fontscale 2.5 linewidth 2 }\n"
		   "set output '%s.'.fmt\n", name, name, size_pdf, size_png, name);
}

/* ---- the tables -------------------------------------------------------------------------------- */

typedef struct {
	dg_sbuf csv, md;
	int rows;
} table;

/* drift: per run, (policy, density) and step; its figure per run with rows. 0 or -1. */
static int drift_table(const run_t *r, const dg_drift_opts *o, const char *fig, table *t, char *names, int *nfig)
{
	pd *p;
	int np = distinct_pd(r->st, r->nst, &p), rc = 0;
	if (!np) {
		free(p);
		return 0;
	}
	char name[300];
	snprintf(name, sizeof name, "drift-%s", r->name);
	dg_out dat, gp;
	char file[320];
	snprintf(file, sizeof file, "%s.dat", name);
	if ((rc = dg_out_open_in(&dat, fig, file))) {
		free(p);
		return -1;
	}
	fprintf(dat.f, "# %s.dat: mean rel_l2 of the latents against the dense run's after each step, with its 95%% "
		       "interval over the samples, one block per policy x density (gnuplot index), made by dsgap drift "
		       "(commit %s)\n# columns: step rel_l2 lo hi (the warm-up's exact zeros left out)\n", name,
		dg_git_commit());
	int maxs = 0, nsteps = 0;
	for (int k = 0; k < np; k++) {
		char (*keys)[KEY_MAX] = dg_malloc((size_t)r->nst * KEY_MAX);
		int ns = 0, steps = 0;
		for (int i = 0; i < r->nst; i++)
			if (!strcmp(r->st[i].policy, p[k].policy) && r->st[i].rho == p[k].rho) {
				sample_ix(keys, &ns, r->st[i].sample);
				steps = r->st[i].step + 1 > steps ? r->st[i].step + 1 : steps;
			}
		maxs = ns > maxs ? ns : maxs;
		nsteps = steps > nsteps ? steps : nsteps;
		double *v = dg_malloc((size_t)steps * ns * sizeof *v), *est = dg_malloc((size_t)steps * 3 * sizeof *est);
		for (size_t e = 0; e < (size_t)steps * ns; e++)
			v[e] = NAN;
		for (int i = 0; i < r->nst; i++)
			if (!strcmp(r->st[i].policy, p[k].policy) && r->st[i].rho == p[k].rho)
				v[(size_t)r->st[i].step * ns + sample_ix(keys, &ns, r->st[i].sample)] = r->st[i].rel;
		boot(v, steps, ns, ident, steps, o, est, est + steps, est + 2 * steps);
		fprintf(dat.f, "# policy %s density_target %g\n", p[k].policy, p[k].rho);
		for (int s = 0; s < steps; s++) {
			int have = 0;
			for (int c = 0; c < ns; c++)
				have += isfinite(v[(size_t)s * ns + c]);
			dg_sb_printf(&t->csv, "%s,%s,%s,%g,%d,%d,%.6g,%.6g,%.6g\n", r->name, r->label, p[k].policy,
				     p[k].rho, s, have, est[s], est[steps + s], est[2 * steps + s]);
			t->rows++;
			if (est[s] > 0)
				fprintf(dat.f, "%d %.8g %.8g %.8g\n", s, est[s], est[steps + s], est[2 * steps + s]);
			if (s == steps - 1 || (s + 1) % 10 == 0) { /* drift.md: every 10th step and the last */
				char a[32], b[32], c[32];
				dg_sb_printf(&t->md, "| %s | %s | %g | %d | %d%s | %s | [%s, %s] |\n", r->name, p[k].policy,
					     p[k].rho, s, have, FEW(have), dg_sig3(a, est[s]), dg_sig3(b, est[steps + s]),
					     dg_sig3(c, est[2 * steps + s]));
			}
		}
		fputs("\n\n", dat.f);
		free(v), free(est), free(keys);
	}
	rc = dg_out_commit(&dat);
	snprintf(file, sizeof file, "%s.gp", name);
	if (!rc && !(rc = dg_out_open_in(&gp, fig, file))) {
		gp_head(gp.f, name, "4.6in,3.4in", "1380,1020");
		char t1[400], t2[800];
		snprintf(t1, sizeof t1, "where the loop drifts: run %s, %d sample%s", r->name, maxs, maxs == 1 ? "" : "s");
		snprintf(t2, sizeof t2, "schedule %s; %s", r->spec,
			 o->boot ? "95% bootstrap bands over the samples" : "no bands");
		fprintf(gp.f, "set title ");
		dg_gp_string(gp.f, t1);
		fputs(".\"\\n\".", gp.f);
		dg_gp_string(gp.f, t2);
		fprintf(gp.f, " noenhanced\nset xlabel 'denoising step'\nset ylabel 'rel-L2 of the latents vs dense (mean)'\n"
			      "set logscale y\nset format y '10^{%%L}'\nset xtics %d\nset xrange [0:%d]\nset key below noenhanced\nplot",
			nsteps <= 20 ? 1 : nsteps <= 100 ? 5 : 50, nsteps > 1 ? nsteps - 1 : 1);
		for (int k = 0; k < np; k++) {
			char lab[DG_POLICY_NAME_MAX + 40];
			snprintf(lab, sizeof lab, "%s @ %g", p[k].policy, p[k].rho);
			if (o->boot)
				fprintf(gp.f, "%s '%s.dat' index %d using 1:3:4 with filledcurves fs transparent solid 0.2 "
					      "noborder ls %d notitle, \\\n ", k ? ", \\\n " : "", name, k, k % 15 + 1);
			else if (k)
				fputs(", \\\n ", gp.f);
			fprintf(gp.f, "'%s.dat' index %d using 1:2 with linespoints ls %d ps 0.4 title ", name, k, k % 15 + 1);
			dg_gp_string(gp.f, lab);
		}
		fputs("\nunset output\n}\n", gp.f);
		rc = dg_out_commit(&gp);
	}
	if (!rc) {
		strcat(names, name);
		strcat(names, "\n");
		(*nfig)++;
	}
	free(p);
	return rc;
}

/* the spec with its fresh= switch removed into base; whether it had one (and its value) */
static bool fresh_base(const char *policy, char *base, size_t size, char *what, size_t wsize)
{
	const char *f = strstr(policy, "/fresh=");
	if (!f)
		return false;
	const char *end = strchr(f + 1, '/');
	snprintf(base, size, "%.*s%s", (int)(f - policy), policy, end ? end : "");
	snprintf(what, wsize, "%.*s", end ? (int)(end - f - 7) : (int)strlen(f + 7), f + 7);
	return true;
}

/* staleness: E(BASE) - E(BASE/fresh=X) and the PSNR gained, paired over the samples */
static void staleness_table(const run_t *r, const dg_drift_opts *o, table *t)
{
	pd *p;
	int np = distinct_pd(r->fin, r->nfin, &p);
	for (int k = 0; k < np; k++) {
		char base[DG_POLICY_NAME_MAX], what[64];
		if (!fresh_base(p[k].policy, base, sizeof base, what, sizeof what))
			continue;
		char (*keys)[KEY_MAX] = dg_malloc((size_t)r->nfin * KEY_MAX);
		int ns = 0;
		for (int i = 0; i < r->nfin; i++)
			if (r->fin[i].rho == p[k].rho && !strcmp(r->fin[i].policy, p[k].policy))
				sample_ix(keys, &ns, r->fin[i].sample);
		/* (2 quantities, 2 policies, ns): rel_l2 and PSNR of BASE and of BASE/fresh=X */
		double *v = dg_malloc((size_t)4 * (ns ? ns : 1) * sizeof *v);
		for (int e = 0; e < 4 * ns; e++)
			v[e] = NAN;
		int nbase = 0;
		for (int i = 0; i < r->nfin; i++) {
			const row *x = &r->fin[i];
			int which = !strcmp(x->policy, base) ? 0 : !strcmp(x->policy, p[k].policy) ? 1 : -1;
			if (which < 0 || x->rho != p[k].rho)
				continue;
			int c = -1;
			for (int s = 0; s < ns && c < 0; s++)
				c = strcmp(keys[s], x->sample) ? -1 : s;
			if (c < 0)
				continue;
			nbase += !which;
			v[(size_t)which * ns + c] = x->rel, v[(size_t)(2 + which) * ns + c] = x->psnr;
		}
		int n = 0, pos = 0;
		for (int c = 0; c < ns; c++) { /* paired: a sample lacking either is left out */
			bool both = isfinite(v[c]) && isfinite(v[ns + c]);
			for (int q = 0; q < 4; q++)
				if (!both)
					v[(size_t)q * ns + c] = NAN;
			n += both, pos += both && v[c] - v[ns + c] > 0;
		}
		if (nbase && n) {
			double e[2], elo[2], ehi[2], d, dlo, dhi, g, glo, ghi;
			boot(v, 2, ns, ident, 2, o, e, elo, ehi);
			boot(v, 2, ns, diff01, 1, o, &d, &dlo, &dhi);
			double *pv = dg_malloc((size_t)2 * ns * sizeof *pv); /* PSNR gained: fresh - base */
			memcpy(pv, v + 3 * (size_t)ns, (size_t)ns * sizeof *pv);
			memcpy(pv + ns, v + 2 * (size_t)ns, (size_t)ns * sizeof *pv);
			boot(pv, 2, ns, diff01, 1, o, &g, &glo, &ghi);
			free(pv);
			dg_sb_printf(&t->csv, "%s,%s,%s,%s,%g,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%.6g,%.6g,%.6g\n", r->name,
				     r->label, base, what, p[k].rho, n, e[0], e[1], d, dlo, dhi, pos, g, glo, ghi);
			char s[9][32];
			dg_sb_printf(&t->md, "| %s | staleness: %s | %s | %g | %d%s | %s | %s | %s [%s, %s] | %d of %d | %s [%s, %s] |\n",
				     r->name, what, base, p[k].rho, n, FEW(n), dg_sig3(s[0], e[0]), dg_sig3(s[1], e[1]),
				     dg_sig3(s[2], d), dg_sig3(s[3], dlo), dg_sig3(s[4], dhi), pos, n, dg_sig3(s[5], g),
				     dg_sig3(s[6], glo), dg_sig3(s[7], ghi));
			t->rows++;
		}
		free(v), free(keys);
	}
	free(p);
}

/* a run's column of the sensitivity map: "steps a-b", "layers l;m", both, or "all"; false when its
 * schedule does not parse */
static bool sens_label(const run_t *r, char *lab, size_t size, bool *windowed)
{
	dg_schedule s;
	if (dg_schedule_parse(r->spec, &s))
		return false;
	*windowed = s.sparse_window || s.nsparse_layers;
	int n = 0;
	*lab = 0;
	if (s.sparse_window)
		n += snprintf(lab + n, size - n, "steps %d-%d", s.sparse_lo, s.sparse_hi);
	if (s.nsparse_layers) {
		n += snprintf(lab + n, size - n, "%slayer%s ", n ? ", " : "", s.nsparse_layers > 1 ? "s" : "");
		for (int i = 0; i < s.nsparse_layers && n < (int)size; i++)
			n += snprintf(lab + n, size - n, "%s%d", i ? ";" : "", s.sparse_layers[i]);
	}
	if (!*windowed)
		snprintf(lab, size, "all");
	return true;
}

/* sensitivity: per window or layer (a run) x policy @ density, the final PSNR; its heat map */
static int sensitivity_table(const run_t *runs, int nruns, const dg_drift_opts *o, const char *fig, table *t, int *nfig)
{
	char (*lab)[64] = dg_malloc((size_t)nruns * 64);
	int *use = dg_malloc((size_t)nruns * sizeof *use), nuse = 0, any = 0, rc = 0;
	for (int i = 0; i < nruns; i++) {
		bool w;
		if (sens_label(&runs[i], lab[nuse], 64, &w)) {
			use[nuse++] = i;
			any |= w;
		}
	}
	if (!any) {
		free(lab), free(use);
		return 0;
	}
	/* the rows: every (policy, density) but dense, over the runs used */
	pd *rowsp = NULL;
	int nrow = 0;
	for (int u = 0; u < nuse; u++) {
		pd *p;
		int np = distinct_pd(runs[use[u]].fin, runs[use[u]].nfin, &p);
		for (int k = 0; k < np; k++) {
			int j = 0;
			while (j < nrow && (strcmp(rowsp[j].policy, p[k].policy) || rowsp[j].rho != p[k].rho))
				j++;
			if (j == nrow && strcmp(p[k].policy, "dense")) {
				rowsp = dg_realloc(rowsp, (size_t)(nrow + 1) * sizeof *rowsp);
				rowsp[nrow++] = p[k];
			}
		}
		free(p);
	}
	double *psnr = dg_malloc((size_t)(nrow ? nrow : 1) * nuse * sizeof *psnr);
	for (int k = 0; k < nrow; k++)
		for (int u = 0; u < nuse; u++) {
			const run_t *r = &runs[use[u]];
			char (*keys)[KEY_MAX] = dg_malloc((size_t)(r->nfin ? r->nfin : 1) * KEY_MAX);
			int ns = 0;
			for (int i = 0; i < r->nfin; i++)
				if (!strcmp(r->fin[i].policy, rowsp[k].policy) && r->fin[i].rho == rowsp[k].rho)
					sample_ix(keys, &ns, r->fin[i].sample);
			double *v = dg_malloc((size_t)2 * (ns ? ns : 1) * sizeof *v);
			for (int e = 0; e < 2 * ns; e++)
				v[e] = NAN;
			for (int i = 0; i < r->nfin; i++)
				if (!strcmp(r->fin[i].policy, rowsp[k].policy) && r->fin[i].rho == rowsp[k].rho) {
					int c = sample_ix(keys, &ns, r->fin[i].sample);
					v[c] = r->fin[i].psnr, v[ns + c] = r->fin[i].rel;
				}
			psnr[(size_t)k * nuse + u] = NAN;
			if (ns) {
				double e[2], lo[2], hi[2];
				boot(v, 2, ns, ident, 2, o, e, lo, hi);
				psnr[(size_t)k * nuse + u] = e[0];
				dg_sb_printf(&t->csv, "%s,%s,%s,%s,%g,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", r->name, r->label,
					     lab[u], rowsp[k].policy, rowsp[k].rho, ns, e[0], lo[0], hi[0], e[1], lo[1], hi[1]);
				char s[6][32];
				dg_sb_printf(&t->md, "| %s | %s | %s | %g | %d%s | %s [%s, %s] | %s [%s, %s] |\n", r->name, lab[u],
					     rowsp[k].policy, rowsp[k].rho, ns, FEW(ns), dg_sig3(s[0], e[0]), dg_sig3(s[1], lo[0]),
					     dg_sig3(s[2], hi[0]), dg_sig3(s[3], e[1]), dg_sig3(s[4], lo[1]), dg_sig3(s[5], hi[1]));
				t->rows++;
			}
			free(v), free(keys);
		}
	dg_out dat, gp;
	if (nrow && !(rc = dg_out_open_in(&dat, fig, "sensitivity.dat"))) {
		fprintf(dat.f, "# sensitivity.dat: mean final PSNR (dB) against dense with sparse attention only in "
			       "the column's steps or layers, dense elsewhere; made by dsgap drift (commit %s)\n",
			dg_git_commit());
		fputs("x", dat.f);
		for (int u = 0; u < nuse; u++)
			fprintf(dat.f, " \"%s\"", lab[u]);
		fputc('\n', dat.f);
		for (int k = 0; k < nrow; k++) {
			fprintf(dat.f, "\"%s @ %g\"", rowsp[k].policy, rowsp[k].rho);
			for (int u = 0; u < nuse; u++)
				fprintf(dat.f, " %.6g", psnr[(size_t)k * nuse + u]);
			fputc('\n', dat.f);
		}
		rc = dg_out_commit(&dat);
		if (!rc && !(rc = dg_out_open_in(&gp, fig, "sensitivity.gp"))) {
			gp_head(gp.f, "sensitivity", "4.6in,2.8in", "1380,840");
			fprintf(gp.f, "set title \"final PSNR (dB) against dense, mean over the samples:\\nsparse attention only in "
				      "the column's steps or layer, dense elsewhere\" noenhanced\nunset grid\nset datafile separator "
				      "whitespace\nset view map\nset palette defined (0 '#B2182B', 0.5 '#F7F7F7', 1 '#2166AC')\n"
				      "set cblabel 'PSNR (dB)'\nset xtics rotate by 30 right noenhanced\nset ytics noenhanced\n"
				      "set xrange [-0.5:%d.5]\nset yrange [-0.5:%d.5]\nplot 'sensitivity.dat' matrix rowheaders "
				      "columnheaders using 1:2:3 with image notitle, '' matrix rowheaders columnheaders using "
				      "1:2:(sprintf('%%.1f', $3)) with labels font ',7' notitle\nunset output\n}\n",
				nuse - 1, nrow - 1);
			rc = dg_out_commit(&gp);
		}
		if (!rc)
			(*nfig)++;
	}
	free(psnr), free(rowsp), free(lab), free(use);
	return rc;
}

/* ---- the command ------------------------------------------------------------------------------- */

static int write_text(const char *dir, const char *name, const char *head, const dg_sbuf *body)
{
	dg_out o;
	if (dg_out_open_in(&o, dir, name))
		return -1;
	fputs(head, o.f);
	if (body->buf)
		fputs(body->buf, o.f);
	return dg_out_commit(&o);
}

int dg_drift(char *const *dirs, int nruns, const char *out, const dg_drift_opts *o)
{
	run_t *runs = dg_calloc((size_t)nruns, sizeof *runs);
	int rc = 0, loaded = 0;
	for (; loaded < nruns && !rc; loaded++)
		rc = read_run(dirs[loaded], &runs[loaded]);
	table dt = { 0 }, st = { 0 }, se = { 0 };
	char *names = NULL;
	int nfig = 0;
	dg_stage stage;
	if (!rc)
		rc = dg_stage_open(&stage, out, "drift");
	if (!rc) {
		char *fig = dg_path_join(stage.path, "figures");
		names = dg_calloc((size_t)nruns * 320 + 1, 1);
		rc = dg_mkdir_p(fig);
		for (int i = 0; i < nruns && !rc; i++) {
			rc = drift_table(&runs[i], o, fig, &dt, names, &nfig);
			staleness_table(&runs[i], o, &st);
		}
		if (!rc)
			rc = sensitivity_table(runs, nruns, o, fig, &se, &nfig);
		if (!rc && !dt.rows && !st.rows && !se.rows)
			rc = dg_error("drift: no drift.csv rows, no BASE/fresh=X policy beside its BASE and no sparse_steps "
				      "or sparse_layers schedule in the %d run%s: nothing to tabulate", nruns, nruns > 1 ? "s" : "");
		if (!rc) {
			dg_out s;
			rc = dg_out_open_in(&s, fig, "style.gp");
			if (!rc) {
				fputs(DG_STYLE_GP, s.f);
				rc = dg_out_commit(&s);
			}
		}
		if (!rc)
			rc = write_text(stage.path, "drift.csv", "run,schedule,policy,density_target,step,samples,rel_l2,lo,hi\n",
					&dt.csv) ||
			     write_text(stage.path, "staleness.csv", "run,schedule,base,fresh,density_target,samples,"
					"rel_l2_base,rel_l2_fresh,staleness,lo,hi,n_pos,psnr_gain,psnr_lo,psnr_hi\n", &st.csv) ||
			     write_text(stage.path, "sensitivity.csv", "run,schedule,sparse,policy,density_target,samples,"
					"psnr,psnr_lo,psnr_hi,rel_l2,rel_l2_lo,rel_l2_hi\n", &se.csv) ? -1 : 0;
		if (!rc) {
			dg_sbuf md = { 0 };
			dg_sb_printf(&md, "# Closed-loop staleness, drift and sensitivity (dsgap drift)\n\nOver the "
				     "samples (prompt, seed) of %d run%s; 95%% percentile bootstrap intervals over the samples "
				     "(%d replicates, seed %lu; none: --boot 0); 3 significant figures (the CSVs: 6). ‡: fewer "
				     "than %d samples, an interval no wider than their spread (too few to rest on).\n\n",
				     nruns, nruns > 1 ? "s" : "", o->boot, o->seed, FEW_SAMPLES);
			dg_sb_printf(&md, "## Staleness, the fourth source\n\nBeside the paper's three (lost "
				     "contributions, grouping, selection): E = mean rel-L2 of the final latents against "
				     "dense; staleness of X = E(BASE) - E(BASE/fresh=X), X remade every step while the rest "
				     "stays at the anchor (policy.h fresh=), paired over the samples; > 0: the staleness of X "
				     "costs the loop that much. PSNR gain = PSNR(fresh) - PSNR(BASE).\n\n");
			if (st.rows)
				dg_sb_printf(&md, "| run | source | base | density | samples | E(base) | E(fresh) | "
					     "staleness [95%%] | > 0 in | PSNR gain dB [95%%] |\n|:--|:--|:--|--:|--:|--:|--:|--:|--:|--:|\n%s\n",
					     st.md.buf);
			else
				dg_sb_printf(&md, "(no BASE/fresh=X policy beside its BASE)\n\n");
			dg_sb_printf(&md, "## Where the loop drifts\n\nMean rel-L2 of the latents against the dense run's "
				     "after the same step (every 10th step and the last; drift.csv: every step; "
				     "figures/drift-RUN.png).\n\n");
			if (dt.rows)
				dg_sb_printf(&md, "| run | policy | density | step | samples | rel-L2 | 95%% |\n"
					     "|:--|:--|--:|--:|--:|--:|--:|\n%s\n", dt.md.buf);
			else
				dg_sb_printf(&md, "(no drift.csv rows)\n\n");
			dg_sb_printf(&md, "## Step x layer sensitivity\n\nFinal PSNR (dB) and rel-L2 against dense with "
				     "sparse attention only in the steps or layers named (sparse_steps, sparse_layers; "
				     "\"all\": the whole loop sparse); lower PSNR, a more sensitive window or layer "
				     "(figures/sensitivity.png).\n\n");
			if (se.rows)
				dg_sb_printf(&md, "| run | sparse in | policy | density | samples | PSNR [95%%] | rel-L2 [95%%] |\n"
					     "|:--|:--|:--|--:|--:|--:|--:|\n%s", se.md.buf);
			else
				dg_sb_printf(&md, "(no sparse_steps or sparse_layers schedule)\n");
			dg_sbuf empty = { 0 };
			rc = write_text(stage.path, "drift.md", md.buf, &empty);
			free(md.buf);
		}
		if (!rc && nfig) {
			if (dg_gnuplot_found()) {
				char *line = names, *next;
				for (; !rc && line && *line; line = next) {
					next = strchr(line, '\n');
					*next++ = 0;
					rc = dg_gnuplot(fig, line);
				}
				if (!rc && se.rows)
					rc = dg_gnuplot(fig, "sensitivity");
			} else {
				dg_warn("drift: no gnuplot: %s/*.gp not rendered", out);
			}
		}
		free(fig);
		rc = dg_stage_close(&stage, rc) ? -1 : 0;
	}
	if (!rc)
		printf("drift: %d run%s: %d drift rows, %d staleness rows, %d sensitivity rows; wrote %s/drift.md, "
		       "drift.csv, staleness.csv, sensitivity.csv, figures/\n", nruns, nruns > 1 ? "s" : "", dt.rows,
		       st.rows, se.rows, out);
	for (int i = 0; i < loaded; i++)
		free(runs[i].fin), free(runs[i].st);
	free(runs), free(names);
	free(dt.csv.buf), free(dt.md.buf), free(st.csv.buf), free(st.md.buf), free(se.csv.buf), free(se.md.buf);
	return rc;
}

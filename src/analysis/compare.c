/*
 * compare.c: the comparison table and Pareto figure of every method (compare.h).
 */
#include "analysis/compare.h"

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
#include "policy/presets.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/json.h"
#include "util/util.h"

/* one closed_loop.csv row */
typedef struct {
	char sample[160]; /* prompt/seed */
	char policy[DG_POLICY_NAME_MAX];
	double rho, density, psnr, ssim, rel_l2, time;
} row;

typedef struct {
	row *r;
	int n, cap;
	int steps, warmup; /* of the first run read */
	char device[192];
} rows;

/* one policy x density of the table */
typedef struct {
	char policy[DG_POLICY_NAME_MAX];
	double rho;
	int samples;
	double density, sparse_density;
	double est[3], lo[3], hi[3]; /* psnr, ssim, rel_l2 */
	double speedup, speed_density; /* NaN without a speed row */
	int speed_samples;
	int reached; /* 0: a peer that cannot reach rho */
	char source[80]; /* where the method comes from */
} entry;

enum { COLS = 9 };
static const char *const need[COLS] = { "prompt", "seed", "policy", "density_target", "density",
					"psnr", "ssim", "transformer_s", "rel_l2" };

/* the rows of RUN/closed_loop.csv into rs; the run's steps and warm-up checked against rs's. 0 or -1. */
static int read_run(const char *dir, rows *rs)
{
	char *jp = dg_path_join(dir, "run.json"), *cp = dg_path_join(dir, "closed_loop.csv");
	int rc = -1;
	size_t jn = 0;
	char *js = dg_read_all(jp, 1 << 24, &jn), *csv = NULL;
	const char *why = NULL;
	int jline = 0;
	cJSON *j = js ? dg_json_parse(js, jn, &why, &jline) : NULL;
	if (!js) {
		dg_error("compare: cannot read %s: %s", jp, dg_strerror(errno));
		goto done;
	}
	if (!j) {
		if (jline)
			dg_error("compare: %s:%d: %s", jp, jline, why);
		else
			dg_error("compare: %s: %s", jp, why);
		goto done;
	}
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
	const cJSON *sched = cJSON_GetObjectItemCaseSensitive(j, "schedule");
	const cJSON *steps = cJSON_GetObjectItemCaseSensitive(model, "steps");
	const cJSON *warm = cJSON_GetObjectItemCaseSensitive(sched, "warmup");
	const cJSON *dl = cJSON_GetObjectItemCaseSensitive(sched, "dense_layers");
	const cJSON *dev = cJSON_GetObjectItemCaseSensitive(j, "device");
	if (!cJSON_IsNumber(steps) || !cJSON_IsNumber(warm)) {
		dg_error("compare: %s: not a closed-loop run.json (no model.steps or schedule.warmup)", jp);
		goto done;
	}
	if (steps->valuedouble != (double)steps->valueint || steps->valueint < 1 || steps->valueint > 100000 ||
	    warm->valuedouble != (double)warm->valueint || warm->valueint < 0 || warm->valueint >= steps->valueint) {
		dg_error("compare: %s: model.steps %g and schedule.warmup %g: expected integers, 0 <= warmup < steps",
			 jp, steps->valuedouble, warm->valuedouble);
		goto done;
	}
	if (cJSON_GetArraySize(dl) > 0) {
		dg_error("compare: %s: a schedule with dense layers (the sparse calls' density is not "
			 "derived for it)", jp);
		goto done;
	}
	if (rs->steps && (rs->steps != steps->valueint || rs->warmup != warm->valueint)) {
		dg_error("compare: %s: %d steps with warm-up %d, but an earlier run had %d with %d", jp,
			 steps->valueint, warm->valueint, rs->steps, rs->warmup);
		goto done;
	}
	rs->steps = steps->valueint, rs->warmup = warm->valueint;
	if (!*rs->device && cJSON_IsString(dev))
		snprintf(rs->device, sizeof rs->device, "%s", dev->valuestring);
	if (!(csv = dg_read_all(cp, 1 << 28, NULL))) {
		dg_error("compare: cannot read %s: %s", cp, dg_strerror(errno));
		goto done;
	}
	int col[COLS];
	char *line = csv, *next;
	int lineno = 0;
	for (; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		lineno++;
		char *f[32];
		int nf = dg_split(line, ',', f, 32);
		if (lineno == 1) {
			for (int c = 0; c < COLS; c++) {
				col[c] = -1;
				for (int i = 0; i < nf; i++)
					if (!strcmp(f[i], need[c]))
						col[c] = i;
				if (col[c] < 0) {
					dg_error("compare: %s: no column %s (a closed_loop.csv of dsgap run%s)", cp,
						 need[c], c == COLS - 1 ? " made since rel_l2 was added" : "");
					goto done;
				}
			}
			continue;
		}
		int maxc = 0;
		for (int c = 0; c < COLS; c++)
			maxc = col[c] > maxc ? col[c] : maxc;
		if (nf <= maxc) {
			dg_error("compare: %s:%d: %d fields, expected at least %d", cp, lineno, nf, maxc + 1);
			goto done;
		}
		if (rs->n == rs->cap)
			rs->r = dg_realloc(rs->r, (size_t)(rs->cap = rs->cap ? 2 * rs->cap : 256) * sizeof *rs->r);
		row *r = &rs->r[rs->n];
		snprintf(r->sample, sizeof r->sample, "%s/%s", f[col[0]], f[col[1]]);
		snprintf(r->policy, sizeof r->policy, "%s", f[col[2]]);
		if (dg_control_at(f[col[2]]) >= 0) {
			dg_error("compare: %s:%d: policy name with a control character", cp, lineno);
			goto done;
		}
		double *v[] = { &r->rho, &r->density, &r->psnr, &r->ssim, &r->time, &r->rel_l2 };
		for (int k = 0; k < 6; k++) {
			char *e;
			*v[k] = strtod(f[col[k + 3]], &e);
			if (e == f[col[k + 3]] || *e) {
				dg_error("compare: %s:%d: %s '%s' is not a number", cp, lineno, need[k + 3],
					 f[col[k + 3]]);
				goto done;
			}
			/* rho (0, 1], density [0, 1], time finite and >= 0; PSNR not NaN (inf: equal to
			 * dense), SSIM and rel-L2 finite (closed_loop.sh compares per-sample differences of
			 * them too, which may be negative) */
			const double x = *v[k];
			const bool ok = k == 0 ? x > 0 && x <= 1 : k == 1 ? x >= 0 && x <= 1 + 1e-9 :
					k == 2 ? x >= -1e4 && (x <= 1e4 || x == INFINITY) : k == 3 ? fabs(x) <= 2 :
					k == 4 ? isfinite(x) && x >= 0 && x <= 1e12 : isfinite(x) && fabs(x) <= 1e18;
			if (!ok) {
				dg_error("compare: %s:%d: %s '%s' is out of range", cp, lineno, need[k + 3], f[col[k + 3]]);
				goto done;
			}
		}
		for (int i = 0; i < rs->n; i++) /* a sample counted twice would weigh twice */
			if (!strcmp(rs->r[i].sample, r->sample) && !strcmp(rs->r[i].policy, r->policy) &&
			    rs->r[i].rho == r->rho) {
				dg_error("compare: %s:%d: sample %s of %s at %g again", cp, lineno, r->sample, r->policy,
					 r->rho);
				goto done;
			}
		rs->n++;
	}
	if (lineno < 2) {
		dg_error("compare: %s: no rows", cp);
		goto done;
	}
	rc = 0;
done:
	cJSON_Delete(j);
	free(js), free(csv), free(jp), free(cp);
	return rc;
}

static int find_entry(entry *e, int n, const char *policy, double rho)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(e[i].policy, policy) && e[i].rho == rho)
			return i;
	return -1;
}

static int find_sample(char (*s)[160], int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s[i], name))
			return i;
	return -1;
}

static const char *source_name(const dg_preset *p)
{
	if (!p)
		return "custom";
	switch (p->family) {
	case DG_FAMILY_DENSE: return "reference";
	case DG_FAMILY_FACTORIAL: return "MC-Sparse";
	case DG_FAMILY_PEER: return p->method;
	case DG_FAMILY_LADDER:
		return !strcmp(p->name, "est-block") ? "block-sparse (FlexAttention-style)" : "oracle";
	default: return "custom";
	}
}

/* where a method comes from, for the table: a peer's paper (its name without the section) */
static void source_of(const char *policy, char *out, size_t size)
{
	const dg_preset *p = dg_preset_of_spec(policy);
	const char *s = source_name(p);
	const char *sec = strstr(s, " (§");
	snprintf(out, size, "%.*s", sec ? (int)(sec - s) : (int)strlen(s), s);
}

static bool is_peer(const char *policy)
{
	const dg_preset *p = dg_preset_of_spec(policy);
	return p && p->family == DG_FAMILY_PEER;
}

static int n_stat;
static void copy_stat(const double *E, double *q)
{
	memcpy(q, E, (size_t)n_stat * sizeof *q);
}

/* means over the samples of statistic k (0 psnr, 1 ssim, 2 rel_l2) of every entry, with intervals */
static void fidelity_stats(const rows *rs, entry *e, int ne, int k, int boot, unsigned long seed)
{
	char(*samples)[160] = dg_malloc((size_t)rs->n * sizeof *samples);
	int ns = 0;
	for (int i = 0; i < rs->n; i++)
		if (find_sample(samples, ns, rs->r[i].sample) < 0)
			snprintf(samples[ns++], 160, "%s", rs->r[i].sample);
	double *sum = dg_calloc((size_t)ne * ns, sizeof *sum), *cnt = dg_calloc((size_t)ne * ns, sizeof *cnt);
	int *member = dg_malloc((size_t)ns * sizeof *member);
	for (int c = 0; c < ns; c++)
		member[c] = c;
	for (int i = 0; i < rs->n; i++) {
		const row *r = &rs->r[i];
		int p = find_entry(e, ne, r->policy, r->rho), c = find_sample(samples, ns, r->sample);
		double v = k == 0 ? r->psnr : k == 1 ? r->ssim : r->rel_l2;
		sum[(size_t)p * ns + c] += v, cnt[(size_t)p * ns + c] += 1;
	}
	dg_boot_data d = { .n_pol = ne, .n_clusters = ns, .sum = sum, .count = cnt, .member = member,
			   .n_member = ns };
	double *est = dg_malloc((size_t)ne * 3 * sizeof *est);
	n_stat = ne;
	dg_boot_stat(&d, copy_stat, ne, boot, seed, est, est + ne, est + 2 * ne);
	for (int p = 0; p < ne; p++)
		e[p].est[k] = est[p], e[p].lo[k] = est[ne + p], e[p].hi[k] = est[2 * ne + p];
	free(est), free(member), free(sum), free(cnt), free(samples);
}

/* speedup of every entry from the speed runs: mean dense time / mean time (over their samples) */
static int speed_stats(const rows *sp, entry *e, int ne)
{
	double dense_t = 0;
	int dense_n = 0;
	for (int i = 0; i < sp->n; i++)
		if (!strcmp(sp->r[i].policy, "dense"))
			dense_t += sp->r[i].time, dense_n++;
	if (!dense_n)
		return dg_error("compare: the speed runs have no dense rows");
	for (int p = 0; p < ne; p++) {
		double t = 0, dn = 0;
		int n = 0;
		for (int i = 0; i < sp->n; i++)
			if (!strcmp(sp->r[i].policy, e[p].policy) && (sp->r[i].rho == e[p].rho ||
								     !strcmp(e[p].policy, "dense")))
				t += sp->r[i].time, dn += sp->r[i].density, n++;
		e[p].speed_samples = n;
		e[p].speedup = n ? (dense_t / dense_n) / (t / n) : NAN;
		e[p].speed_density = n ? dn / n : NAN;
	}
	return 0;
}

static void write_csv(FILE *f, const entry *e, int ne)
{
	fprintf(f, "policy,source,density_target,samples,density,sparse_density,reached,psnr,psnr_lo,psnr_hi,"
		   "ssim,ssim_lo,ssim_hi,rel_l2,rel_l2_lo,rel_l2_hi,speedup,speed_density,speed_samples\n");
	for (int p = 0; p < ne; p++) {
		const entry *x = &e[p];
		fprintf(f, "%s,", x->policy);
		dg_csv_field(f, x->source);
		fprintf(f, ",%g,%d,%.6g,%.6g,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d\n", x->rho,
			x->samples, x->density, x->sparse_density, x->reached, x->est[0], x->lo[0], x->hi[0],
			x->est[1], x->lo[1], x->hi[1], x->est[2], x->lo[2], x->hi[2], x->speedup, x->speed_density,
			x->speed_samples);
	}
}

static void write_md(FILE *f, const entry *e, int ne, const dg_compare_opts *o, const rows *fid,
		     const rows *sp, double tol)
{
	fprintf(f, "# Comparison: every method's fidelity and speed (%s)\n\n", o->title);
	fprintf(f, "Fidelity: closed loop over %s (device: %s); means over the samples of PSNR (dB), SSIM and "
		   "rel-L2 of the final latents against the dense run of the same sample, with 95%% percentile "
		   "bootstrap intervals over the samples (%d replicates, seed %lu, paired across methods). "
		   "Density: computed pairs / N² over every self-attention call (%d of %d steps are warm-up, "
		   "dense); sparse: over the calls past the warm-up. ",
		o->title, fid->device, o->boot, o->seed, fid->warmup, fid->steps);
	if (sp->n)
		fprintf(f, "Speedup: the denoising loop's transformer time, dense / method, of the speed run "
			   "(%d steps, warm-up %d; device: %s). ", sp->steps, sp->warmup, sp->device);
	else
		fprintf(f, "Speedup: the fidelity runs' own transformer times (dense / method). ");
	fprintf(f, "A peer whose sparse density is more than %.2g from the target cannot reach it: no fidelity "
		   "is given for it. Speedup — : no speed run at that density. Numbers to 3 significant "
		   "figures.\n\n", tol);
	fprintf(f, "| method | source | target ρ | samples | density | sparse density | PSNR | 95%% CI | SSIM | "
		   "95%% CI | rel-L2 | 95%% CI | speedup |\n");
	fprintf(f, "|:--|:--|--:|--:|--:|--:|--:|:-:|--:|:-:|--:|:-:|--:|\n");
	for (int p = 0; p < ne; p++) {
		const entry *x = &e[p];
		char a[32], b[32], c[32], d[32], g[32], h[32], k[32], l[32], m[32], s[32], t[32];
		fprintf(f, "| `%s` | %s | %g | %d | %s | %s | ", x->policy, x->source, x->rho, x->samples,
			dg_sig3(a, x->density), dg_sig3(b, x->sparse_density));
		if (!x->reached)
			fprintf(f, "cannot reach ρ | — | — | — | — | — | ");
		else if (!strcmp(x->policy, "dense"))
			fprintf(f, "inf (reference) | — | 1 | — | 0 | — | ");
		else
			fprintf(f, "%s | [%s, %s] | %s | [%s, %s] | %s | [%s, %s] | ", dg_sig3(c, x->est[0]),
				dg_sig3(d, x->lo[0]), dg_sig3(g, x->hi[0]), dg_sig3(h, x->est[1]), dg_sig3(k, x->lo[1]),
				dg_sig3(l, x->hi[1]), dg_sig3(m, x->est[2]), dg_sig3(s, x->lo[2]), dg_sig3(t, x->hi[2]));
		if (isnan(x->speedup))
			fputs("— |\n", f);
		else
			fprintf(f, "%s× |\n", dg_sig3(a, x->speedup));
	}
}

/* LaTeX: _ and % escaped */
static void tex_str(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '_' || *s == '%' || *s == '&' || *s == '#')
			fputc('\\', f);
		fputc(*s, f);
	}
}

/* A table* (the page of a two-column paper, issue 49): the PSNR's interval under it in small type,
 * so that the table fits 7 in without \resizebox. */
static void write_tex(FILE *f, const entry *e, int ne, const dg_compare_opts *o)
{
	fprintf(f, "%% comparison.tex: made by dsgap compare (commit %s). Needs \\usepackage{booktabs}.\n"
		   "\\begin{table*}[t]\n\\centering\n\\small\n\\caption{Every method at each target density: "
		   "fidelity of the final latents against dense (", dg_git_commit());
	tex_str(f, o->title);
	fprintf(f, "; means over the $n$ samples, under the PSNR its 95\\%% bootstrap interval; 3 significant "
		   "figures), computed density over the sparse calls past the warm-up, and the measured speedup "
		   "of the denoising loop.}\n"
		   "\\label{tab:comparison}\n\\begin{tabular}{llrrrrrr}\n\\toprule\nMethod & Source & $\\rho$ & $n$ & "
		   "Density & PSNR & SSIM & Speedup \\\\\n\\midrule\n");
	for (int p = 0; p < ne; p++) {
		const entry *x = &e[p];
		char a[32], b[32], c[32], d[32], g[32], h[32];
		fputs("\\texttt{", f);
		tex_str(f, x->policy);
		fputs("} & ", f);
		tex_str(f, x->source);
		fprintf(f, " & %g & %d & $%s$ & ", x->rho, x->samples, dg_sig3(a, x->sparse_density));
		if (!x->reached)
			fputs("\\multicolumn{2}{l}{cannot reach $\\rho$}", f);
		else if (!strcmp(x->policy, "dense"))
			fputs("$\\infty$ & $1$", f);
		else
			fprintf(f, "\\begin{tabular}[t]{@{}r@{}}$%s$\\\\{\\scriptsize$[%s, %s]$}\\end{tabular} & $%s$",
				dg_sig3(b, x->est[0]), dg_sig3(c, x->lo[0]), dg_sig3(d, x->hi[0]),
				dg_sig3(g, x->est[1]));
		if (isnan(x->speedup))
			fputs(" & --- \\\\\n", f);
		else
			fprintf(f, " & $%s$ \\\\\n", dg_sig3(h, x->speedup));
	}
	fputs("\\bottomrule\n\\end{tabular}\n\\end{table*}\n", f);
}

/* pareto.dat: one block per method (its points by density), then the frontier block; pareto.gp;
 * speed_device: the speed runs' device (the x axis names it), NULL for the fidelity runs' own times */
static void write_figure(FILE *dat, FILE *gp, const entry *e, int ne, const dg_compare_opts *o,
			 const char *speed_device, int *nmethods)
{
	fprintf(dat, "# pareto.dat: made by dsgap compare (commit %s): %s\n# columns: speedup psnr psnr_lo "
		     "psnr_hi sparse_density density_target; one block per method, then the frontier\n",
		dg_git_commit(), o->title);
	const char *methods[128];
	int nm = 0;
	for (int p = 0; p < ne; p++) {
		const entry *x = &e[p];
		if (!x->reached || !strcmp(x->policy, "dense") || isnan(x->speedup) || !isfinite(x->est[0]))
			continue;
		int m = 0;
		while (m < nm && strcmp(methods[m], x->policy))
			m++;
		if (m == nm && nm < 128)
			methods[nm++] = x->policy;
	}
	for (int m = 0; m < nm; m++) {
		fprintf(dat, "# method %s\n", methods[m]);
		for (int p = 0; p < ne; p++) {
			const entry *x = &e[p];
			if (strcmp(x->policy, methods[m]) || !x->reached || isnan(x->speedup) || !isfinite(x->est[0]))
				continue;
			fprintf(dat, "%.6g %.6g %.6g %.6g %.3f %g\n", x->speedup, x->est[0], x->lo[0], x->hi[0],
				x->sparse_density, x->rho);
		}
		fputs("\n\n", dat);
	}
	/* the frontier: a point is on it when no other point is at least as fast and at least as good */
	fputs("# frontier (non-dominated points by speedup and PSNR), by speedup\n", dat);
	int *on = dg_calloc((size_t)ne, sizeof *on), non = 0;
	for (int p = 0; p < ne; p++) {
		const entry *x = &e[p];
		bool ok = x->reached && strcmp(x->policy, "dense") && !isnan(x->speedup) && isfinite(x->est[0]);
		for (int q = 0; ok && q < ne; q++) {
			const entry *y = &e[q];
			if (q == p || !y->reached || !strcmp(y->policy, "dense") || isnan(y->speedup) || !isfinite(y->est[0]))
				continue;
			if (y->speedup >= x->speedup && y->est[0] >= x->est[0] &&
			    (y->speedup > x->speedup || y->est[0] > x->est[0]))
				ok = false;
		}
		if (ok)
			on[non++] = p;
	}
	for (int i = 1; i < non; i++) /* by speedup (insertion sort) */
		for (int j = i; j > 0 && e[on[j]].speedup < e[on[j - 1]].speedup; j--) {
			int t = on[j];
			on[j] = on[j - 1], on[j - 1] = t;
		}
	for (int i = 0; i < non; i++)
		fprintf(dat, "%.6g %.6g\n", e[on[i]].speedup, e[on[i]].est[0]);
	free(on);

	int rows = (nm + 3) / 4;
	fprintf(gp, "# pareto.gp: made by dsgap compare (commit %s): %s\n"
		    "# re-render inside this directory: gnuplot pareto.gp   (writes pareto.pdf and pareto.png)\n"
		    "load 'style.gp'\n"
		    "do for [fmt in \"pdf png\"] {\n"
		    "if (fmt eq \"pdf\") { set terminal pdfcairo size 6.5in,4.6in font 'Liberation Sans,8' } "
		    "else { set terminal pngcairo size 1950,1380 font 'Liberation Sans,8' fontscale 3 linewidth 2 }\n"
		    "set output 'pareto.'.fmt\n",
		dg_git_commit(), o->title);
	fputs("set title ", gp);
	dg_gp_string(gp, o->title);
	fputs(".': fidelity against measured speedup' noenhanced\nset xlabel 'measured speedup of the denoising loop "
	      "over dense ('.", gp);
	dg_gp_string(gp, speed_device ? speed_device : "the times of the fidelity runs themselves");
	fprintf(gp, ".')' noenhanced\n"
		    "set ylabel 'PSNR of the final latents against dense (dB), 95%% CI over samples' noenhanced\n"
		    "set bmargin %d\n"
		    "set key at screen 0.5, screen 0.01 center bottom horizontal maxrows %d Left reverse noenhanced "
		    "font ',7' samplen 2 width 1\n"
		    "set offsets graph 0, graph 0.12, graph 0.05, graph 0.05\n"
		    "set xrange [0:*]\n"
		    "set arrow from 1, graph 0 to 1, graph 1 nohead ls 9 dt 3\n"
		    "set label 'dense (1x)' at 1, graph 0.97 left offset 0.5, 0 font ',7' textcolor rgb '#666666'\n",
		rows * 3 / 2 + 6, rows);
	fputs("plot ", gp);
	for (int m = 0; m < nm; m++) {
		fprintf(gp, "%s'pareto.dat' index %d using 1:2:3:4 with yerrorbars ls %d ps 1.4 title ",
			m ? ", \\\n  " : "", m, m % 15 + 1);
		dg_gp_string(gp, methods[m]); /* a name from the input file: quoted, never code */
		fprintf(gp, ", \\\n  '' index %d using 1:2:(sprintf('%%.2f', $5)) with labels offset 0.6, 0.6 left "
			    "font ',6' textcolor rgb '#444444' notitle", m);
	}
	fprintf(gp, "%s'pareto.dat' index %d using 1:2 with lines ls 8 dt 2 lw 1 title 'frontier (labels: "
		    "computed density)'\nunset output\n}\n", nm ? ", \\\n  " : "", nm);
	*nmethods = nm;
}

static void write_json(FILE *f, const entry *e, int ne, const dg_compare_opts *o, const rows *fid,
		      const rows *sp)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "format", "dsgap-comparison");
	char now[32];
	dg_utc_now(now, sizeof now);
	cJSON_AddStringToObject(j, "date", now);
	cJSON_AddStringToObject(j, "git_commit", dg_git_commit());
	cJSON_AddStringToObject(j, "title", o->title);
	cJSON *a = cJSON_AddArrayToObject(j, "fidelity_runs");
	for (int i = 0; i < o->nfidelity; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(o->fidelity[i]));
	a = cJSON_AddArrayToObject(j, "speed_runs");
	for (int i = 0; i < o->nspeed; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(o->speed[i]));
	cJSON_AddStringToObject(j, "fidelity_device", fid->device);
	cJSON_AddStringToObject(j, "speed_device", sp->n ? sp->device : fid->device);
	cJSON_AddNumberToObject(j, "steps", fid->steps);
	cJSON_AddNumberToObject(j, "warmup", fid->warmup);
	cJSON_AddNumberToObject(j, "boot", o->boot);
	cJSON_AddNumberToObject(j, "seed", (double)o->seed);
	cJSON_AddNumberToObject(j, "tolerance", o->tol);
	a = cJSON_AddArrayToObject(j, "unreached_densities");
	for (int p = 0; p < ne; p++)
		if (!e[p].reached) {
			cJSON *u = cJSON_CreateObject();
			cJSON_AddStringToObject(u, "policy", e[p].policy);
			cJSON_AddNumberToObject(u, "density_target", e[p].rho);
			cJSON_AddNumberToObject(u, "sparse_density", e[p].sparse_density);
			cJSON_AddItemToArray(a, u);
		}
	char *s = cJSON_Print(j);
	fputs(s, f);
	fputc('\n', f);
	free(s);
	cJSON_Delete(j);
}

int dg_compare(const dg_compare_opts *o)
{
	rows fid = { 0 }, sp = { 0 };
	entry *e = NULL;
	int rc = -1, ne = 0;
	for (int i = 0; i < o->nfidelity; i++)
		if (read_run(o->fidelity[i], &fid))
			goto done;
	for (int i = 0; i < o->nspeed; i++)
		if (read_run(o->speed[i], &sp))
			goto done;
	if (fid.warmup >= fid.steps) {
		dg_error("compare: %s: warm-up %d of %d steps leaves no sparse call", o->fidelity[0], fid.warmup,
			 fid.steps);
		goto done;
	}
	e = dg_calloc((size_t)fid.n, sizeof *e);
	for (int i = 0; i < fid.n; i++) {
		const row *r = &fid.r[i];
		int p = find_entry(e, ne, r->policy, r->rho);
		if (p < 0) {
			p = ne++;
			snprintf(e[p].policy, sizeof e[p].policy, "%s", r->policy);
			e[p].rho = r->rho;
			source_of(r->policy, e[p].source, sizeof e[p].source);
		}
		e[p].samples++;
		e[p].density += r->density;
	}
	double wf = (double)fid.warmup / fid.steps; /* the warm-up's share of the calls, all dense */
	for (int p = 0; p < ne; p++) {
		e[p].density /= e[p].samples;
		e[p].sparse_density = (e[p].density - wf) / (1 - wf);
		e[p].reached = !is_peer(e[p].policy) || fabs(e[p].sparse_density - e[p].rho) <= o->tol + 1e-12;
		e[p].speedup = e[p].speed_density = NAN;
	}
	for (int k = 0; k < 3; k++)
		fidelity_stats(&fid, e, ne, k, o->boot, o->seed);
	if (speed_stats(sp.n ? &sp : &fid, e, ne))
		goto done;

	/* every file made whole in a staging folder (the figure rendered there), then published: a
	 * gnuplot failure publishes nothing */
	dg_stage st;
	if (dg_stage_open(&st, o->out, "compare"))
		goto done;
	char *figs = dg_path_join(st.path, "figures");
	const char *names[] = { "comparison.csv", "comparison.md", "comparison.tex", "run.json",
				"figures/pareto.dat", "figures/pareto.gp", "figures/style.gp" };
	enum { NF = sizeof names / sizeof *names };
	dg_out out[NF];
	int nopen = 0, bad = dg_mkdir_p(figs), nm = 0;
	while (nopen < NF && !bad) {
		char *path = dg_path_join(st.path, names[nopen]);
		bad = dg_out_open(&out[nopen], path);
		free(path);
		nopen += !bad;
	}
	if (!bad) {
		write_csv(out[0].f, e, ne);
		write_md(out[1].f, e, ne, o, &fid, &sp, o->tol);
		write_tex(out[2].f, e, ne, o);
		write_json(out[3].f, e, ne, o, &fid, &sp);
		write_figure(out[4].f, out[5].f, e, ne, o, sp.n ? sp.device : NULL, &nm);
		fputs(DG_STYLE_GP, out[6].f);
	}
	int i = 0;
	for (; i < nopen && !bad; i++)
		bad = dg_out_commit(&out[i]);
	for (; i < nopen; i++)
		dg_out_abort(&out[i]);
	if (!bad && nm == 0) /* gnuplot would fail on an empty x range */
		dg_warn("compare: no method has a speedup at a density it reached: figures/pareto.{pdf,png} not drawn");
	else if (!bad && !dg_gnuplot_found())
		dg_warn("compare: no gnuplot: figures/pareto.{pdf,png} not rendered (gnuplot pareto.gp there)");
	else if (!bad)
		bad = dg_gnuplot(figs, "pareto");
	free(figs);
	if (dg_stage_close(&st, bad))
		goto done;
	printf("compare: %d rows of methods x densities (%d methods in the figure) from %d samples' rows -> "
	       "%s/comparison.{csv,md,tex}, figures/pareto.png\n", ne, nm, fid.n, o->out);
	rc = 0;
done:
	free(e), free(fid.r), free(sp.r);
	return rc;
}

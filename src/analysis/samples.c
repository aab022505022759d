/*
 * samples.c: `dsgap decompose` over a sample set: many results directories -> one pair of tables
 * with two-level bootstrap intervals. See samples.h.
 */
#include "analysis/samples.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/decompose.h"
#include "analysis/results.h"
#include "util/files.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dsgap decompose [LABEL=]DIR [[LABEL=]DIR ...] --out OUT [--boot N] [--seed X]\n"
		"       dsgap decompose --samples LIST --out OUT [--boot N] [--seed X]\n"
		"  DIR          a results directory (metrics.csv, run.json) of one sample (class or\n"
		"               prompt with a seed); LABEL names it (default: the folder's name)\n"
		"  --samples F  a file of LABEL=DIR lines (DIR relative to F's folder; # comments)\n"
		"  --out OUT    where the tables go (created)\n"
		"  --boot N     bootstrap replicates per table cell (default 1000; 0: no intervals)\n"
		"  --seed X     seed of the bootstrap generator, mt19937 (default 1)\n"
		"Means pool every sample's post-warm-up units; 95%% intervals from a two-level\n"
		"bootstrap (samples with replacement, then (layer, head) clusters within each); per-sample\n"
		"estimates and how many samples have each quantity > 0. Writes OUT/decomposition.{csv,md,tex},\n"
		"OUT/ablation.{csv,md,tex} and OUT/{decomposition,ablation}-samples.csv.\n");
}

bool dg_decompose_is_samples(int argc, char **argv)
{
	int operands = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--out") || !strncmp(argv[i], "--out=", 6) ||
		    !strcmp(argv[i], "--samples") || !strncmp(argv[i], "--samples=", 10))
			return true;
		if (argv[i][0] == '-') {
			if ((!strcmp(argv[i], "--boot") || !strcmp(argv[i], "--seed")) && i + 1 < argc)
				i++;
			continue;
		}
		operands++;
	}
	return operands > 1;
}

void dg_sample_list_add(dg_sample_list *l, const char *spec, const char *base)
{
	const char *eq = strchr(spec, '=');
	const char *path = eq ? eq + 1 : spec;
	l->label = dg_realloc(l->label, (l->n + 1) * sizeof *l->label);
	l->dir = dg_realloc(l->dir, (l->n + 1) * sizeof *l->dir);
	l->dir[l->n] = base && path[0] != '/' ? dg_path_join(base, path) : dg_strdup(path);
	if (eq) {
		l->label[l->n] = dg_strdup(spec);
		l->label[l->n][eq - spec] = 0;
	} else {
		char *d = dg_strdup(path);
		size_t k = strlen(d);
		while (k > 1 && d[k - 1] == '/')
			d[--k] = 0;
		const char *slash = strrchr(d, '/');
		l->label[l->n] = dg_strdup(slash ? slash + 1 : d);
		free(d);
	}
	l->n++;
}

int dg_sample_list_read(dg_sample_list *l, const char *file)
{
	int fd = dg_open_input(file); /* a FIFO or device would block */
	FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
	if (!f) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		return dg_error("%s: cannot open the sample list: %s", file, dg_strerror(err));
	}
	char *base = dg_strdup(file), *slash = strrchr(base, '/');
	if (slash)
		*slash = 0;
	else
		strcpy(base, ".");
	char line[4096];
	int ln = 0, rc = 0;
	while (fgets(line, sizeof line, f)) {
		ln++;
		char *s = line, *e = line + strlen(line);
		while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
			*--e = 0;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s || *s == '#')
			continue;
		if (s[0] == '=' || (strchr(s, '=') && !strchr(s, '=')[1])) {
			rc = dg_error("%s:%d: expected LABEL=DIR or DIR", file, ln);
			break;
		}
		dg_sample_list_add(l, s, base);
	}
	fclose(f);
	free(base);
	if (!rc && !l->n)
		rc = dg_error("%s: no samples listed", file);
	return rc;
}

int dg_sample_list_unique(const dg_sample_list *l, const char *cmd)
{
	for (int i = 0; i < l->n; i++)
		if (dg_opt_text(cmd, "LABEL", l->label[i])) /* it goes into tables and figures */
			return -1;
	for (int i = 0; i < l->n; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(l->label[i], l->label[j]))
				return dg_error("%s: two samples labelled '%s' (%s, %s): give LABEL=DIR", cmd,
						l->label[i], l->dir[j], l->dir[i]);
			else if (dg_same_file(l->dir[i], l->dir[j]))
				return dg_error("%s: samples %s and %s are the same folder %s: list each sample once",
						cmd, l->label[j], l->label[i], l->dir[i]);
	return 0;
}

void dg_sample_list_free(dg_sample_list *l)
{
	for (int i = 0; i < l->n; i++) {
		free(l->label[i]);
		free(l->dir[i]);
	}
	free(l->label);
	free(l->dir);
}

/* the samples must agree on what the post-warm-up units are */
static int same_design(const dg_results *r, int n, const char *const *label)
{
	for (int s = 1; s < n; s++) {
		bool same = r[s].warmup == r[0].warmup && r[s].n_dense_layers == r[0].n_dense_layers;
		for (int i = 0; same && i < r[0].n_dense_layers; i++)
			same = r[s].dense_layer[i] == r[0].dense_layer[i];
		if (!same)
			return dg_error("decompose: sample %s (%s): another schedule than sample %s "
					"(warm-up %d vs %d, or other dense layers)", label[s], r[s].dir,
					label[0], r[s].warmup, r[0].warmup);
		if (strcmp(r[s].model ? r[s].model : "", r[0].model ? r[0].model : ""))
			dg_warn("decompose: sample %s: model '%s', sample %s: '%s'", label[s],
				r[s].model, label[0], r[0].model);
	}
	return 0;
}

int dg_decompose_samples(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "samples", required_argument, NULL, 'l' },
		{ "boot", required_argument, NULL, 'b' },
		{ "seed", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL, *listing = NULL;
	long boot = 1000;
	unsigned long seed = 1;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'l': listing = optarg; break;
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
	if (!out || (optind == argc && !listing)) {
		dg_error("decompose: several samples need --out OUT and at least one DIR or --samples");
		usage(stderr);
		return 2;
	}
	dg_sample_list l = { 0 };
	if (listing && dg_sample_list_read(&l, listing)) {
		dg_sample_list_free(&l);
		return 1;
	}
	for (int i = optind; i < argc; i++)
		dg_sample_list_add(&l, argv[i], NULL);
	if (dg_sample_list_unique(&l, "decompose")) {
		dg_sample_list_free(&l);
		return 2;
	}
	dg_results *r = dg_calloc(l.n, sizeof *r);
	int loaded = 0, rc = 0;
	size_t units = 0;
	int clusters = 0;
	for (; loaded < l.n && !rc; loaded++) {
		rc = dg_results_load(&r[loaded], l.dir[loaded]);
		if (!rc) {
			units += r[loaded].n_units;
			clusters += r[loaded].n_clusters;
		}
	}
	if (rc)
		loaded--;
	if (!rc)
		rc = same_design(r, l.n, (const char *const *)l.label);
	for (int i = 0; i < l.n; i++) { /* no table may overwrite an input, no --out hold one */
		char *m = dg_path_join(l.dir[i], "metrics.csv"), *j = dg_path_join(l.dir[i], "run.json");
		dg_input_add(m);
		dg_input_add(j);
		free(m);
		free(j);
	}
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
		printf("decompose: %d samples, %zu units, %d (layer, head) clusters in all; "
		       "post-warm-up: step >= %d (%d dense layers out); two-level bootstrap, %ld "
		       "replicates, seed %lu\n", l.n, units, clusters, r[0].warmup,
		       r[0].n_dense_layers, boot, seed);
	int built = 0;
	for (int k = 0; k < DG_TABLE_COUNT && !rc; k++) {
		dg_table t;
		if (dg_table_build_samples(r, l.n, (const char *const *)l.label, k, -1, (int)boot,
					   seed, &t)) {
			dg_warn("decompose: no density has the policies of the %s table in the samples",
				dg_table_name(k));
			dg_table_free(&t);
			continue;
		}
		built++;
		printf("%s (%d rows): %s sum to %s within %.2g\n", dg_table_name(k), t.n_rows,
		       k == DG_TABLE_LADDER ? "sources" : "Shapley shares",
		       k == DG_TABLE_LADDER ? "E(est-block)" : "the total reduction",
		       dg_table_check(&t));
		for (int i = 0; i < t.n_rows; i++) {
			const dg_row *w = &t.row[i];
			if (w->layer != DG_ANY)
				continue;
			int q1 = k == DG_TABLE_LADDER ? DG_LAD_SELECTION : DG_ABL_PHI + 0;
			printf("  density %g (computed %.3g), %d samples:", r[0].density[w->density],
			       w->density_eff, w->n_samples);
			for (int q = q1; q < q1 + 3; q++)
				printf(" %s %.3g [%.3g, %.3g] (> 0 in %d of %d)%s", dg_quantity_key(k, q),
				       w->est[q], w->lo[q], w->hi[q], w->n_pos[q], w->n_fin[q],
				       q < q1 + 2 ? ";" : "\n");
		}
		rc = dg_table_write_dir(r, &t, out);
		dg_table_free(&t);
	}
	dg_out_defer(NULL);
	if (!rc && !built)
		rc = dg_error("decompose: nothing to decompose in the samples (needs est-block, "
			      "oracle-block and oracle, or the 8 factorial cells, after warm-up)");
	if (rc) {
		dg_publish_abort(&pub);
	} else {
		rc = dg_publish_commit(&pub);
		if (!rc)
			printf("wrote %s: decomposition and ablation tables (.csv .md .tex%s)\n", out,
			       l.n > 1 ? ", -samples.csv" : "");
	}
	if (locked)
		dg_dir_unlock(&lock);
	if (rc)
		dg_made_dirs_remove(&made);
	dg_made_dirs_free(&made);
	for (int i = 0; i < loaded; i++)
		dg_results_free(&r[i]);
	free(r);
	dg_sample_list_free(&l);
	return rc == 2 ? 2 : rc ? 1 : 0;
}

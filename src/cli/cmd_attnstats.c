/*
 * cmd_attnstats.c: dsgap attnstats, is a model's attention learned? The command line; the
 * statistics, tables and figure are analysis/attnstats.h's.
 *   dsgap attnstats --density 0.15 --out DIR bundled=T1.h5 random=T2.h5
 *   dsgap attnstats --density 0.15 --out DIR learned=L/a.h5,L/b.h5 random=R/a.h5,R/b.h5
 * A source is one trace or a sample set: a comma list of traces, one per sample, the sample named by
 * the trace's file name without .h5; every source lists the same samples in the same order (paired).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/attnstats.h"
#include "cli/commands.h"
#include "util/files.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap attnstats [--density RHO] [--boot N] --out DIR LABEL=TRACE.h5[,TRACE.h5...] ...\n\n"
		   "Per unit of each trace: the mean row entropy of the attention (/ ln N) and the mean\n"
		   "probability mass kept by the per-query oracle at density RHO (default 0.15). A source\n"
		   "with several traces is a sample set (one trace a sample, named by its file name; every\n"
		   "source the same samples, in order): means pooled over the samples with two-level\n"
		   "bootstrap intervals (--boot N replicates, default 1000), per-sample estimates, signs.\n"
		   "Writes DIR/attnstats.{csv,md}, DIR/attnstats-samples.csv (several samples) and the\n"
		   "figure DIR/attnstats-rhoRHO.{dat,gp,pdf,png}.\n");
}

/* the file name of path without its folder and .h5, a new string */
static char *sample_name(const char *path)
{
	const char *b = strrchr(path, '/');
	char *s = dg_strdup(b ? b + 1 : path);
	size_t n = strlen(s);
	if (n > 3 && !strcmp(s + n - 3, ".h5"))
		s[n - 3] = 0;
	return s;
}

/* LABEL=T1[,T2...] of every source into S (items allocated); 2 with a message on a bad one */
static int parse_sources(dg_attn_sources *S, int argc, char **argv, int first)
{
	S->nsrc = argc - first;
	for (int i = 0; i < S->nsrc; i++) {
		char *a = argv[first + i], *eq = strchr(a, '=');
		if (!eq || eq == a || !eq[1])
			return dg_error("attnstats: '%s' is not LABEL=TRACE.h5[,TRACE.h5...]", a), 2;
		*eq = 0;
		int n = 1;
		for (const char *c = eq + 1; *c; c++)
			n += *c == ',';
		if (!i) {
			S->ns = n;
			S->src = dg_calloc((size_t)S->nsrc * n, sizeof *S->src);
		} else if (n != S->ns) {
			return dg_error("attnstats: source %s has %d traces, source %s %d: every source needs "
					"the same samples", a, n, argv[first], S->ns), 2;
		}
		for (int j = 0; j < i; j++)
			if (!strcmp(a, S->src[j * S->ns].label))
				return dg_error("attnstats: two sources labelled %s: one label each", a), 2;
		char *save, *t = strtok_r(eq + 1, ",", &save);
		for (int s = 0; s < n; s++, t = strtok_r(NULL, ",", &save)) {
			if (!t)
				return dg_error("attnstats: source %s: an empty trace in its list", a), 2;
			dg_attn_source *it = &S->src[i * S->ns + s];
			it->label = a;
			it->path = t;
			it->sample = sample_name(t);
			for (int j = 0; j < s; j++)
				if (!strcmp(it->sample, S->src[i * S->ns + j].sample) ||
				    dg_same_file(t, S->src[i * S->ns + j].path))
					return dg_error("attnstats: source %s lists sample %s twice (traces %d and %d): one "
							"trace per sample", a, it->sample, j + 1, s + 1), 2;
			if (i && strcmp(it->sample, S->src[s].sample))
				return dg_error("attnstats: source %s's trace %d is sample %s, source %s's is %s: "
						"list the same samples in the same order", a, s + 1, it->sample,
						argv[first], S->src[s].sample), 2;
		}
	}
	return 0;
}

int dg_cmd_attnstats(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "density", required_argument, 0, 'd' }, { "out", required_argument, 0, 'o' },
		{ "boot", required_argument, 0, 'b' },	  { "quiet", no_argument, 0, 'q' },
		{ "help", no_argument, 0, 'h' },	  { 0, 0, 0, 0 },
	};
	double rho = 0.15;
	long boot = 1000;
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
		case 'b':
			if (dg_opt_long("attnstats", "boot", optarg, 0, 10000000, &boot))
				return 2;
			break;
		case 'o': out = optarg; break;
		case 'q': quiet = true; break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("attnstats", c, argv, opts);
		}
	}
	if (!out || argc - optind < 1 || argc - optind > DG_ATTN_MAX_SOURCES) {
		usage(stderr);
		return 2;
	}
	char *cmdline = dg_join_args(argc, argv);
	dg_attn_sources S = { 0 };
	int rc = parse_sources(&S, argc, argv, optind);
	for (int i = 0; i < S.nsrc * S.ns && !rc; i++) /* no output may be, hold or lie in an input */
		dg_input_add(S.src[i].path);
	if (!rc && dg_output_folder_check("attnstats", out))
		rc = 2;
	if (!rc)
		rc = dg_attnstats(&S, out, rho, (int)boot, quiet, cmdline) ? 1 : 0;
	dg_attn_sources_free(&S);
	free(cmdline);
	if (!rc)
		printf("attnstats: %s/attnstats.{csv,md}, %s/attnstats-rho%g.{pdf,png}\n", out, out, rho);
	return rc;
}

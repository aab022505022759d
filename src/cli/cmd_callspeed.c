/*
 * cmd_callspeed.c: `dsgap callspeed`: the time of one attention call (all heads of a site) under each
 * policy against sequence length (issue 23 item 3): the command line; what it measures and the rows
 * it writes are bench/callspeed.h's.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench/callspeed.h"
#include "cli/commands.h"
#include "policy/presets.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap callspeed [--device gpu|cpu] [--grids LIST] [--heads LIST] [--head-dim D]\n"
		   "                       [--policies LIST] [--density LIST] [--path dit|backend|both]\n"
		   "                       [--every K] [--reps R] [--max-call S] [--budget S] --csv FILE\n\n"
		   "One attention call (all heads) per policy against the token grid, beside dense, with the\n"
		   "metadata amortised over its refresh schedule (refresh=anchor: one anchor per K calls, --every,\n"
		   "default 40; refresh=step: every call). Paths: dit (the DiT entry point, fast P.V; default),\n"
		   "backend (the replay's backend per head, fast and precise P.V), both. Defaults: gpu, grids\n"
		   "4x16x16,8x16x16,16x16x16,8x32x32,16x32x32,21x30x52,21x45x80,32x64x64 (1k..128k tokens; Wan's\n"
		   "480p and 720p at 81 frames among them),\n"
		   "heads 12,24,40, d 128, policies mc-sparse,est-block and the 8 peers at matched budgets (SpargeAttn\n"
		   "with theta -0.1: random inputs have no self-similar blocks, so its default keeps all),\n"
		   "density 0.15, reps 5, max-call 5 s. Rows are appended to FILE (header when new).\n");
}

static int parse(int argc, char **argv, dg_callspeed_opts *o)
{
	static const struct option opts[] = {
		{ "device", required_argument, 0, 'D' }, { "grids", required_argument, 0, 'g' },
		{ "heads", required_argument, 0, 'H' },  { "head-dim", required_argument, 0, 'd' },
		{ "policies", required_argument, 0, 'p' }, { "density", required_argument, 0, 'r' },
		{ "path", required_argument, 0, 'P' },   { "every", required_argument, 0, 'e' },
		{ "reps", required_argument, 0, 'R' },   { "max-call", required_argument, 0, 'm' },
		{ "budget", required_argument, 0, 'b' }, { "csv", required_argument, 0, 'c' },
		{ "help", no_argument, 0, 'h' },         { 0, 0, 0, 0 },
	};
	const char *grids = "4x16x16,8x16x16,16x16x16,8x32x32,16x32x32,21x30x52,21x45x80,32x64x64",
		   *heads = "12,24,40", *dens = "0.15",
		   *pols = "mc-sparse,est-block,svg2/budget=matched,spargeattn/theta=-0.1/budget=matched,xattention/budget=matched,"
			   "radial/budget=matched,sta/budget=matched,ditfastattn/budget=matched,chipmunk,pisa";
	*o = (dg_callspeed_opts){ .device = "gpu", .path = "dit", .d = 128, .reps = 5, .every = 40, .max_call = 5 };
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":D:g:H:d:p:r:P:e:R:m:b:c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'D': o->device = optarg; break;
		case 'g': grids = optarg; break;
		case 'H': heads = optarg; break;
		case 'd': if (dg_opt_int("callspeed", "head-dim", optarg, 32, 256, &o->d)) return 2; break;
		case 'p': pols = optarg; break;
		case 'r': dens = optarg; break;
		case 'P': o->path = optarg; break;
		case 'e': if (dg_opt_int("callspeed", "every", optarg, 1, 10000, &o->every)) return 2; break;
		case 'R': if (dg_opt_int("callspeed", "reps", optarg, 1, 1000, &o->reps)) return 2; break;
		case 'm':
		case 'b': {
			char *e;
			double x = strtod(optarg, &e);
			if (e == optarg || *e || !(x >= 0))
				return dg_error("callspeed: bad --%s '%s' (seconds)", c == 'm' ? "max-call" : "budget",
						optarg), 2;
			*(c == 'm' ? &o->max_call : &o->budget) = x;
			break;
		}
		case 'c': o->csv = optarg; break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("callspeed", c, argv, opts);
		}
	}
	if (optind != argc || !o->csv) {
		if (optind != argc)
			dg_error("callspeed: unexpected argument '%s'", argv[optind]);
		else
			dg_error("callspeed: --csv FILE is required");
		usage(stderr);
		return 2;
	}
	if (strcmp(o->device, "cpu") && strcmp(o->device, "gpu"))
		return dg_error("callspeed: bad --device '%s' (cpu or gpu)", o->device), 2;
	if (strcmp(o->path, "dit") && strcmp(o->path, "backend") && strcmp(o->path, "both"))
		return dg_error("callspeed: bad --path '%s' (dit, backend or both)", o->path), 2;
	char *buf = dg_strdup(grids), *item[DG_CALLSPEED_MAXL];
	o->ngrids = dg_split(buf, ',', item, DG_CALLSPEED_MAXL);
	if (dg_opt_list_check("callspeed", "grids", grids, item, o->ngrids)) {
		free(buf);
		return 2;
	}
	for (int i = 0; i < o->ngrids; i++)
		if (dg_opt_grid("callspeed", "grids", item[i], o->grids[i])) {
			free(buf);
			return 2;
		}
	free(buf);
	if (o->ngrids < 1)
		return dg_error("callspeed: bad --grids '%s' (FxHxW,...)", grids), 2;
	if ((o->nheads = dg_parse_ints(heads, o->heads, DG_CALLSPEED_MAXL)) < 1)
		return dg_error("callspeed: bad --heads '%s' (a list of head counts)", heads), 2;
	for (int i = 0; i < o->nheads; i++)
		if (o->heads[i] < 1 || o->heads[i] > 256)
			return dg_error("callspeed: bad --heads '%s' (1..256 each)", heads), 2;
	int first, again;
	if (dg_ints_repeat(o->heads, o->nheads, &first, &again))
		return dg_error("callspeed: --heads '%s': %d is listed twice (items %d and %d)", heads, o->heads[first],
				first + 1, again + 1), 2;
	if ((o->ndens = dg_parse_doubles(dens, o->dens, DG_CALLSPEED_MAXL)) < 1)
		return dg_error("callspeed: bad --density '%s'", dens), 2;
	for (int i = 0; i < o->ndens; i++)
		if (!(o->dens[i] > 0 && o->dens[i] <= 1))
			return dg_error("callspeed: bad --density '%s' (each in (0, 1])", dens), 2;
	if ((o->npol = dg_policies_expand(pols, o->pol, 64)) < 0)
		return 2;
	int np = 0; /* dense is the reference row of every grid */
	for (int i = 0; i < o->npol; i++)
		if (!o->pol[i].dense)
			o->pol[np++] = o->pol[i];
	o->npol = np;
	return -1;
}

int dg_cmd_callspeed(int argc, char **argv)
{
	dg_callspeed_opts o;
	int rc = parse(argc, argv, &o);
	if (rc >= 0)
		return rc;
	return dg_callspeed(&o) ? 1 : 0;
}

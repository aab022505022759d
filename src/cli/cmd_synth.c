/*
 * cmd_synth.c: dsgap synth, write a structured synthetic trace (synth.h says what is in it).
 *   dsgap synth --out T.h5 [--grid FxHxW] [--heads H] [--head-dim D] [--layers L] [--steps S] [--seed X]
 *                          [--text T]
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "trace/synth.h"
#include "util/util.h"

static void usage(FILE *f)
{
	dg_synth_opts d;
	dg_synth_defaults(&d);
	fprintf(f,
		"usage: dsgap synth --out T.h5 [options]\n\n"
		"Write a structured synthetic trace: local, same-position-across-frames, sink and diffuse\n"
		"heads with content, drifting slowly over the first steps of a 50-step schedule.\n\n"
		"  -o, --out FILE       the trace to write (required)\n"
		"      --grid FxHxW     latent grid in tokens (default %dx%dx%d)\n"
		"      --heads H        heads per layer (default %d)\n"
		"      --head-dim D     32..256 (default %d)\n"
		"      --layers L       (default %d)\n"
		"      --steps S        1..50 (default %d)\n"
		"      --seed X         (default %lu)\n"
		"      --text T         text tokens before the grid's, joint attention (default %d)\n"
		"  -h, --help           this help\n",
		d.grid[0], d.grid[1], d.grid[2], d.heads, d.head_dim, d.layers, d.steps, d.seed, d.text);
}

int dg_cmd_synth(int argc, char **argv)
{
	enum { OPT_GRID = 256, OPT_HEADS, OPT_HEAD_DIM, OPT_LAYERS, OPT_STEPS, OPT_SEED, OPT_TEXT };
	static const struct option longopts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "grid", required_argument, NULL, OPT_GRID },
		{ "heads", required_argument, NULL, OPT_HEADS },
		{ "head-dim", required_argument, NULL, OPT_HEAD_DIM },
		{ "layers", required_argument, NULL, OPT_LAYERS },
		{ "steps", required_argument, NULL, OPT_STEPS },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "text", required_argument, NULL, OPT_TEXT },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	dg_synth_opts o;
	dg_synth_defaults(&o);
	const char *out = NULL;
	int c, bad = 0;
	opterr = 0;
	optind = 1;
	while (!bad && (c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case OPT_GRID: bad = dg_opt_grid("synth", "grid", optarg, o.grid); break;
		case OPT_HEADS: bad = dg_opt_int("synth", "heads", optarg, INT_MIN, INT_MAX, &o.heads); break;
		case OPT_HEAD_DIM: bad = dg_opt_int("synth", "head-dim", optarg, INT_MIN, INT_MAX, &o.head_dim); break;
		case OPT_LAYERS: bad = dg_opt_int("synth", "layers", optarg, INT_MIN, INT_MAX, &o.layers); break;
		case OPT_STEPS: bad = dg_opt_int("synth", "steps", optarg, INT_MIN, INT_MAX, &o.steps); break;
		case OPT_SEED: bad = dg_opt_seed("synth", "seed", optarg, &o.seed); break;
		case OPT_TEXT: bad = dg_opt_int("synth", "text", optarg, INT_MIN, INT_MAX, &o.text); break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("synth", c, argv, longopts);
		}
	}
	if (bad)
		return 2;
	if (optind < argc)
		return dg_error("synth: unexpected argument '%s' (dsgap synth --help)", argv[optind]), 2;
	if (!out)
		return dg_error("synth: --out is required (dsgap synth --help)"), 2;
	if (dg_synth_check(&o))
		return 2;
	double t0 = dg_now();
	if (dg_synth(&o, out))
		return 1;
	struct stat st;
	double mib = stat(out, &st) ? 0 : st.st_size / 1048576.0;
	printf("wrote %s: %d steps x %d layers x %d heads x %d tokens (%d text + %dx%dx%d) x %d dims, bf16, "
	       "%.1f MiB, seed %lu, %.1f s\n", out, o.steps, o.layers, o.heads,
	       o.text + o.grid[0] * o.grid[1] * o.grid[2], o.text, o.grid[0], o.grid[1], o.grid[2], o.head_dim, mib,
	       o.seed, dg_now() - t0);
	return 0;
}

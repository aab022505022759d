/*
 * cmd_replay.c: `dsgap replay T.h5 --policies A,B --density 0.1,0.15 [--schedule ...] [--device gpu]
 * [--precise on|off] --out DIR` runs policies over a trace's Q/K/V and writes DIR/metrics.csv and
 * DIR/run.json (replay.h).
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "policy/presets.h"
#include "replay/replay.h"
#include "replay/replay_check.h"
#include "trace/trace.h"
#include "util/util.h"

#define MAX_POLICIES 64
#define MAX_DENSITIES 64

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dsgap replay T.h5 --out DIR [--policies LIST] [--density LIST] [--schedule S]\n"
		"                    [--device cpu|gpu] [--precise on|off] [--quiet]\n\n"
		"Replays every policy at every density on the trace's own Q/K/V and writes\n"
		"DIR/metrics.csv (one row per policy x density x step x layer x head) and DIR/run.json.\n\n"
		"  --policies LIST  comma-separated specs and aliases (default ladder,factorial); dsgap\n"
		"                   presets lists every preset with its switches. Aliases:\n");
	for (int i = 0; dg_alias_name(i); i++)
		fprintf(f, "                     %-9s = %s\n", dg_alias_name(i), dg_alias_members(dg_alias_name(i)));
	fprintf(f,
		"                   A spec is NAME[/key=value]...,\n"
		"                   e.g. mc-sparse/budget=topp:0.9, custom/group=tile3d/kv=token/score=exact\n"
		"                   (keys: group kv score budget sinks residual refresh mask approx and the\n"
		"                   peers' theta minkc decay stride qc kc window block threshold;\n"
		"                   docs/spec.md §3, peers.h)\n"
		"                   and the cache storage: residual_dtype=fp32|bf16|fp8 keys=list|bitmap\n"
		"                   cfg_meta=own|shared (e.g. mc-sparse/residual_dtype=bf16/keys=bitmap)\n"
		"  --density LIST   top-k densities in (0,1] (default 0.15)\n"
		"  --schedule S     warmup=W,anchors=a;b,dense_layers=l;m (trace step/layer indices;\n"
		"                   default no warm-up, anchor at the last step before W; anchors=every:N\n"
		"                   adds one every N steps after it; dense_layers=none)\n"
		"  --device D       cpu or gpu (default cpu)\n"
		"  --precise on|off GPU: P.V with P split into bf16 hi + lo, metrics at fp32 level as on the\n"
		"                   CPU (on, default), or P rounded to bf16 as the fast kernels do (off)\n"
		"  --quiet          no progress line\n");
}

/* --density: each item a number in (0, 1], none twice, at most max; the count, or -1 after one line
 * naming the item */
static int parse_densities(const char *arg, double *out, int max)
{
	char *copy = dg_strdup(arg), *items[MAX_DENSITIES + 1];
	int n = dg_split(copy, ',', items, max + 1), rc = n;
	if (n == 0)
		rc = dg_error("replay: bad --density '%s' (comma-separated numbers in (0,1])", arg);
	else if (n < 0 || n > max)
		rc = dg_error("replay: bad --density: more than %d densities (at most %d)", max, max);
	for (int i = 0; i < n && rc > 0; i++) {
		char *end;
		out[i] = strtod(items[i], &end);
		if (end == items[i] || *end || !isfinite(out[i]))
			rc = dg_error("replay: bad --density '%s': item %d '%s' is not a number", arg, i + 1,
				      items[i]);
		else if (!(out[i] > 0 && out[i] <= 1))
			rc = dg_error("replay: bad --density '%s': density %g is outside (0, 1]", arg, out[i]);
		for (int j = 0; j < i && rc > 0; j++)
			if (out[j] == out[i])
				rc = dg_error("replay: bad --density '%s': %g is given twice (items %d and %d)", arg,
					      out[i], j + 1, i + 1);
	}
	free(copy);
	return rc;
}

/* the schedule against the trace's own steps and layers */
static int check_schedule(const char *path, const dg_schedule *s)
{
	dg_trace t;
	if (dg_trace_open(&t, path))
		return -1;
	int rc = dg_replay_check_schedule(path, s, &t.meta);
	dg_trace_close(&t);
	return rc;
}

int dg_cmd_replay(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, 0, 'o' },     { "policies", required_argument, 0, 'p' },
		{ "density", required_argument, 0, 'd' }, { "schedule", required_argument, 0, 's' },
		{ "device", required_argument, 0, 'D' },  { "quiet", no_argument, 0, 'q' },
		{ "precise", required_argument, 0, 'P' }, { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *out = NULL, *policies = "ladder,factorial", *density = "0.15", *schedule = "";
	const char *device = "cpu";
	bool quiet = false, precise = true;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":o:p:d:s:D:P:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'p': policies = optarg; break;
		case 'd': density = optarg; break;
		case 's': schedule = optarg; break;
		case 'D': device = optarg; break;
		case 'q': quiet = true; break;
		case 'P': if (dg_opt_onoff("replay", "precise", optarg, &precise)) return 2; break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("replay", c, argv, opts);
		}
	}
	if (optind != argc - 1 || !out) {
		dg_error(optind != argc - 1 ? "replay: expected one trace file" : "replay: --out DIR is required");
		usage(stderr);
		return 2;
	}
	if (strcmp(device, "cpu") && strcmp(device, "gpu"))
		return dg_error("replay: unknown device '%s' (cpu or gpu)", device), 1;
	dg_policy pol[MAX_POLICIES];
	double dens[MAX_DENSITIES];
	dg_replay_opts o = { .trace_path = argv[optind], .out_dir = out, .policies = pol,
			     .densities = dens, .device = device, .bf16_pv = !precise, .progress = !quiet };
	if ((o.npolicies = dg_policies_expand(policies, pol, MAX_POLICIES)) < 0)
		return 1;
	if ((o.ndensities = parse_densities(density, dens, MAX_DENSITIES)) <= 0)
		return 1;
	if (dg_schedule_parse(schedule, &o.schedule) || check_schedule(o.trace_path, &o.schedule))
		return 1;
	char *cmd = dg_join_args(argc, argv);
	o.command_line = cmd;
	double t0 = dg_now();
	int rc = dg_replay(&o);
	free(cmd);
	if (rc)
		return 1;
	if (!quiet)
		fprintf(stderr, "replay: wrote %s/metrics.csv and %s/run.json in %.1fs\n", out, out,
			dg_now() - t0);
	return 0;
}

/*
 * cmd_presets.c: dsgap presets, the named policies as the table of src/policy/presets.c holds them:
 * each preset, its kind (family), its switches before any override, and for a factorial cell its
 * components, for a peer the method it replays; then the aliases of a policy list.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "policy/policy.h"
#include "policy/presets.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap presets\n\n"
		   "List the named policies (docs/spec.md §3.2): each preset, its kind (dense, ladder,\n"
		   "factorial, peer, custom) and its switches before any override (a spec NAME/key=value\n"
		   "overrides them); a factorial cell's components (G grouping, S selection, R residual)\n"
		   "and the method a peer replays; then the aliases of a policy list.\n"
		   "  -h, --help      this help\n");
}

int dg_cmd_presets(int argc, char **argv)
{
	static const struct option opts[] = { { "help", no_argument, NULL, 'h' }, { 0, 0, 0, 0 } };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == 'h')
			return usage(stdout), 0;
		return dg_opt_bad("presets", c, argv, opts);
	}
	if (optind != argc) {
		dg_error("presets: unexpected argument '%s'", argv[optind]);
		usage(stderr);
		return 2;
	}
	printf("%-13s %-10s %s\n", "preset", "kind", "switches");
	for (int i = 0; i < dg_preset_count(); i++) {
		const dg_preset *p = dg_preset_at(i);
		char sw[256], note[128] = "";
		dg_preset_switches(p, sw, sizeof sw);
		if (p->family == DG_FAMILY_DENSE)
			snprintf(sw, sizeof sw, "(none: exact attention, the reference)");
		if (p->family == DG_FAMILY_FACTORIAL)
			snprintf(note, sizeof note, "  [%s%s%s%s]", p->components ? "" : "none",
				 p->components & 1u << DG_COMP_G ? "G" : "",
				 p->components & 1u << DG_COMP_S ? "S" : "", p->components & 1u << DG_COMP_R ? "R" : "");
		else if (p->method)
			snprintf(note, sizeof note, "  [%s]", p->method);
		printf("%-13s %-10s %s%s\n", p->name, dg_family_name(p->family), sw, note);
	}
	printf("\naliases:\n");
	for (int i = 0; dg_alias_name(i); i++)
		printf("  %-10s %s\n", dg_alias_name(i), dg_alias_members(dg_alias_name(i)));
	return 0;
}

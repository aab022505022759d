/*
 * presets.c: the table of named policies, its listings and the aliases of policy lists. See
 * presets.h.
 */
#include "policy/presets.h"

#include <stdio.h>
#include <string.h>

#define G (1u << DG_COMP_G)
#define S (1u << DG_COMP_S)
#define R (1u << DG_COMP_R)
#define LADDER .family = DG_FAMILY_LADDER, .refresh = DG_REFRESH_STEP
#define FACTORIAL(c) .family = DG_FAMILY_FACTORIAL, .components = (c), .refresh = DG_REFRESH_ANCHOR
#define PEER(m) .family = DG_FAMILY_PEER, .method = (m)
static const dg_preset presets[] = {
	{ .name = "dense", .family = DG_FAMILY_DENSE },
	/* the oracle ladder: metadata every step */
	{ .name = "est-block", LADDER, .group = DG_GROUP_RASTER, .kv = DG_KV_BLOCK, .score = DG_SCORE_POOLED },
	{ .name = "oracle-block", LADDER, .group = DG_GROUP_RASTER, .kv = DG_KV_BLOCK, .score = DG_SCORE_EXACT },
	{ .name = "oracle-tile", LADDER, .group = DG_GROUP_RASTER, .kv = DG_KV_TOKEN, .score = DG_SCORE_EXACT },
	{ .name = "oracle-pca", LADDER, .group = DG_GROUP_PCA, .kv = DG_KV_TOKEN, .score = DG_SCORE_EXACT },
	{ .name = "oracle", LADDER, .group = DG_GROUP_QUERY, .kv = DG_KV_TOKEN, .score = DG_SCORE_EXACT },
	{ .name = "oracle+res", LADDER, .group = DG_GROUP_QUERY, .kv = DG_KV_TOKEN, .score = DG_SCORE_EXACT,
	  .residual = DG_RESIDUAL_CACHED },
	/* the MC-Sparse factorial, metadata at the anchor: G = (raster, block) -> (pca, token),
	 * S = pooled -> exact, R = none -> cached */
	{ .name = "baseline", FACTORIAL(0), .group = DG_GROUP_RASTER, .kv = DG_KV_BLOCK, .score = DG_SCORE_POOLED },
	{ .name = "mc-grouping", FACTORIAL(G), .group = DG_GROUP_PCA, .kv = DG_KV_TOKEN, .score = DG_SCORE_POOLED },
	{ .name = "mc-selection", FACTORIAL(S), .group = DG_GROUP_RASTER, .kv = DG_KV_BLOCK, .score = DG_SCORE_EXACT },
	{ .name = "mc-residual", FACTORIAL(R), .group = DG_GROUP_RASTER, .kv = DG_KV_BLOCK, .score = DG_SCORE_POOLED,
	  .residual = DG_RESIDUAL_CACHED },
	{ .name = "mc-gs", FACTORIAL(G | S), .group = DG_GROUP_PCA, .kv = DG_KV_TOKEN, .score = DG_SCORE_EXACT },
	{ .name = "mc-gr", FACTORIAL(G | R), .group = DG_GROUP_PCA, .kv = DG_KV_TOKEN, .score = DG_SCORE_POOLED,
	  .residual = DG_RESIDUAL_CACHED },
	{ .name = "mc-sr", FACTORIAL(S | R), .group = DG_GROUP_RASTER, .kv = DG_KV_BLOCK, .score = DG_SCORE_EXACT,
	  .residual = DG_RESIDUAL_CACHED },
	{ .name = "mc-sparse", FACTORIAL(G | S | R), .group = DG_GROUP_PCA, .kv = DG_KV_TOKEN, .score = DG_SCORE_EXACT,
	  .residual = DG_RESIDUAL_CACHED },
	/* the peers (peers.h): dynamic ones every step; static masks; residuals cached at the anchor */
	{ .name = "svg2", PEER("Sparse VideoGen2 (§2.2)"), .group = DG_GROUP_KMEANS, .kv = DG_KV_TOKEN,
	  .score = DG_SCORE_CENTROID, .refresh = DG_REFRESH_STEP, .budget = DG_BUDGET_TOPP, .topp = 0.9 },
	{ .name = "spargeattn", PEER("SpargeAttn (§2.4)"), .group = DG_GROUP_RASTER, .kv = DG_KV_BLOCK,
	  .score = DG_SCORE_SPARGE, .refresh = DG_REFRESH_STEP, .budget = DG_BUDGET_TOPP, .topp = 0.98 },
	{ .name = "xattention", PEER("XAttention (§2.5)"), .group = DG_GROUP_RASTER, .kv = DG_KV_BLOCK,
	  .score = DG_SCORE_ANTIDIAG, .refresh = DG_REFRESH_STEP, .budget = DG_BUDGET_TOPP, .topp = 0.9 },
	{ .name = "radial", PEER("Radial Attention (§2.6)"), .group = DG_GROUP_RASTER, .kv = DG_KV_BLOCK,
	  .score = DG_SCORE_EXACT, .refresh = DG_REFRESH_STEP, .mask = DG_MASK_RADIAL },
	{ .name = "sta", PEER("Sliding Tile Attention (§2.7)"), .group = DG_GROUP_RASTER, .kv = DG_KV_TOKEN,
	  .score = DG_SCORE_EXACT, .refresh = DG_REFRESH_STEP, .mask = DG_MASK_STA, .window = 3 },
	{ .name = "ditfastattn", PEER("DiTFastAttn (§2.9)"), .group = DG_GROUP_RASTER, .kv = DG_KV_TOKEN,
	  .score = DG_SCORE_EXACT, .residual = DG_RESIDUAL_CACHED, .refresh = DG_REFRESH_ANCHOR,
	  .mask = DG_MASK_WINDOW, .window = 64 },
	{ .name = "chipmunk", PEER("Chipmunk (§2.11)"), .group = DG_GROUP_VOXEL, .kv = DG_KV_TOKEN,
	  .score = DG_SCORE_EXACT, .residual = DG_RESIDUAL_CACHED, .refresh = DG_REFRESH_ANCHOR },
	{ .name = "pisa", PEER("PISA (§2.12)"), .group = DG_GROUP_RASTER, .kv = DG_KV_BLOCK,
	  .score = DG_SCORE_POOLED, .refresh = DG_REFRESH_STEP, .approx = DG_APPROX_PISA },
	{ .name = "skipsoftmax", PEER("Skip-Softmax (BLASST, arXiv 2512.12087)"), .group = DG_GROUP_RASTER,
	  .kv = DG_KV_BLOCK, .score = DG_SCORE_RUNMAX, .refresh = DG_REFRESH_STEP },
	/* a blank point to set every switch of by hand */
	{ .name = "custom", .family = DG_FAMILY_CUSTOM, .group = DG_GROUP_RASTER, .kv = DG_KV_TOKEN,
	  .score = DG_SCORE_EXACT, .refresh = DG_REFRESH_ANCHOR },
};
#undef G
#undef S
#undef R
#undef LADDER
#undef FACTORIAL
#undef PEER
#define NPRESETS (int)(sizeof presets / sizeof *presets)

const dg_preset *dg_preset_find(const char *name)
{
	for (int i = 0; i < NPRESETS; i++)
		if (!strcmp(name, presets[i].name))
			return &presets[i];
	return NULL;
}

int dg_preset_family(dg_family f, const dg_preset **out, int max)
{
	int n = 0;
	for (int i = 0; i < NPRESETS; i++)
		if (presets[i].family == f && n < max)
			out[n++] = &presets[i];
	return n;
}

const dg_preset *dg_factorial_cell(unsigned mask)
{
	for (int i = 0; i < NPRESETS; i++)
		if (presets[i].family == DG_FAMILY_FACTORIAL && presets[i].components == mask)
			return &presets[i];
	return NULL;
}

const dg_preset *dg_preset_of_spec(const char *spec)
{
	size_t len = strcspn(spec, "/");
	for (int i = 0; i < NPRESETS; i++)
		if (strlen(presets[i].name) == len && !strncmp(spec, presets[i].name, len))
			return &presets[i];
	return NULL;
}

const char *dg_preset_names(void)
{
	static char names[512];
	if (!names[0])
		for (int i = 0; i < NPRESETS; i++)
			snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? " " : "",
				 presets[i].name);
	return names;
}

int dg_preset_count(void) { return NPRESETS; }
const dg_preset *dg_preset_at(int i) { return i >= 0 && i < NPRESETS ? &presets[i] : NULL; }

const char *dg_family_name(dg_family f)
{
	static const char *const names[] = { "dense", "ladder", "factorial", "peer", "custom" };
	return names[f];
}

/* ---------------------------------------------------------------------------------------------- */

static const char *const aliases[] = { "ladder", "factorial", "all", "peers" };
enum { NALIASES = (int)(sizeof aliases / sizeof *aliases) };

const char *dg_alias_name(int i) { return i >= 0 && i < NALIASES ? aliases[i] : NULL; }

bool dg_is_alias(const char *s)
{
	for (int i = 0; i < NALIASES; i++)
		if (!strcmp(s, aliases[i]))
			return true;
	return false;
}

/* ladder = dense first, then the ladder; all = ladder and factorial */
bool dg_alias_has(const char *alias, const dg_preset *p)
{
	dg_family f = p->family;
	bool ladder = !strcmp(alias, "ladder") || !strcmp(alias, "all");
	bool factorial = !strcmp(alias, "factorial") || !strcmp(alias, "all");
	bool peers = !strcmp(alias, "peers");
	return (ladder && (f == DG_FAMILY_DENSE || f == DG_FAMILY_LADDER)) ||
	       (factorial && f == DG_FAMILY_FACTORIAL) || (peers && f == DG_FAMILY_PEER);
}

const char *dg_alias_members(const char *alias)
{
	static char members[NALIASES][512];
	for (int a = 0; a < NALIASES; a++) {
		if (strcmp(alias, aliases[a]))
			continue;
		char *m = members[a];
		if (!m[0])
			for (int i = 0; i < NPRESETS; i++)
				if (dg_alias_has(alias, &presets[i]))
					snprintf(m + strlen(m), sizeof members[a] - strlen(m), "%s%s", m[0] ? " " : "",
						 presets[i].name);
		return m;
	}
	return NULL;
}

/*
 * presets.c: the table of named policies and the expansion of policy lists. See presets.h.
 */
#include "policy/presets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define NOPEER DG_MASK_NONE, DG_APPROX_NONE, DG_BUDGET_TOPK, 0, 0
#define G (1u << DG_COMP_G)
#define S (1u << DG_COMP_S)
#define R (1u << DG_COMP_R)
static const dg_preset presets[] = {
	{ "dense", DG_FAMILY_DENSE, 0, NULL, 0, 0, 0, 0, 0, NOPEER },
	/* the oracle ladder: metadata every step */
	{ "est-block", DG_FAMILY_LADDER, 0, NULL, DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_POOLED,
	  DG_RESIDUAL_NONE, DG_REFRESH_STEP, NOPEER },
	{ "oracle-block", DG_FAMILY_LADDER, 0, NULL, DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_EXACT,
	  DG_RESIDUAL_NONE, DG_REFRESH_STEP, NOPEER },
	{ "oracle-tile", DG_FAMILY_LADDER, 0, NULL, DG_GROUP_RASTER, DG_KV_TOKEN, DG_SCORE_EXACT,
	  DG_RESIDUAL_NONE, DG_REFRESH_STEP, NOPEER },
	{ "oracle-pca", DG_FAMILY_LADDER, 0, NULL, DG_GROUP_PCA, DG_KV_TOKEN, DG_SCORE_EXACT,
	  DG_RESIDUAL_NONE, DG_REFRESH_STEP, NOPEER },
	{ "oracle", DG_FAMILY_LADDER, 0, NULL, DG_GROUP_QUERY, DG_KV_TOKEN, DG_SCORE_EXACT,
	  DG_RESIDUAL_NONE, DG_REFRESH_STEP, NOPEER },
	{ "oracle+res", DG_FAMILY_LADDER, 0, NULL, DG_GROUP_QUERY, DG_KV_TOKEN, DG_SCORE_EXACT,
	  DG_RESIDUAL_CACHED, DG_REFRESH_STEP, NOPEER },
	/* the MC-Sparse factorial, metadata at the anchor: G = (raster, block) -> (pca, token),
	 * S = pooled -> exact, R = none -> cached */
	{ "baseline", DG_FAMILY_FACTORIAL, 0, NULL, DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_POOLED,
	  DG_RESIDUAL_NONE, DG_REFRESH_ANCHOR, NOPEER },
	{ "mc-grouping", DG_FAMILY_FACTORIAL, G, NULL, DG_GROUP_PCA, DG_KV_TOKEN, DG_SCORE_POOLED,
	  DG_RESIDUAL_NONE, DG_REFRESH_ANCHOR, NOPEER },
	{ "mc-selection", DG_FAMILY_FACTORIAL, S, NULL, DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_EXACT,
	  DG_RESIDUAL_NONE, DG_REFRESH_ANCHOR, NOPEER },
	{ "mc-residual", DG_FAMILY_FACTORIAL, R, NULL, DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_POOLED,
	  DG_RESIDUAL_CACHED, DG_REFRESH_ANCHOR, NOPEER },
	{ "mc-gs", DG_FAMILY_FACTORIAL, G | S, NULL, DG_GROUP_PCA, DG_KV_TOKEN, DG_SCORE_EXACT,
	  DG_RESIDUAL_NONE, DG_REFRESH_ANCHOR, NOPEER },
	{ "mc-gr", DG_FAMILY_FACTORIAL, G | R, NULL, DG_GROUP_PCA, DG_KV_TOKEN, DG_SCORE_POOLED,
	  DG_RESIDUAL_CACHED, DG_REFRESH_ANCHOR, NOPEER },
	{ "mc-sr", DG_FAMILY_FACTORIAL, S | R, NULL, DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_EXACT,
	  DG_RESIDUAL_CACHED, DG_REFRESH_ANCHOR, NOPEER },
	{ "mc-sparse", DG_FAMILY_FACTORIAL, G | S | R, NULL, DG_GROUP_PCA, DG_KV_TOKEN, DG_SCORE_EXACT,
	  DG_RESIDUAL_CACHED, DG_REFRESH_ANCHOR, NOPEER },
	/* the peers (peers.h): dynamic ones every step; static masks; residuals cached at the anchor */
	{ "svg2", DG_FAMILY_PEER, 0, "Sparse VideoGen2 (§2.2)", DG_GROUP_KMEANS, DG_KV_TOKEN,
	  DG_SCORE_CENTROID, DG_RESIDUAL_NONE, DG_REFRESH_STEP, DG_MASK_NONE, DG_APPROX_NONE,
	  DG_BUDGET_TOPP, 0.9, 0 },
	{ "spargeattn", DG_FAMILY_PEER, 0, "SpargeAttn (§2.4)", DG_GROUP_RASTER, DG_KV_BLOCK,
	  DG_SCORE_SPARGE, DG_RESIDUAL_NONE, DG_REFRESH_STEP, DG_MASK_NONE, DG_APPROX_NONE,
	  DG_BUDGET_TOPP, 0.98, 0 },
	{ "xattention", DG_FAMILY_PEER, 0, "XAttention (§2.5)", DG_GROUP_RASTER, DG_KV_BLOCK,
	  DG_SCORE_ANTIDIAG, DG_RESIDUAL_NONE, DG_REFRESH_STEP, DG_MASK_NONE, DG_APPROX_NONE,
	  DG_BUDGET_TOPP, 0.9, 0 },
	{ "radial", DG_FAMILY_PEER, 0, "Radial Attention (§2.6)", DG_GROUP_RASTER, DG_KV_BLOCK,
	  DG_SCORE_EXACT, DG_RESIDUAL_NONE, DG_REFRESH_STEP, DG_MASK_RADIAL, DG_APPROX_NONE,
	  DG_BUDGET_TOPK, 0, 0 },
	{ "sta", DG_FAMILY_PEER, 0, "Sliding Tile Attention (§2.7)", DG_GROUP_RASTER, DG_KV_TOKEN,
	  DG_SCORE_EXACT, DG_RESIDUAL_NONE, DG_REFRESH_STEP, DG_MASK_STA, DG_APPROX_NONE,
	  DG_BUDGET_TOPK, 0, 3 },
	{ "ditfastattn", DG_FAMILY_PEER, 0, "DiTFastAttn (§2.9)", DG_GROUP_RASTER, DG_KV_TOKEN,
	  DG_SCORE_EXACT, DG_RESIDUAL_CACHED, DG_REFRESH_ANCHOR, DG_MASK_WINDOW, DG_APPROX_NONE,
	  DG_BUDGET_TOPK, 0, 64 },
	{ "chipmunk", DG_FAMILY_PEER, 0, "Chipmunk (§2.11)", DG_GROUP_VOXEL, DG_KV_TOKEN,
	  DG_SCORE_EXACT, DG_RESIDUAL_CACHED, DG_REFRESH_ANCHOR, DG_MASK_NONE, DG_APPROX_NONE,
	  DG_BUDGET_TOPK, 0, 0 },
	{ "pisa", DG_FAMILY_PEER, 0, "PISA (§2.12)", DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_POOLED,
	  DG_RESIDUAL_NONE, DG_REFRESH_STEP, DG_MASK_NONE, DG_APPROX_PISA, DG_BUDGET_TOPK, 0, 0 },
	{ "skipsoftmax", DG_FAMILY_PEER, 0, "Skip-Softmax (BLASST, arXiv 2512.12087)", DG_GROUP_RASTER,
	  DG_KV_BLOCK, DG_SCORE_RUNMAX, DG_RESIDUAL_NONE, DG_REFRESH_STEP, DG_MASK_NONE, DG_APPROX_NONE,
	  DG_BUDGET_TOPK, 0, 0 },
	/* a blank point to set every switch of by hand */
	{ "custom", DG_FAMILY_CUSTOM, 0, NULL, DG_GROUP_RASTER, DG_KV_TOKEN, DG_SCORE_EXACT,
	  DG_RESIDUAL_NONE, DG_REFRESH_ANCHOR, NOPEER },
};
#undef G
#undef S
#undef R
#undef NOPEER
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
	char base[DG_POLICY_NAME_MAX];
	snprintf(base, sizeof base, "%s", spec);
	base[strcspn(base, "/")] = 0;
	return dg_preset_find(base);
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

/* ---------------------------------------------------------------------------------------------- */

static int add_policy(const char *spec, dg_policy *out, int *n, int max)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(out[i].name, spec))
			return 0; /* listed twice: once is enough */
	if (*n == max)
		return dg_error("too many policies (at most %d)", max);
	if (dg_policy_parse(spec, &out[*n]))
		return -1;
	(*n)++;
	return 0;
}

/* the members of the families an alias names, in table order (ladder: dense first) */
static int add_alias(const char *alias, dg_policy *out, int *n, int max)
{
	bool ladder = !strcmp(alias, "ladder") || !strcmp(alias, "all");
	bool factorial = !strcmp(alias, "factorial") || !strcmp(alias, "all");
	bool peers = !strcmp(alias, "peers");
	for (int i = 0; i < NPRESETS; i++) {
		dg_family f = presets[i].family;
		if (((ladder && (f == DG_FAMILY_DENSE || f == DG_FAMILY_LADDER)) ||
		     (factorial && f == DG_FAMILY_FACTORIAL) || (peers && f == DG_FAMILY_PEER)) &&
		    add_policy(presets[i].name, out, n, max))
			return -1;
	}
	return 0;
}

int dg_policies_expand(const char *list, dg_policy *out, int max)
{
	enum { MAX_SPECS = 128 };
	char *copy = dg_strdup(list), *items[MAX_SPECS];
	int k = dg_split(copy, ',', items, MAX_SPECS), n = 0;
	if (k <= 0) {
		free(copy);
		return k ? dg_error("too many policy specs in one list (at most %d)", MAX_SPECS)
			 : dg_error("no policies given");
	}
	for (int i = 0; i < k && n >= 0; i++) {
		bool alias = !strcmp(items[i], "ladder") || !strcmp(items[i], "factorial") ||
			     !strcmp(items[i], "all") || !strcmp(items[i], "peers");
		if (alias ? add_alias(items[i], out, &n, max) : add_policy(items[i], out, &n, max))
			n = -1;
	}
	free(copy);
	return n;
}

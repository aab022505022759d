/*
 * policy.c: policy switches, presets and schedules: parsing and names. See policy.h.
 */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define NAMES(type, fn, ...)                                                     \
	static const char *const fn##_names[] = { __VA_ARGS__ };                 \
	const char *fn(type k) { return fn##_names[k]; }                          \
	static __attribute__((unused)) int fn##_parse(const char *s, int *k)     \
	{                                                                        \
		for (int i = 0; i < (int)(sizeof fn##_names / sizeof *fn##_names); i++) \
			if (!strcmp(s, fn##_names[i]))                           \
				return *k = i, 0;                                \
		return -1;                                                       \
	}

NAMES(dg_group_kind, dg_group_name, "raster", "tile3d", "pca", "query")
NAMES(dg_kv_kind, dg_kv_name, "token", "block")
NAMES(dg_score_kind, dg_score_name, "exact", "pooled")
NAMES(dg_budget_kind, dg_budget_name, "topk", "topp")
NAMES(dg_residual_kind, dg_residual_name, "none", "cached")
NAMES(dg_refresh_kind, dg_refresh_name, "anchor", "step")

int dg_group_parse(const char *s, dg_group_kind *k)
{
	int v;
	if (dg_group_name_parse(s, &v))
		return -1;
	*k = v;
	return 0;
}

/* Presets: name, then group, kv, score, residual, refresh (DESIGN §3). */
static const struct preset {
	const char *name;
	dg_group_kind group;
	dg_kv_kind kv;
	dg_score_kind score;
	dg_residual_kind residual;
	dg_refresh_kind refresh;
} presets[] = {
	/* oracle ladder: metadata every step */
	{ "est-block", DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_POOLED, DG_RESIDUAL_NONE, DG_REFRESH_STEP },
	{ "oracle-block", DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_EXACT, DG_RESIDUAL_NONE, DG_REFRESH_STEP },
	{ "oracle-tile", DG_GROUP_RASTER, DG_KV_TOKEN, DG_SCORE_EXACT, DG_RESIDUAL_NONE, DG_REFRESH_STEP },
	{ "oracle-pca", DG_GROUP_PCA, DG_KV_TOKEN, DG_SCORE_EXACT, DG_RESIDUAL_NONE, DG_REFRESH_STEP },
	{ "oracle", DG_GROUP_QUERY, DG_KV_TOKEN, DG_SCORE_EXACT, DG_RESIDUAL_NONE, DG_REFRESH_STEP },
	{ "oracle+res", DG_GROUP_QUERY, DG_KV_TOKEN, DG_SCORE_EXACT, DG_RESIDUAL_CACHED, DG_REFRESH_STEP },
	/* MC-Sparse factorial: G = (raster,block) -> (pca,token), S = pooled -> exact, R = none -> cached */
	{ "baseline", DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_POOLED, DG_RESIDUAL_NONE, DG_REFRESH_ANCHOR },
	{ "mc-grouping", DG_GROUP_PCA, DG_KV_TOKEN, DG_SCORE_POOLED, DG_RESIDUAL_NONE, DG_REFRESH_ANCHOR },
	{ "mc-selection", DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_EXACT, DG_RESIDUAL_NONE, DG_REFRESH_ANCHOR },
	{ "mc-residual", DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_POOLED, DG_RESIDUAL_CACHED, DG_REFRESH_ANCHOR },
	{ "mc-gs", DG_GROUP_PCA, DG_KV_TOKEN, DG_SCORE_EXACT, DG_RESIDUAL_NONE, DG_REFRESH_ANCHOR },
	{ "mc-gr", DG_GROUP_PCA, DG_KV_TOKEN, DG_SCORE_POOLED, DG_RESIDUAL_CACHED, DG_REFRESH_ANCHOR },
	{ "mc-sr", DG_GROUP_RASTER, DG_KV_BLOCK, DG_SCORE_EXACT, DG_RESIDUAL_CACHED, DG_REFRESH_ANCHOR },
	{ "mc-sparse", DG_GROUP_PCA, DG_KV_TOKEN, DG_SCORE_EXACT, DG_RESIDUAL_CACHED, DG_REFRESH_ANCHOR },
	/* a blank point to set every switch of by hand */
	{ "custom", DG_GROUP_RASTER, DG_KV_TOKEN, DG_SCORE_EXACT, DG_RESIDUAL_NONE, DG_REFRESH_ANCHOR },
};

const char *const dg_policy_presets[] = {
	"dense", "est-block", "oracle-block", "oracle-tile", "oracle-pca", "oracle", "oracle+res",
	"baseline", "mc-grouping", "mc-selection", "mc-residual", "mc-gs", "mc-gr", "mc-sr",
	"mc-sparse", "custom", NULL
};

static int bad_switch(const char *spec, const char *sw)
{
	return dg_error("policy '%s': bad switch '%s' (keys: group=raster|tile3d|pca|query "
			"kv=token|block score=exact|pooled budget=topk|topp:P sinks=A-B "
			"residual=none|cached refresh=anchor|step)", spec, sw);
}

static int set_switch(dg_policy *p, const char *spec, char *sw)
{
	char *eq = strchr(sw, '=');
	if (!eq)
		return bad_switch(spec, sw);
	*eq = 0;
	const char *key = sw, *val = eq + 1;
	int v, bad = 0;
	if (!strcmp(key, "group"))
		bad = dg_group_name_parse(val, &v) || ((p->group = v), 0);
	else if (!strcmp(key, "kv"))
		bad = dg_kv_name_parse(val, &v) || ((p->kv = v), 0);
	else if (!strcmp(key, "score"))
		bad = dg_score_name_parse(val, &v) || ((p->score = v), 0);
	else if (!strcmp(key, "residual"))
		bad = dg_residual_name_parse(val, &v) || ((p->residual = v), 0);
	else if (!strcmp(key, "refresh"))
		bad = dg_refresh_name_parse(val, &v) || ((p->refresh = v), 0);
	else if (!strcmp(key, "budget")) {
		char *end;
		if (!strcmp(val, "topk"))
			p->budget = DG_BUDGET_TOPK;
		else if (!strncmp(val, "topp:", 5)) {
			p->budget = DG_BUDGET_TOPP;
			p->topp = strtod(val + 5, &end);
			bad = end == val + 5 || *end || !(p->topp > 0 && p->topp <= 1);
		} else
			bad = 1;
	} else if (!strcmp(key, "sinks")) {
		char *end, *end2;
		long a = strtol(val, &end, 10), b = *end == '-' ? strtol(end + 1, &end2, 10) : -1;
		bad = *end != '-' || end2 == end + 1 || *end2 || a < 0 || b <= a || b > 1 << 30;
		if (!bad) {
			p->sink_lo = (int)a;
			p->sink_hi = (int)b;
		}
	} else
		bad = 1;
	*eq = '=';
	return bad ? bad_switch(spec, sw) : 0;
}

int dg_policy_parse(const char *spec, dg_policy *p)
{
	memset(p, 0, sizeof *p);
	if (strlen(spec) >= DG_POLICY_NAME_MAX)
		return dg_error("policy '%.40s...': spec too long", spec);
	if (strchr(spec, ',') || strchr(spec, '"') || strchr(spec, ' '))
		return dg_error("policy '%s': commas, quotes and spaces are not allowed", spec);
	snprintf(p->name, sizeof p->name, "%s", spec);
	char buf[DG_POLICY_NAME_MAX], *items[16];
	snprintf(buf, sizeof buf, "%s", spec);
	int n = dg_split(buf, '/', items, 16);
	if (n < 1)
		return dg_error("policy '%s': too many switches", spec);
	if (!strcmp(items[0], "dense")) {
		if (n > 1)
			return dg_error("policy '%s': dense takes no switches", spec);
		p->dense = true;
		return 0;
	}
	const struct preset *pr = NULL;
	for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
		if (!strcmp(items[0], presets[i].name))
			pr = &presets[i];
	if (!pr) {
		char known[512] = "";
		for (int i = 0; dg_policy_presets[i]; i++)
			snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
				 i ? " " : "", dg_policy_presets[i]);
		return dg_error("unknown policy '%s' (known: %s)", items[0], known);
	}
	p->group = pr->group;
	p->kv = pr->kv;
	p->score = pr->score;
	p->residual = pr->residual;
	p->refresh = pr->refresh;
	p->budget = DG_BUDGET_TOPK;
	for (int i = 1; i < n; i++)
		if (set_switch(p, spec, items[i]))
			return -1;
	if (p->group == DG_GROUP_QUERY && (p->refresh == DG_REFRESH_ANCHOR || p->score != DG_SCORE_EXACT))
		return dg_error("policy '%s': group=query is the per-query oracle: it needs score=exact "
				"and refresh=step", spec);
	return 0;
}

static int parse_list(const char *val, int *out, int max)
{
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", val);
	for (char *c = buf; *c; c++)
		if (*c == ';')
			*c = ',';
	return dg_parse_ints(buf, out, max);
}

int dg_schedule_parse(const char *s, dg_schedule *out)
{
	memset(out, 0, sizeof *out);
	char buf[1024], *items[16];
	if (strlen(s) >= sizeof buf)
		return dg_error("schedule too long");
	snprintf(buf, sizeof buf, "%s", s);
	int n = dg_split(buf, ',', items, 16);
	if (n < 0)
		return dg_error("schedule '%s': too many items", s);
	for (int i = 0; i < n; i++) {
		char *eq = strchr(items[i], '=');
		if (!eq)
			return dg_error("schedule item '%s': expected key=value "
					"(warmup=W, anchors=a;b, dense_layers=l;m)", items[i]);
		*eq = 0;
		const char *key = items[i], *val = eq + 1;
		if (!strcmp(key, "warmup")) {
			char *end;
			long w = strtol(val, &end, 10);
			if (end == val || *end || w < 0 || w > 1000000)
				return dg_error("schedule: bad warmup '%s'", val);
			out->warmup = (int)w;
		} else if (!strcmp(key, "anchors")) {
			out->nanchors = parse_list(val, out->anchors, DG_SCHEDULE_MAX);
			if (out->nanchors < 0)
				return dg_error("schedule: bad anchors '%s'", val);
			out->anchors_given = true;
		} else if (!strcmp(key, "dense_layers")) {
			out->ndense_layers = parse_list(val, out->dense_layers, DG_SCHEDULE_MAX);
			if (out->ndense_layers < 0)
				return dg_error("schedule: bad dense_layers '%s'", val);
		} else
			return dg_error("schedule: unknown key '%s' (warmup, anchors, dense_layers)", key);
	}
	return 0;
}

bool dg_schedule_is_anchor(const dg_schedule *s, int step)
{
	for (int i = 0; i < s->nanchors; i++)
		if (s->anchors[i] == step)
			return true;
	return false;
}

bool dg_schedule_dense_layer(const dg_schedule *s, int layer)
{
	for (int i = 0; i < s->ndense_layers; i++)
		if (s->dense_layers[i] == layer)
			return true;
	return false;
}

/*
 * policy.c: policy switches and schedules: parsing and names (the presets: presets.c). See policy.h.
 */
#include "policy/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/presets.h"
#include "util/util.h"

#define NAMES(type, fn, ...)                                                     \
	static const char *const fn##_names[] = { __VA_ARGS__ };                 \
	const char *fn(type k) { return fn##_names[k]; }                          \
	static __attribute__((unused)) int fn##_parse(const char *s, int *k)     \
	{                                                                        \
		for (int i = 0; i < (int)(sizeof fn##_names / sizeof *fn##_names); i++) \
			if (!strcmp(s, fn##_names[i]))                           \
				return *k = i, 0;                                \
		return -1;                                                       \
	}                                                                        \
	static __attribute__((unused)) void fn##_list(char *buf, size_t n)      \
	{                                                                        \
		for (int i = 0; i < (int)(sizeof fn##_names / sizeof *fn##_names); i++) \
			snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", i ? "|" : "", fn##_names[i]); \
	}

NAMES(dg_group_kind, dg_group_name, "raster", "tile3d", "pca", "query", "kmeans", "voxel")
NAMES(dg_kv_kind, dg_kv_name, "token", "block")
NAMES(dg_score_kind, dg_score_name, "exact", "pooled", "antidiag", "sparge", "centroid", "runmax")
NAMES(dg_mask_kind, dg_mask_name, "none", "radial", "sta", "window")
NAMES(dg_approx_kind, dg_approx_name, "none", "pisa")
NAMES(dg_budget_kind, dg_budget_name, "topk", "topp")
NAMES(dg_residual_kind, dg_residual_name, "none", "cached")
NAMES(dg_refresh_kind, dg_refresh_name, "anchor", "step")
NAMES(dg_resdtype, dg_resdtype_name, "fp32", "bf16", "fp8")
NAMES(dg_keys_kind, dg_keys_name, "list", "bitmap")
NAMES(dg_cfg_meta, dg_cfg_meta_name, "own", "shared")

int dg_group_parse(const char *s, dg_group_kind *k)
{
	int v;
	if (dg_group_name_parse(s, &v))
		return -1;
	*k = v;
	return 0;
}

bool dg_policy_is_peer(const dg_policy *p)
{
	return !p->dense && (p->mask != DG_MASK_NONE || p->approx != DG_APPROX_NONE ||
			     p->score == DG_SCORE_ANTIDIAG || p->score == DG_SCORE_SPARGE ||
			     p->score == DG_SCORE_CENTROID || p->score == DG_SCORE_RUNMAX);
}

char *dg_preset_switches(const dg_preset *p, char *buf, size_t n)
{
	buf[0] = 0;
	if (p->family == DG_FAMILY_DENSE)
		return buf;
	size_t at = 0;
#define ADD(...) (at += (size_t)snprintf(buf + at, at < n ? n - at : 0, __VA_ARGS__), at = at < n ? at : n)
	ADD("group=%s kv=%s score=%s residual=%s refresh=%s budget=%s", dg_group_name(p->group),
	    dg_kv_name(p->kv), dg_score_name(p->score), dg_residual_name(p->residual),
	    dg_refresh_name(p->refresh), dg_budget_name(p->budget));
	if (p->budget == DG_BUDGET_TOPP)
		ADD(":%g", p->topp);
	if (p->mask != DG_MASK_NONE)
		ADD(" mask=%s", dg_mask_name(p->mask));
	if (p->window)
		ADD(" window=%d", p->window);
	if (p->approx != DG_APPROX_NONE)
		ADD(" approx=%s", dg_approx_name(p->approx));
#undef ADD
	return buf;
}

/* one spec of a list: parsed into out[*n] unless it is there already */
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
		if (!items[i][0]) {
			n = dg_error("policy list '%s': item %d is empty (a list is SPEC,SPEC,...)", list, i + 1);
			break;
		}
		if (!dg_is_alias(items[i])) {
			if (add_policy(items[i], out, &n, max))
				n = -1;
			continue;
		}
		for (int j = 0; j < dg_preset_count() && n >= 0; j++) /* the alias's members, table order */
			if (dg_alias_has(items[i], dg_preset_at(j)) && add_policy(dg_preset_at(j)->name, out, &n, max))
				n = -1;
	}
	free(copy);
	return n;
}

#define SWITCH_KEYS                                                                                       \
	"group kv score residual refresh residual_dtype keys cfg_meta fresh mask approx theta minkc decay "  \
	"stride qc kc window block threshold budget sinks"

/* -1 after one line: switch sw of spec is bad; expect: what its key takes */
static int bad_switch(const char *spec, const char *sw, const char *expect)
{
	return dg_error("policy '%s': bad switch '%s' (%s)", spec, sw, expect);
}

/* a numeric peer parameter: a double in [lo, hi], or an integer there when i is set; 1 with
 * what it takes in expect */
static int set_param(const char *key, const char *val, double lo, double hi, double *d, int *i, char *expect,
		     size_t size)
{
	char *end;
	double x = strtod(val, &end);
	snprintf(expect, size, "%s= takes %s in [%.10g, %.10g]", key, i ? "an integer" : "a number", lo, hi);
	if (end == val || *end || !(x >= lo && x <= hi) || (i && x != (int)x))
		return 1;
	if (i)
		*i = (int)x;
	else
		*d = x;
	return 0;
}

/* fresh=a+b+c: the bits of groups, keys, residual (each at most once) */
static int set_fresh(const char *val, unsigned *fresh)
{
	static const char *const names[] = { "groups", "keys", "residual" };
	char buf[64], *items[4];
	if (strlen(val) >= sizeof buf)
		return 1;
	snprintf(buf, sizeof buf, "%s", val);
	int n = dg_split(buf, '+', items, 4);
	if (n < 1)
		return 1;
	unsigned bits = 0;
	for (int i = 0; i < n; i++) {
		int k = 0;
		while (k < 3 && strcmp(items[i], names[k]))
			k++;
		if (k == 3 || (bits & 1u << k))
			return 1;
		bits |= 1u << k;
	}
	*fresh = bits;
	return 0;
}

static int set_switch(dg_policy *p, const char *spec, char *sw)
{
	char *eq = strchr(sw, '=');
	if (!eq)
		return bad_switch(spec, sw, "a switch is KEY=VALUE; keys: " SWITCH_KEYS);
	*eq = 0;
	const char *key = sw, *val = eq + 1;
	char expect[256];
	int v, bad = 0;
	/* a named value: the names the key takes (the name table's) */
#define NAMED(fn, field)                                                                                  \
	(snprintf(expect, sizeof expect, "%s= takes ", key), fn##_list(expect + strlen(expect),          \
								       sizeof expect - strlen(expect)), \
	 fn##_parse(val, &v) || ((field = v), 0))
	if (!strcmp(key, "group"))
		bad = NAMED(dg_group_name, p->group);
	else if (!strcmp(key, "kv"))
		bad = NAMED(dg_kv_name, p->kv);
	else if (!strcmp(key, "score"))
		bad = NAMED(dg_score_name, p->score);
	else if (!strcmp(key, "residual"))
		bad = NAMED(dg_residual_name, p->residual);
	else if (!strcmp(key, "refresh"))
		bad = NAMED(dg_refresh_name, p->refresh);
	else if (!strcmp(key, "residual_dtype"))
		bad = NAMED(dg_resdtype_name, p->residual_dtype);
	else if (!strcmp(key, "keys"))
		bad = NAMED(dg_keys_name, p->keys);
	else if (!strcmp(key, "cfg_meta"))
		bad = NAMED(dg_cfg_meta_name, p->cfg_meta);
	else if (!strcmp(key, "fresh"))
		bad = (snprintf(expect, sizeof expect, "fresh= takes groups, keys, residual joined by +, each once"),
		       set_fresh(val, &p->fresh));
	else if (!strcmp(key, "mask"))
		bad = NAMED(dg_mask_name, p->mask);
	else if (!strcmp(key, "approx"))
		bad = NAMED(dg_approx_name, p->approx);
	else if (!strcmp(key, "theta"))
		bad = set_param(key, val, -1, 1, &p->theta, NULL, expect, sizeof expect);
	else if (!strcmp(key, "minkc"))
		bad = set_param(key, val, 0, 1, &p->minkc, NULL, expect, sizeof expect);
	else if (!strcmp(key, "decay"))
		bad = set_param(key, val, 1e-3, 1e3, &p->decay, NULL, expect, sizeof expect);
	else if (!strcmp(key, "stride"))
		bad = set_param(key, val, 1, 128, NULL, &p->stride, expect, sizeof expect);
	else if (!strcmp(key, "qc"))
		bad = set_param(key, val, 1, 1 << 20, NULL, &p->qc, expect, sizeof expect);
	else if (!strcmp(key, "kc"))
		bad = set_param(key, val, 1, 1 << 20, NULL, &p->kc, expect, sizeof expect);
	else if (!strcmp(key, "window"))
		bad = set_param(key, val, 0, 1 << 20, NULL, &p->window, expect, sizeof expect);
	else if (!strcmp(key, "block"))
		bad = set_param(key, val, 1, 1 << 16, NULL, &p->block, expect, sizeof expect);
	else if (!strcmp(key, "threshold"))
		bad = set_param(key, val, 0, INFINITY, &p->threshold, NULL, expect, sizeof expect);
	else if (!strcmp(key, "budget")) {
		char *end;
		snprintf(expect, sizeof expect, "budget= takes topk, matched or topp:P with P in (0, 1]");
		p->matched = false;
		if (!strcmp(val, "topk"))
			p->budget = DG_BUDGET_TOPK;
		else if (!strcmp(val, "matched"))
			p->matched = true; /* the preset's own budget, its knob calibrated (peers.h) */
		else if (!strncmp(val, "topp:", 5)) {
			p->budget = DG_BUDGET_TOPP;
			p->topp = strtod(val + 5, &end);
			bad = end == val + 5 || *end || !(p->topp > 0 && p->topp <= 1);
		} else
			bad = 1;
	} else if (!strcmp(key, "sinks")) {
		char *end, *end2;
		snprintf(expect, sizeof expect, "sinks= takes A-B, key positions 0 <= A < B <= 2^30");
		long a = strtol(val, &end, 10), b = *end == '-' ? strtol(end + 1, &end2, 10) : -1;
		bad = *end != '-' || end2 == end + 1 || *end2 || a < 0 || b <= a || b > 1 << 30;
		if (!bad) {
			p->sink_lo = (int)a;
			p->sink_hi = (int)b;
		}
	} else {
		snprintf(expect, sizeof expect, "no key '%s'; keys: %s", key, SWITCH_KEYS);
		bad = 1;
	}
#undef NAMED
	*eq = '=';
	return bad ? bad_switch(spec, sw, expect) : 0;
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
	if (n < 0)
		return dg_error("policy '%s': more than 15 switches", spec);
	if (n < 1)
		return dg_error("policy '': an empty spec (NAME[/key=value]...)");
	const dg_preset *pr = dg_preset_find(items[0]);
	if (!pr)
		return dg_error("unknown policy '%s' (known: %s)", items[0], dg_preset_names());
	if (pr->family == DG_FAMILY_DENSE) {
		if (n > 1)
			return dg_error("policy '%s': dense takes no switches", spec);
		p->dense = true;
		return 0;
	}
	p->group = pr->group;
	p->kv = pr->kv;
	p->score = pr->score;
	p->residual = pr->residual;
	p->refresh = pr->refresh;
	p->mask = pr->mask;
	p->approx = pr->approx;
	p->budget = pr->budget;
	p->topp = pr->topp;
	p->window = pr->window;
	/* published defaults of the peers' parameters (mcsparse-and-peers.md §2; peers.h) */
	p->theta = 0.6, p->minkc = 0.1, p->decay = 1.0, p->stride = 8, p->qc = 100, p->kc = 100;
	p->block = 64;
	p->threshold = -1; /* ln(n) (peers.h) */
	for (int i = 1; i < n; i++)
		if (set_switch(p, spec, items[i]))
			return -1;
	if (p->matched) {
		if (pr->family != DG_FAMILY_PEER)
			return dg_error("policy '%s': budget=matched calibrates a peer's own knob to the "
					"density: it needs a peer preset (%s)", spec, dg_alias_members("peers"));
		p->budget = pr->budget;
		p->topp = pr->topp;
	}
	if (p->group == DG_GROUP_QUERY && (p->refresh == DG_REFRESH_ANCHOR || p->score != DG_SCORE_EXACT))
		return dg_error("policy '%s': group=query is the per-query oracle: it needs score=exact "
				"and refresh=step", spec);
	if (p->score == DG_SCORE_CENTROID && p->group != DG_GROUP_KMEANS)
		return dg_error("policy '%s': score=centroid scores k-means clusters: it needs group=kmeans "
				"(svg2)", spec);
	if ((p->score == DG_SCORE_ANTIDIAG || p->score == DG_SCORE_SPARGE || p->score == DG_SCORE_RUNMAX) &&
	    (p->group != DG_GROUP_RASTER || p->kv != DG_KV_BLOCK))
		return dg_error("policy '%s': score=%s scores 128-query blocks against 128-key blocks: it "
				"needs group=raster and kv=block", spec, dg_score_name(p->score));
	if (p->approx == DG_APPROX_PISA && (p->group != DG_GROUP_RASTER || p->kv != DG_KV_BLOCK ||
					    p->score != DG_SCORE_POOLED || p->mask != DG_MASK_NONE ||
					    p->residual != DG_RESIDUAL_NONE))
		return dg_error("policy '%s': approx=pisa takes PISA's own blocks and pooled scores "
				"(group=raster kv=block score=pooled, no mask, no residual)", spec);
	if (p->residual_dtype != DG_RESDTYPE_FP32 && p->residual != DG_RESIDUAL_CACHED)
		return dg_error("policy '%s': residual_dtype=%s stores a cached residual: it needs "
				"residual=cached", spec, dg_resdtype_name(p->residual_dtype));
	if (p->keys == DG_KEYS_BITMAP && (p->kv != DG_KV_TOKEN || dg_policy_is_peer(p) ||
					  p->group == DG_GROUP_QUERY))
		return dg_error("policy '%s': keys=bitmap stores per-group token lists: it needs kv=token, "
				"groups of queries (not group=query) and no peer metadata", spec);
	if (p->cfg_meta == DG_CFG_META_SHARED && p->refresh != DG_REFRESH_ANCHOR)
		return dg_error("policy '%s': cfg_meta=shared shares the anchor's metadata between the CFG "
				"passes: it needs refresh=anchor", spec);
	if (p->fresh && p->refresh != DG_REFRESH_ANCHOR)
		return dg_error("policy '%s': fresh= remakes a component of the anchor's metadata every step: "
				"it needs refresh=anchor", spec);
	if ((p->fresh & (DG_FRESH_GROUPS | DG_FRESH_KEYS)) && dg_policy_is_peer(p))
		return dg_error("policy '%s': fresh=groups and fresh=keys remake the shared path's groups and "
				"key lists: no peer metadata", spec);
	if ((p->fresh & DG_FRESH_RESIDUAL) && p->residual != DG_RESIDUAL_CACHED)
		return dg_error("policy '%s': fresh=residual remakes a cached residual: it needs "
				"residual=cached", spec);
	if ((p->fresh & DG_FRESH_GROUPS) && !(p->fresh & DG_FRESH_KEYS) && p->budget != DG_BUDGET_TOPK)
		return dg_error("policy '%s': fresh=groups carries the anchor's key lists by votes, which "
				"only a top-k budget ranks: it needs budget=topk (or fresh=groups+keys)", spec);
	if (p->budget == DG_BUDGET_TOPP && (p->approx == DG_APPROX_PISA || p->mask != DG_MASK_NONE))
		return dg_error("policy '%s': budget=topp has no meaning with a mask or approx=pisa", spec);
	if (p->budget == DG_BUDGET_TOPP && p->score == DG_SCORE_RUNMAX)
		return dg_error("policy '%s': score=runmax keeps the tiles within threshold= of the running "
				"maximum: its budget is threshold= or budget=matched, not topp", spec);
	return 0;
}

/* a;b;c of step or layer indices (each >= 0): how many, or -1 when the list is bad */
static int parse_list(const char *val, int *out, int max)
{
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", val);
	for (char *c = buf; *c; c++)
		if (*c == ';')
			*c = ',';
	int n = dg_parse_ints(buf, out, max);
	for (int i = 0; i < n; i++)
		if (out[i] < 0) /* step and layer indices */
			return -1;
	return n;
}

/* anchors=a;b;c (given steps), once (the default single anchor) or every:N (the default anchor,
 * then every N steps after it) */
static int parse_anchors(const char *val, dg_schedule *out)
{
	out->nanchors = 0;
	out->anchors_given = false;
	out->anchor_every = 0;
	if (!strcmp(val, "once"))
		return 0;
	if (!strncmp(val, "every:", 6)) {
		char *end;
		long n = strtol(val + 6, &end, 10);
		if (end == val + 6 || *end || n < 1 || n > 1000000)
			return -1;
		out->anchor_every = (int)n;
		return 0;
	}
	out->nanchors = parse_list(val, out->anchors, DG_SCHEDULE_MAX);
	out->anchors_given = true;
	return out->nanchors < 0 ? -1 : 0;
}

int dg_schedule_parse(const char *s, dg_schedule *out)
{
	memset(out, 0, sizeof *out);
	s = s ? s : "";
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
			if (parse_anchors(val, out))
				return dg_error("schedule: bad anchors '%s' (a;b;c, once or every:N with N >= 1)", val);
		} else if (!strcmp(key, "dense_layers")) {
			out->ndense_layers = strcmp(val, "none") ? parse_list(val, out->dense_layers, DG_SCHEDULE_MAX) : 0;
			if (out->ndense_layers < 0)
				return dg_error("schedule: bad dense_layers '%s' (l;m or none)", val);
		} else if (!strcmp(key, "sparse_steps")) {
			char *end, *end2 = NULL;
			long a = strtol(val, &end, 10), b = *end == '-' ? strtol(end + 1, &end2, 10) : -1;
			if (end == val || *end != '-' || end2 == end + 1 || *end2 || a < 0 || b < a || b > 1000000)
				return dg_error("schedule: bad sparse_steps '%s' (a-b, 0 <= a <= b)", val);
			out->sparse_window = true;
			out->sparse_lo = (int)a, out->sparse_hi = (int)b;
		} else if (!strcmp(key, "sparse_layers")) {
			out->nsparse_layers = parse_list(val, out->sparse_layers, DG_SCHEDULE_MAX);
			if (out->nsparse_layers < 1)
				return dg_error("schedule: bad sparse_layers '%s'", val);
		} else
			return dg_error("schedule: unknown key '%s' (warmup, anchors, dense_layers, sparse_steps, "
					"sparse_layers)", key);
	}
	if (!out->anchors_given) { /* the default anchor: the last warm-up step, else step 0 */
		out->anchors[0] = out->warmup > 0 ? out->warmup - 1 : 0;
		out->nanchors = 1;
	}
	return 0;
}

bool dg_schedule_is_anchor(const dg_schedule *s, int step)
{
	if (s->anchor_every > 0) /* resolved: anchors[0] the first, then every N steps */
		return s->nanchors > 0 && step >= s->anchors[0] && (step - s->anchors[0]) % s->anchor_every == 0;
	for (int i = 0; i < s->nanchors; i++)
		if (s->anchors[i] == step)
			return true;
	return false;
}

static bool has_step(const int *step_index, int nsteps, int step)
{
	if (!step_index)
		return step >= 0 && step < nsteps;
	for (int i = 0; i < nsteps; i++)
		if (step_index[i] == step)
			return true;
	return false;
}

/* every:N after the default anchor anchors[0]: the steps anchors[0] + kN that exist (step_index's,
 * ascending, or those below nsteps), listed up to DG_SCHEDULE_MAX (dg_schedule_is_anchor applies
 * the rule itself, so a loop of unknown length is covered too). Returns -1 (resolve's "no given
 * anchor missing"). */
static int add_every(dg_schedule *s, const int *step_index, int nsteps)
{
	if (s->anchor_every < 1 || s->nanchors < 1)
		return -1;
	for (int i = 0; step_index && i < nsteps && s->nanchors < DG_SCHEDULE_MAX; i++) {
		long long d = (long long)step_index[i] - s->anchors[0];
		if (d > 0 && d % s->anchor_every == 0 && step_index[i] > s->anchors[s->nanchors - 1]) /* ascending */
			s->anchors[s->nanchors++] = step_index[i];
	}
	for (long long a = (long long)s->anchors[0] + s->anchor_every; !step_index && a < nsteps &&
	     s->nanchors < DG_SCHEDULE_MAX; a += s->anchor_every)
		s->anchors[s->nanchors++] = (int)a;
	return -1;
}

int dg_schedule_resolve_anchors(dg_schedule *s, const int *step_index, int nsteps)
{
	if (s->anchors_given) {
		for (int a = 0; a < s->nanchors; a++)
			if (!has_step(step_index, nsteps, s->anchors[a]))
				return a;
		return -1;
	}
	if (!step_index) { /* steps 0 .. nsteps-1: the parsed default, within the loop */
		s->anchors[0] = s->anchors[0] < nsteps ? s->anchors[0] : nsteps - 1;
		s->nanchors = nsteps > 0;
		return add_every(s, NULL, nsteps);
	}
	s->nanchors = 0; /* a trace: the parsed default moved onto the steps it stored */
	for (int i = 0; i < nsteps; i++) {
		int step = step_index[i];
		if (step < s->warmup || s->nanchors == 0) {
			s->anchors[0] = step;
			s->nanchors = 1;
		}
	}
	return add_every(s, step_index, nsteps);
}

bool dg_schedule_same_but_anchors(const dg_schedule *a, const dg_schedule *b)
{
	dg_schedule x, y; /* byte copies: padding as dg_schedule_parse zeroed it */
	memcpy(&x, a, sizeof x);
	memcpy(&y, b, sizeof y);
	x.nanchors = y.nanchors = 0, x.anchors_given = y.anchors_given = false;
	x.anchor_every = y.anchor_every = 0;
	memset(x.anchors, 0, sizeof x.anchors);
	memset(y.anchors, 0, sizeof y.anchors);
	return !memcmp(&x, &y, sizeof x);
}

bool dg_schedule_dense_layer(const dg_schedule *s, int layer)
{
	for (int i = 0; i < s->ndense_layers; i++)
		if (s->dense_layers[i] == layer)
			return true;
	for (int i = 0; i < s->nsparse_layers; i++)
		if (s->sparse_layers[i] == layer)
			return false;
	return s->nsparse_layers > 0;
}

bool dg_schedule_dense_step(const dg_schedule *s, int step)
{
	return s->sparse_window && (step < s->sparse_lo || step > s->sparse_hi);
}

int dg_schedule_check_trace(const dg_schedule *s, const int *step_index, int nsteps, const int *layer_index,
			    int nlayers, char *why, size_t size)
{
	char steps[64], layers[128];
	snprintf(steps, sizeof steps, nsteps == 1 ? "%d" : nsteps == 2 ? "%d,%d" : "%d..%d", step_index[0],
		 step_index[nsteps - 1]);
	int last = step_index[0], lo = layer_index[0], hi = lo;
	for (int i = 1; i < nsteps; i++)
		last = step_index[i] > last ? step_index[i] : last;
	layers[0] = 0;
	for (int i = 0; i < nlayers; i++) {
		lo = layer_index[i] < lo ? layer_index[i] : lo, hi = layer_index[i] > hi ? layer_index[i] : hi;
		if (strlen(layers) < 100)
			snprintf(layers + strlen(layers), sizeof layers - strlen(layers), "%s%d", i ? "," : "",
				 layer_index[i]);
	}
	if (strlen(layers) >= 100)
		snprintf(layers, sizeof layers, "%d layers, %d..%d", nlayers, lo, hi);
	if (s->warmup > last)
		return snprintf(why, size, "warmup=%d covers every step of the trace (its steps: %s), so no policy "
				"would be sparse", s->warmup, steps), -1;
	for (int a = 0; s->anchors_given && a < s->nanchors; a++) /* a default one moves onto the steps */
		if (!has_step(step_index, nsteps, s->anchors[a]))
			return snprintf(why, size, "anchor step %d is not in the trace (its steps: %s)", s->anchors[a],
					steps), -1;
	for (int a = 0; a < s->ndense_layers; a++) {
		bool found = false;
		for (int i = 0; i < nlayers && !found; i++)
			found = layer_index[i] == s->dense_layers[a];
		if (!found)
			return snprintf(why, size, "dense layer %d is not in the trace (its layers: %s)", s->dense_layers[a],
					layers), -1;
	}
	return 0;
}

int dg_schedule_check_loop(const dg_schedule *s, int steps, int layers, char *why, size_t size)
{
	if (steps > 0 && s->warmup >= steps)
		return snprintf(why, size, "warmup=%d covers every one of the %d denoising steps (0..%d), so no "
				"policy would be sparse", s->warmup, steps, steps - 1), -1;
	for (int a = 0; steps > 0 && s->anchors_given && a < s->nanchors; a++)
		if (s->anchors[a] < 0 || s->anchors[a] >= steps)
			return snprintf(why, size, "anchor step %d is not a step of the %d denoising steps (0..%d)",
					s->anchors[a], steps, steps - 1), -1;
	for (int i = 0; layers > 0 && i < s->ndense_layers; i++)
		if (s->dense_layers[i] >= layers)
			return snprintf(why, size, "dense layer %d is not a layer of the model (its %d layers: 0..%d)",
					s->dense_layers[i], layers, layers - 1), -1;
	return 0;
}

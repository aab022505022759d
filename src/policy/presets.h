/*
 * presets.h: the named policies, in one table (docs/spec.md §3): dense, the oracle ladder, the
 * MC-Sparse factorial, the peers and the blank "custom" point, and the aliases of a policy list.
 * Everything that names a preset (replay's lists, decompose's tables, plot's families, generate,
 * batch, `dsgap presets`, --help and error messages) reads it from here: adding a preset is adding
 * a row to the table (presets.c) and nothing else.
 *
 * Table order is the order of every listing: the ladder from the block-sparse estimator down to
 * the per-query oracle; the factorial by the number of components on (none, G, S, R, G+S, G+R,
 * S+R, G+S+R); the peers in the order of reference/mcsparse-and-peers.md §2.
 *
 * Aliases in a policy list (comma-separated): ladder = dense + the ladder; factorial = the
 * factorial; all = both; peers = the peers. A name given twice is kept once. The expansion of a
 * list into parsed policies is dg_policies_expand (policy.h), and a preset's switches written out
 * dg_preset_switches (policy.h): this table needs the switches' values only (switches.h), and
 * policy.c needs the table, never the other way round.
 */
#ifndef DG_PRESETS_H
#define DG_PRESETS_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/switches.h"

typedef enum { DG_FAMILY_DENSE, DG_FAMILY_LADDER, DG_FAMILY_FACTORIAL, DG_FAMILY_PEER,
	       DG_FAMILY_CUSTOM } dg_family;

/* the factorial's components, as bits of dg_preset.components */
enum { DG_COMP_G, DG_COMP_S, DG_COMP_R, DG_COMP_COUNT };

/* A row of the table, written with named fields; a switch left out is its first value (group=raster,
 * kv=token, score=exact, residual=none, refresh=anchor, no mask, no approx, budget=topk). */
typedef struct {
	const char *name;
	dg_family family;     /* its kind (dg_family_name) */
	unsigned components;  /* factorial: mask of components on (bit DG_COMP_G, _S, _R) */
	const char *method;   /* peers: the method replayed and its section of the peers reference */
	/* the switches (policy.h); a peer's parameters start at their published defaults */
	dg_group_kind group;
	dg_kv_kind kv;
	dg_score_kind score;
	dg_residual_kind residual;
	dg_refresh_kind refresh;
	dg_mask_kind mask;
	dg_approx_kind approx;
	dg_budget_kind budget;
	double topp;
	int window;
} dg_preset;

/* The preset named exactly name, or NULL. */
const dg_preset *dg_preset_find(const char *name);
/* The presets of a family in table order: fills out[] (at most max) and returns the count. */
int dg_preset_family(dg_family f, const dg_preset **out, int max);
/* The factorial cell with the components of mask on (mask < 8). */
const dg_preset *dg_factorial_cell(unsigned mask);
/* The preset a spec starts from ("mc-sparse/budget=topp:0.9" -> mc-sparse), or NULL. */
const dg_preset *dg_preset_of_spec(const char *spec);
/* "dense est-block ... custom": every name, for help and error messages (static storage). */
const char *dg_preset_names(void);
/* The table's rows in order: i in [0, dg_preset_count()). */
int dg_preset_count(void);
const dg_preset *dg_preset_at(int i);
/* "dense", "ladder", "factorial", "peer", "custom" */
const char *dg_family_name(dg_family f);

/* Aliases of a policy list: whether s is one ("ladder", "factorial", "all", "peers"), whether
 * preset p is a member of alias s, and its members' names space-separated (static storage; NULL
 * for a name that is no alias); dg_alias_name lists them. */
bool dg_is_alias(const char *s);
const char *dg_alias_name(int i); /* the i-th alias, NULL past the last */
bool dg_alias_has(const char *alias, const dg_preset *p);
const char *dg_alias_members(const char *alias);

#endif

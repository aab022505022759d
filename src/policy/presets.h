/*
 * presets.h: the named policies, in one table (docs/spec.md §3): dense, the oracle ladder, the
 * MC-Sparse factorial, the peers and the blank "custom" point, and the aliases of a policy list.
 * Everything that names a preset (replay's lists, decompose's tables, plot's families, generate,
 * batch) reads it from here.
 *
 * Table order is the order of every listing: the ladder from the block-sparse estimator down to
 * the per-query oracle; the factorial by the number of components on (none, G, S, R, G+S, G+R,
 * S+R, G+S+R); the peers in the order of reference/mcsparse-and-peers.md §2.
 *
 * Aliases in a policy list (comma-separated): ladder = dense + the ladder; factorial = the
 * factorial; all = both; peers = the peers. A name given twice is kept once.
 */
#ifndef DG_PRESETS_H
#define DG_PRESETS_H

#include "policy/policy.h"

typedef enum { DG_FAMILY_DENSE, DG_FAMILY_LADDER, DG_FAMILY_FACTORIAL, DG_FAMILY_PEER,
	       DG_FAMILY_CUSTOM } dg_family;

/* the factorial's components, as bits of dg_preset.components */
enum { DG_COMP_G, DG_COMP_S, DG_COMP_R, DG_COMP_COUNT };

typedef struct {
	const char *name;
	dg_family family;
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

/* Expand a comma-separated list of specs and aliases into out[] (at most max), each parsed.
 * Returns the count, or -1 after one line (no policies, too many, a bad spec). */
int dg_policies_expand(const char *list, dg_policy *out, int max);

#endif

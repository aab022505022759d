/*
 * decompose.h: the two tables of docs/spec.md §5, with 95% cluster-bootstrap intervals per cell.
 * E = mean rel_l2 over post-warm-up units (results.h).
 *
 * Ladder ("decomposition", refresh=step oracles), per density:
 *   selection = E(est-block) - E(oracle-block)      grouping = E(oracle-block) - E(oracle)
 *   lost contributions = E(oracle)                  (the three sum to E(est-block))
 *   grouping = query grouping E(oracle-tile) - E(oracle) + key blocking
 *   E(oracle-block) - E(oracle-tile); the paired differences lost - grouping, lost - selection,
 *   grouping - selection, query grouping - key blocking; residual recovers
 *   E(oracle) - E(oracle+res); PCA instead of raster query groups win back
 *   E(oracle-tile) - E(oracle-pca); and E of every rung.
 *   Needs est-block, oracle-block and oracle; quantities of other absent rungs are NaN.
 * Factorial ("ablation", refresh=anchor), per density: E of the 8 cells, the total reduction
 *   E(baseline) - E(mc-sparse), Shapley shares of G, S, R, the interactions (shapley.h) and the
 *   paired differences of the shares phi_R - phi_G, phi_R - phi_S, phi_G - phi_S.
 *   Needs all 8 cells.
 *
 * Closed loop (t->loop set, closed.h): the same tables over whole generations, a sample (prompt,
 *   seed) one unit of one cluster: E(p) = mean over the samples of the final latents' rel-L2
 *   against the dense run (DG_MEASURE_REL_L2) or minus their mean PSNR in dB (DG_MEASURE_PSNR:
 *   then every difference is dB lost and a Shapley share dB won); intervals resample samples; no
 *   per-layer rows.
 *
 * Peers at matched density (docs/spec.md §3 peers beside the table's policies): for each density with
 *   rows and each peer method with post-warm-up units there (a policy PRESET or PRESET/..., PRESET
 *   a peer of presets.h), the configuration whose mean effective density at that
 *   density_target is closest to the target (ties: the first listed), so a sweep of a fixed-mask
 *   peer's parameter in the experiment is matched by picking; its E and E minus the reference
 *   (E(est-block) for the ladder, E(mc-sparse) for the ablation), paired bootstrap over all
 *   clusters. A budget=matched configuration whose mean effective density is more than
 *   DG_PEER_MATCH_TOL from the target is "cannot reach rho": no E (csv: "peer:unreached(SPEC)",
 *   its computed density, in place of the E rows).
 *
 * Rows: for each density with the needed policies, one row for all layers, then one per layer.
 * Every row resamples its own (layer, head) clusters: all layers' clusters for the "all" row,
 * one layer's heads for a layer row.
 *
 * Outputs, each written atomically into the results directory:
 *   NAME.csv  density_target,layer,quantity,estimate,lo,hi,n_units,n_clusters
 *             (layer "all" or a trace layer index; quantity keys from dg_quantity_key;
 *             n_units: post-warm-up units of est-block / baseline in the row); peers:
 *             layer "all", quantities "peer:density(SPEC)" (lo, hi: nan), "peer:E(SPEC)",
 *             "peer:E(SPEC)-E(REF)" 
 *   NAME.md   per density: a caption line, the all-layers table (quantity, estimate, interval,
 *             share), the sum check, the peers at matched density, a per-layer table
 *   NAME.tex  per density: booktabs tables in table environments with caption and label
 */
#ifndef DG_DECOMPOSE_H
#define DG_DECOMPOSE_H

#include <stdio.h>

#include "analysis/results.h"
#include "policy/policy.h"
#include "policy/presets.h"

typedef enum { DG_TABLE_LADDER, DG_TABLE_ABLATION, DG_TABLE_COUNT } dg_table_kind;

/* Ladder quantities, in display order. What each rung groups by (presets.c, docs/spec.md §3.2):
 * est-block and oracle-block: raster query groups (runs of 128 queries in token order, not 3D
 * tiles) sharing key blocks of 128; oracle-tile: the same raster query groups sharing a list of
 * single keys; oracle-pca: PCA query groups of 128 sharing single keys; oracle: each query alone. */
enum {
	DG_LAD_E_EST,     /* E(est-block) */
	DG_LAD_SELECTION, /* E(est-block) - E(oracle-block) */
	DG_LAD_GROUPING,  /* E(oracle-block) - E(oracle) = query grouping + key blocking */
	DG_LAD_QGROUP,    /* query grouping: E(oracle-tile) - E(oracle) */
	DG_LAD_KBLOCK,    /* key blocking: E(oracle-block) - E(oracle-tile) */
	DG_LAD_LOST,      /* E(oracle) */
	/* paired differences of sources: which dominates */
	DG_LAD_LOST_MINUS_GROUPING,      /* lost - grouping */
	DG_LAD_LOST_MINUS_SELECTION,     /* lost - selection */
	DG_LAD_GROUPING_MINUS_SELECTION, /* grouping - selection */
	DG_LAD_QGROUP_MINUS_KBLOCK,      /* query grouping - key blocking */
	DG_LAD_RESIDUAL,  /* E(oracle) - E(oracle+res) */
	DG_LAD_PCA,       /* PCA instead of raster query groups: E(oracle-tile) - E(oracle-pca) */
	DG_LAD_E_ORACLE_BLOCK,
	DG_LAD_E_ORACLE_TILE,
	DG_LAD_E_ORACLE_PCA,
	DG_LAD_E_ORACLE,
	DG_LAD_E_ORACLE_RES,
	DG_LAD_COUNT
};

/* Ablation quantities: DG_ABL_E + mask is E of the cell with the components of mask on. */
enum {
	DG_ABL_E = 0,
	DG_ABL_TOTAL = 8, /* E(baseline) - E(mc-sparse) */
	DG_ABL_PHI = 9,   /* + DG_COMP_*: Shapley share */
	DG_ABL_I_GS = 12,
	DG_ABL_I_GR,
	DG_ABL_I_SR,
	DG_ABL_I_GSR,
	DG_ABL_R_MINUS_G, /* phi_R - phi_G: paired differences of the shares */
	DG_ABL_R_MINUS_S, /* phi_R - phi_S */
	DG_ABL_G_MINUS_S, /* phi_G - phi_S */
	DG_ABL_COUNT
};

#define DG_Q_MAX 24
/* An interval that resamples fewer than this many units at its top level (samples with several
 * samples, else clusters) is flagged in the tables: from 2 or 3 the 95% percentile interval is
 * (about) the minimum and maximum of their own values, no confidence interval. */
#define DG_FEW_RESAMPLED 5

typedef struct {
	int density;    /* index into dg_results.density (of the first sample) */
	int layer;      /* trace layer index, or DG_ANY: all layers together */
	int n_clusters; /* (layer, head) clusters resampled, over all samples */
	int n_samples;  /* samples with clusters in the row */
	double n_units; /* post-warm-up units of the reference policy (est-block, baseline) */
	double density_eff; /* their mean effective (computed) density */
	/* several samples: (table n_samples, DG_Q_MAX) each sample's own estimate (NaN: not in the
	 * row), and per quantity how many samples have it > 0 and finite; NULL with one sample */
	double *sample_est;
	int n_pos[DG_Q_MAX], n_fin[DG_Q_MAX];
	double est[DG_Q_MAX], lo[DG_Q_MAX], hi[DG_Q_MAX]; /* NaN: a policy it needs is absent */
	double check; /* ladder: selection + grouping + lost - E(est-block); ablation: sum phi - total */
} dg_row;

typedef struct {
	int density, policy; /* indices into dg_results */
	const dg_preset *method; /* the peer preset (presets.h: its method and source) */
	double density_eff;  /* mean effective density over its post-warm-up units */
	double n_units;
	int n_clusters;
	double est[2], lo[2], hi[2]; /* E(peer), E(peer) - E(reference) */
	int n_samples, n_pos, n_fin; /* samples; of them with E(peer) - E(reference) > 0, finite */
	bool unreached; /* a budget=matched configuration more than DG_PEER_MATCH_TOL from the target:
			 * the method cannot reach it (peers.h); the tables say so instead of E */
} dg_peer_row;

/* What E measures in a closed-loop table (closed.h). */
typedef enum { DG_MEASURE_REL_L2, DG_MEASURE_PSNR } dg_measure;
typedef struct {
	dg_measure measure;
	int steps, warmup;   /* the runs' denoising steps and dense warm-up steps */
	const char *runs;    /* the run folders, for the provenance line */
	const char *device;  /* where they ran */
} dg_loop_info;

typedef struct {
	dg_table_kind kind;
	const dg_loop_info *loop; /* NULL: open loop (units of a replay); else closed loop (borrowed) */
	int boot;
	unsigned long seed;
	dg_row *row;
	int n_rows;
	dg_peer_row *peer; /* by density, then in the presets table's order of peers */
	int n_peers;
	int n_samples;             /* results directories, one per sample (1: one-level bootstrap) */
	const char *const *sample; /* their labels (borrowed; NULL: the directories) */
} dg_table;

/* "decomposition" or "ablation": the output file stem (closed loop, PSNR: with "-psnr"). */
/* The reference a peer's E is compared with: "est-block" or "mc-sparse". */
const char *dg_table_reference(dg_table_kind kind);
const char *dg_table_name(dg_table_kind kind);
/* The table's policies (ladder rungs; factorial cells indexed by component mask); the count. */
int dg_table_policies(dg_table_kind kind, const char *const **names);
int dg_table_quantities(dg_table_kind kind);
/* Key of quantity q in the csv, e.g. "selection", "E(oracle)", "shapley_G", "I_GSR". */
const char *dg_quantity_key(dg_table_kind kind, int q);

/*
 * Build the table for every density (density < 0) or one density index. Densities without the
 * needed policies are skipped with a warning (none when the table has no policy in r at all);
 * returns 0, or 1 when no row could be built.
 */
int dg_table_build(const dg_results *r, dg_table_kind kind, int density, int boot,
		   unsigned long seed, dg_table *t);
/*
 * The same over n samples (issue 19), r[0..n) one results directory each, labelled label[i]
 * (NULL: the directories): densities are r[0]'s (a sample without one has no clusters there),
 * the policies are matched by name, every mean pools all samples' units, and the intervals come
 * from the two-level bootstrap (bootstrap.h: samples, then clusters within each). Rows also get
 * each sample's own estimate and the number of samples where a quantity is > 0. n = 1 is
 * dg_table_build.
 */
int dg_table_build_samples(const dg_results *r, int n, const char *const *label,
			   dg_table_kind kind, int density, int boot, unsigned long seed,
			   dg_table *t);
void dg_table_free(dg_table *t);
/* The largest |check| over the rows (0 to rounding). */
double dg_table_check(const dg_table *t);
/* Whether row w's interval rests on fewer than DG_FEW_RESAMPLED resampled units at the top level. */
bool dg_row_few(const dg_table *t, int n_samples, int n_clusters);
/* Write r->dir/NAME.{csv,md,tex}; each atomically. */
int dg_table_write(const dg_results *r, const dg_table *t);
/* Write a table of t->n_samples samples (r: their results) into dir: NAME.{csv,md,tex} and,
 * with several samples, NAME-samples.csv (sample,density_target,layer,quantity,estimate). */
int dg_table_write_dir(const dg_results *r, const dg_table *t, const char *dir);
/* x to 3 significant figures in fixed notation (never e-notation): 0.0000985, 0.125, 12.3 */
const char *dg_sig3(char *buf, double x);
/* a name (policy, schedule, title) in LaTeX text: _, %, & and # escaped (compare's and refreshstats'
 * tables; this file's own escape every special character) */
void dg_tex_name(FILE *f, const char *s);

#endif

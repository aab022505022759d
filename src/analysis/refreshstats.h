/*
 * refreshstats.h: the refresh experiment's statistics over a sample set (dsgap refreshstats, issue
 * 19): how the error of anchor-based policies grows with the steps since the anchor and falls with
 * the number of anchors, pooled over samples, with 95% intervals from the two-level bootstrap
 * (bootstrap.h: samples, then (layer, head) clusters within each), each sample's own estimates and
 * in how many samples each trend holds.
 * A sample is the results directories DIR.SCHEDULE of its schedules (dsgap run's TRACE.SCHEDULE
 * runs; DIR: the sample list's folder). The first schedule is the staleness one (its growth slope),
 * the last the one it is compared with (E(first) - E(last) > 0: more anchors, less error). Means are
 * of rel_l2 over the post-warm-up units of one density (anchor steps included, their error 0).
 * Writes OUT/refresh.md (every table), OUT/anchors.{csv,tex}, OUT/staleness.csv,
 * OUT/trends.{csv,tex}, OUT/figures/error_vs_{anchors,staleness}-rhoX.{dat,gp,png,pdf} (X: the
 * density) and, with several samples, OUT/samples.csv; all published together or none. Every table
 * row gives its units, (layer, head) clusters and samples and in how many samples its sign holds
 * (anchors: E below the schedule with fewer anchors; trends: the estimate > 0); numbers to 3
 * significant figures (dg_sig3).
 */
#ifndef DG_REFRESHSTATS_H
#define DG_REFRESHSTATS_H

#include "analysis/samples.h"

#define DG_REFRESH_MAX_SCHED 16

typedef struct {
	const char *out;                         /* the folder written */
	const char *sched[DG_REFRESH_MAX_SCHED]; /* the schedules, fewest anchors first (at least 2) */
	int nk;
	const char *scheds;  /* the schedules as given (the summary printed) */
	double rho;          /* the density target; NaN: the first run's first */
	int boot;            /* bootstrap replicates */
	unsigned long seed;
	const char *cmdline; /* quoted in refresh.md */
} dg_refresh_opts;

/* Loads every sample's runs (each an input no output may name), checks they share policies and
 * clusters, writes the tables and figures and prints a summary. A problem: one line, -1. */
int dg_refreshstats(const dg_refresh_opts *o, const dg_sample_list *l);

#endif

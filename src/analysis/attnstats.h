/*
 * attnstats.h: is a model's attention learned? (dsgap attnstats) For every unit (step, layer, head)
 * of one or more traces: the mean over queries of the row entropy of softmax(q k^T / sqrt d),
 * normalised by ln N (1 = uniform), and the mean retained probability mass of the per-query oracle
 * at density rho (each query keeps its own top K = dg_topk_count(rho, N) keys). Random weights give
 * near-uniform rows (entropy near 1, mass near rho); learned attention is peaked.
 * A source is one trace or a sample set: one trace per sample, every source the same samples in the
 * same order (paired). Means pool every sample's units; with several samples, 95% intervals come
 * from the two-level bootstrap (bootstrap.h: samples, then (layer, head) clusters within each), with
 * each sample's own estimate and in how many samples the first source is more peaked than each
 * other (ΔH = H(other) - H(first) > 0, Δmass = mass(first) - mass(other) > 0).
 * Writes DIR/attnstats.csv (one row per source, sample and unit), DIR/attnstats.md (per source,
 * layer and head: means over steps and samples, with intervals), DIR/attnstats-samples.csv (several
 * samples: each sample's estimates) and DIR/attnstats-rhoX.{dat,gp,pdf,png} (X: the density; both
 * quantities per layer and head, with the intervals), all published together or none.
 */
#ifndef DG_ATTNSTATS_H
#define DG_ATTNSTATS_H

#include <stdbool.h>

#include "trace/trace.h"

#define DG_ATTN_MAX_SOURCES 8

/* one trace of a source: the caller sets label, path and sample; dg_attnstats the rest */
typedef struct {
	const char *label, *path;
	char *sample;           /* the trace's file name without .h5 (allocated; dg_attn_sources_free) */
	dg_trace_meta meta;     /* the trace's, for the tables */
	double *entropy, *mass; /* (steps, layers, heads) unit means */
} dg_attn_source;

/* The sources over their samples: item (i, s) = src[i * ns + s] (allocated), nsrc at most
 * DG_ATTN_MAX_SOURCES; lh: layers * heads, set by dg_attnstats. */
typedef struct {
	dg_attn_source *src;
	int nsrc, ns, lh;
} dg_attn_sources;

/* Measures every trace (progress lines unless quiet), checks they share steps, layers and heads,
 * and writes the tables and figure into out (boot replicates; cmdline quoted in attnstats.md).
 * A problem: one line, -1. */
int dg_attnstats(dg_attn_sources *S, const char *out, double rho, int boot, bool quiet, const char *cmdline);
/* frees what the items hold and src */
void dg_attn_sources_free(dg_attn_sources *S);

#endif

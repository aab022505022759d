/*
 * trace_view.h: a one-cluster view of a trace, for batch cells (experiment.h): a small HDF5 file
 * whose /q /k /v are virtual datasets (HDF5 VDS) mapping [steps, 1, 1, tokens, head_dim] onto the
 * hyperslab [:, l, h, :, :] of the source trace, with the source's own dtype (no copy, no
 * conversion), and whose /layer_index and /head_index hold that cluster's indices. Everything else
 * (steps, timesteps, grid, attributes) is the source's. dg_trace_open reads it like any trace, so
 * replaying it gives exactly the rows a replay of the whole trace gives for that cluster.
 *
 * Unmapped or unreadable source data would read as the fill value: it is NaN, so the reader's
 * finiteness check stops the replay instead of computing on zeros.
 */
#ifndef DG_TRACE_VIEW_H
#define DG_TRACE_VIEW_H

/* Write the view of cluster (l, h) (positions, 0-based) of the trace at src_path to view_path.
 * src_path must be absolute or is made so. One-line error and -1 on failure (nothing left). */
int dg_trace_view(const char *src_path, int l, int h, const char *view_path);

#endif

/*
 * memplan.h: the memory plan of a closed-loop run (issue 21), made before it starts: weights,
 * activations, the policy's working buffers and its caches per (CFG pass, layer, head), and whether
 * it all fits the device. Sizes follow the storage the policy's switches choose (cache_store.h:
 * residual_dtype, keys, cfg_meta); a run that does not fit is refused up front with the size it
 * needs and the switches that would make it fit.
 *
 * Estimates, in bytes (GB = 1e9 in the table):
 *   weights      the parameters of the config: bf16 on the GPU (the head linear, norms and
 *                modulation fp32), fp32 on the CPU
 *   activations  per token 40 dim + 2 ffn_dim bytes (the residual stream and its fp32 temporaries,
 *                the bf16 operand buffers, Q/K/V fp32 + bf16, the FFN's bf16 hidden; calibrated on
 *                the 1.3B 480p dense run, 5.84 GiB peak), plus the cross-attention keys and values of
 *                each context, bf16
 *   scratch      the backend's buffers for one unit (dense O, sparse O, output, LSE, mass, exact
 *                scores (groups, n)), and with keys=bitmap the lists of one site's heads decoded
 *   caches       per (pass, layer, head) past the dense layers: the residual (residual=cached),
 *                the key lists (int32: K per group; bitmap: n bits per group; DiTFastAttn's window:
 *                a list per query, on the GPU one copy for every site) and the grouping (a
 *                permutation and offsets); with cfg_meta=shared lists and grouping once per
 *                (layer, head)
 *   context      the CUDA context and cuBLASLt's workspace (GPU), 0.6 GB
 * With offload (--cache-offload, dit_attn.h): the residuals and key lists in pinned host memory
 * (the groupings stay on the device), the device holding two layers' (the one running and the
 * next, prefetched on a copy stream); the plan gives the copy volume per step and its time at
 * 50 GB/s host-to-device, and the pinned bytes must fit the host's available memory.
 */
#ifndef DG_MEMPLAN_H
#define DG_MEMPLAN_H

#include <stdbool.h>
#include <stdio.h>

#include "dit/wan.h"
#include "policy/policy.h"

typedef struct {
	/* inputs */
	int n, d, heads, layers, passes, cached_layers;
	int ngroups, keys_per_group; /* of a token selection; keys_per_group = n when it is not bounded
				      * (DiTFastAttn's window: its lists' mean length) */
	bool keys_shared;            /* one copy of the key lists for every site (the GPU's window lists) */
	bool gpu, offload;
	dg_policy policy;
	double rho;
	/* bytes */
	double weights, activations, scratch, context;
	double residual_unit, keys_unit, groups_unit; /* one (pass, layer, head) */
	double residual, keys, groups;                /* all of them */
	double caches;                                /* residual + keys + groups */
	double device_caches;                         /* on the device: caches, or two layers' residuals and
						       * lists and every grouping when offloaded */
	double host_pinned;                           /* offload: residuals and lists, pinned host memory */
	double copy_per_step;                         /* offload: host-to-device bytes per denoising step */
	double total;                                 /* on the device */
} dg_memplan;

/* The plan of policy p at density rho (schedule s or NULL: every layer cached) on config c and token
 * grid (frames, height, width), with passes = 2 under CFG; gpu: the GPU's storage; offload: caches in
 * host memory (the GPU's; the CPU's are there already, offload is false in its plan). */
void dg_memplan_make(dg_memplan *m, const dg_wan_config *c, const int grid[3], const dg_policy *p,
		     double rho, const dg_schedule *s, int passes, bool gpu, bool offload);
/* The table. */
void dg_memplan_print(const dg_memplan *m, FILE *f);
/* Whether the plan fits in limit bytes; if not, one line with the size needed and the first of
 * keys=bitmap, +residual_dtype=bf16, +cfg_meta=shared, +residual_dtype=fp8, +--cache-offload that
 * would fit (or that none does), reported as an error. With offload, also whether its pinned
 * caches fit host_limit bytes (<= 0: not checked). 0 fits, -1 reported. */
int dg_memplan_check(const dg_memplan *m, const dg_wan_config *c, const int grid[3], const dg_schedule *s,
		     double limit, double host_limit);
/* The parameters of the config (weights: their bytes as the GPU or CPU keeps them, or NULL). */
double dg_memplan_params(const dg_wan_config *c, bool gpu, double *bytes);
/* The device's total memory in bytes (GPU build with a device), else 0. */
double dg_memplan_device_bytes(void);
/* The limits a run is checked against: DSGAP_MEM_LIMIT_GIB (any device) or the device's memory
 * (GPU), else 0; DSGAP_HOST_LIMIT_GIB or the host's available memory (MemAvailable of
 * /proc/meminfo), else 0. */
double dg_memplan_limit(bool gpu);
double dg_memplan_host_limit(void);
/* Named architectures: "wan2.1-1.3b", "wan2.1-14b" into c; 0, or -1 (no message). */
int dg_memplan_arch(const char *name, dg_wan_config *c);

#endif

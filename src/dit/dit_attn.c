/*
 * dit_attn.c: the DiT engine's self-attention entry point: capture hook, then dense, or a sparse
 * policy in the closed loop as runs of policy_run.h, one per (pass, layer, head) (dit_attn.h).
 * The policy's backend is the op table's own kind: the CPU backend for the CPU table, the GPU
 * backend for the GPU table, which loads Q/K/V from the table's device buffers (load_device) and
 * writes the heads' outputs into a buffer of it (output_device), merged after (from_heads); where
 * the table has bf16 Q/K/V and a bf16 merged output buffer (its operand buffers), the backend reads
 * those in place and writes each head's output straight into its columns of the merged buffer
 * (load_device_bf16; the GPU backend then also makes the site's sparse attention one launch for all
 * heads). Only policies whose primitives run a host twin on the unit go through host copies. The
 * dense pass of a unit is skipped where no run reads it (dg_policy_run_needs_dense).
 */
#include "dit/dit_attn.h"

#include <limits.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/policy_run.h"
#include "util/util.h"

struct dg_dit_attn {
	dg_wan_ops *ops;
	bool host;           /* the table computes in host memory */
	dg_backend *be;      /* a sparse policy: where it runs; NULL for dense */
	bool host_unit;      /* the GPU backend needs the unit on the host too (needs_host_unit) */
	float *hq, *hk, *hv; /* host copies of q, k, v (heads, n, d): capture on a device, host_unit */
	float *oh;           /* (heads, n, d) in the table: the heads' outputs where the backend cannot
			      * write the merged buffer itself */
	dg_policy policy;
	dg_schedule sched;
	int grid[3], n, d, layers, heads, passes;
	int text;            /* text tokens before the grid's */
	dg_policy_run *runs; /* (passes, layers, heads) */
	dg_attn_capture_fn capture;
	void *capture_user;
	bool offload, offload_log; /* dg_dit_attn_opts */
	bool no_wait;              /* dg_dit_attn_opts */
	dg_offload_stats off_step; /* the offload's totals at the end of the last step */
	dg_dit_attn_stats stats;
};

/* whether the GPU backend's primitives for p run a host twin on the unit's Q/K/V (backend_gpu.c:
 * k-means groups of the non-peer policies, dg_groups_build in gpu_groups; per-query selections other
 * than top-k over tokens, query_select_host). Every peer's metadata runs on the device (the block
 * peers' scores, svg2's k-means, the window; the radial and sta masks come from the shape alone),
 * and so does PISA's first-order term: no host copy for them. */
static bool needs_host_unit(const dg_policy *p)
{
	return !dg_policy_is_peer(p) &&
	       (p->group == DG_GROUP_KMEANS ||
		(p->group == DG_GROUP_QUERY && (p->budget != DG_BUDGET_TOPK || p->kv != DG_KV_TOKEN)));
}

dg_dit_attn *dg_dit_attn_new(dg_wan_ops *ops, const dg_policy *policy, double rho,
			     const dg_schedule *schedule, const int grid[3], int layers, int heads, int d,
			     int passes)
{
	return dg_dit_attn_new_opts(ops, policy, rho, schedule, grid, layers, heads, d, passes, NULL);
}

dg_dit_attn *dg_dit_attn_new_opts(dg_wan_ops *ops, const dg_policy *policy, double rho,
				  const dg_schedule *schedule, const int grid[3], int layers, int heads, int d,
				  int passes, const dg_dit_attn_opts *opts)
{
	/* the tests' checked table (tests/dit/wan_ops_checked.c) takes the device path (host copies, load_device,
	 * output_device) over the CPU backend, so that CPU tests exercise it */
	bool sparse = policy && !policy->dense, host = !strcmp(ops->name, "cpu"),
	     gpu = !strcmp(ops->name, "gpu");
	const double *lrho = opts ? opts->layer_rho : NULL;
	for (int l = 0; sparse && policy->budget == DG_BUDGET_TOPK && l < (lrho ? layers : 1); l++) {
		double r = lrho ? lrho[l] : rho;
		if (!(r > 0 && r <= 1)) {
			dg_error("policy %s: density %g is outside (0, 1]", policy->name, r);
			return NULL;
		}
	}
	int text = opts ? opts->text_tokens : 0;
	int n = text + grid[0] * grid[1] * grid[2];
	dg_backend *be = NULL;
	if (sparse && !(be = gpu ? dg_backend_gpu(n, d) : dg_backend_cpu(n, d)))
		return NULL;
	dg_dit_attn *a = dg_calloc(1, sizeof *a);
	a->ops = ops;
	a->host = host;
	a->be = be;
	a->host_unit = be && !host && needs_host_unit(policy);
	a->no_wait = opts && opts->no_wait;
	if (be && be->phases) { /* start its device-time accounting (the metadata's share): events from
				 * the first call on (a sync alone would start it at the first call's end, and
				 * that call's metadata, an anchor's or a first refresh=step call's, went uncounted) */
		double ph[DG_PHASE_COUNT];
		be->phases(be, ph);
	}
	if (policy)
		a->policy = *policy;
	else
		a->policy.dense = true;
	if (schedule) /* parsed: its anchors resolved (given ones checked by the caller) */
		a->sched = *schedule;
	else
		dg_schedule_parse(NULL, &a->sched);
	memcpy(a->grid, grid, sizeof a->grid);
	a->n = n;
	a->text = text;
	a->d = d;
	a->layers = layers;
	a->heads = heads;
	a->passes = passes;
	if (sparse) {
		size_t units = (size_t)passes * layers * heads;
		a->runs = dg_malloc(units * sizeof *a->runs);
		for (size_t u = 0; u < units; u++) { /* u = (pass, layer, head) */
			dg_policy_run_init(&a->runs[u], &a->policy, lrho ? lrho[u / heads % layers] : rho);
			a->runs[u].untimed = true; /* timed here (site_metadata): no wait a head */
		}
	}
	return a;
}

void dg_dit_attn_set_capture(dg_dit_attn *a, dg_attn_capture_fn fn, void *user)
{
	a->capture = fn;
	a->capture_user = user;
}

void dg_dit_attn_set_offload(dg_dit_attn *a, bool offload, bool log, double pin_bytes)
{
	a->offload = a->be && a->be->park && offload;
	a->offload_log = a->offload && log;
	if (a->offload && a->be->pin_ahead && pin_bytes > 0)
		a->be->pin_ahead(a->be, pin_bytes);
}

void dg_dit_attn_free(dg_dit_attn *a)
{
	if (!a)
		return;
	if (a->be) {
		for (size_t u = 0; u < (size_t)a->passes * a->layers * a->heads; u++)
			dg_policy_run_clear(a->be, &a->runs[u]);
		a->be->destroy(a->be);
	}
	free(a->runs);
	free(a->hq), free(a->hk), free(a->hv);
	if (a->oh)
		a->ops->release(a->ops, a->oh);
	free(a);
}

void dg_dit_attn_get_stats(const dg_dit_attn *a, dg_dit_attn_stats *s) { *s = a->stats; }

/* the device time of the metadata primitives and the sparse attends since the last fold (waits) */
static void fold_phases(dg_dit_attn *a)
{
	double ph[DG_PHASE_COUNT];
	a->be->phases(a->be, ph);
	a->stats.meta_seconds += ph[DG_PHASE_GROUPS] + ph[DG_PHASE_SCORES] + ph[DG_PHASE_SELECT];
	a->stats.attend_seconds += ph[DG_PHASE_ATTEND];
}

void dg_dit_attn_settle(dg_dit_attn *a)
{
	if (a->be && a->be->phases && a->no_wait)
		fold_phases(a);
	a->ops->sync(a->ops);
}

bool dg_dit_attn_passes_agree(const dg_dit_attn *a, int layer)
{
	return !a || (!a->capture && (!a->be || dg_schedule_dense_layer(&a->sched, layer)));
}

bool dg_dit_attn_site_dense(const dg_dit_attn *a, const dg_attn_site *s)
{
	DG_ASSERT(s->layer >= 0 && s->layer < a->layers && s->pass >= 0 && s->pass < a->passes);
	if (a->capture)
		return false;
	const dg_policy_run *runs = a->be ? a->runs + ((size_t)s->pass * a->layers + s->layer) * a->heads : NULL;
	for (int h = 0; runs && h < a->heads; h++) {
		dg_policy_run r = runs[h]; /* planned on a copy: asking changes nothing */
		dg_policy_run_plan(&r, &a->sched, s->step, s->layer);
		if (!r.dense_out || r.make_meta) /* making metadata (a CFG pass may adopt it instead) */
			return false;
	}
	return true;
}

/* --cache-offload: the caches of site (pass, layer)'s runs fetched (or parked) */
static void site_move(dg_dit_attn *a, int pass, int layer, bool park)
{
	int H = a->heads;
	dg_policy_run *runs = a->runs + ((size_t)pass * a->layers + layer) * H;
	dg_bvec **vecs = dg_malloc((size_t)H * sizeof *vecs);
	dg_bsel **sels = dg_malloc((size_t)H * sizeof *sels);
	for (int h = 0; h < H; h++)
		dg_policy_run_caches(&runs[h], &vecs[h], &sels[h]);
	(park ? a->be->park : a->be->fetch)(a->be, H, vecs, sels);
	free(vecs), free(sels);
}

/* the end of a step's last site: the offload's traffic of the step */
static void offload_step(dg_dit_attn *a, int step)
{
	dg_offload_stats t, *o = &a->off_step;
	a->be->offload_stats(a->be, &t);
	if (a->offload_log)
		fprintf(stderr, "cache offload, step %d: %.2f GB up, %.2f GB written back, copy %.3f s, exposed wait "
			"%.3f s, pinning %.2f s exposed\n", step, (t.up_bytes - o->up_bytes) / 1e9, (t.down_bytes - o->down_bytes) / 1e9,
			t.copy_s - o->copy_s, t.wait_s - o->wait_s, t.pin_s - o->pin_s);
	*o = t;
	a->stats.offload = t;
}

/* q, k, v (heads, n, d) of the table's device buffers into the host copies */
static void to_host(dg_dit_attn *a, const float *q, const float *k, const float *v)
{
	size_t all = (size_t)a->heads * a->n * a->d;
	if (!a->hq) {
		a->hq = dg_malloc(all * sizeof(float)), a->hk = dg_malloc(all * sizeof(float));
		a->hv = dg_malloc(all * sizeof(float));
	}
	a->ops->download(a->ops, a->hq, q, all);
	a->ops->download(a->ops, a->hk, k, all);
	a->ops->download(a->ops, a->hv, v, all);
}

/* head h of a site into the backend: from the host copies (host_load), else the table's bf16 copies
 * b16 with its output straight into out16 (in place), else the fp32 buffers q, k, v (heads, n, d);
 * order: the backend first waits for the table's work (a site's first load) */
static void load_head(dg_dit_attn *a, int h, bool host_load, const float *q, const float *k, const float *v,
		      const uint16_t *const b16[3], uint16_t *out16, bool order)
{
	dg_backend *be = a->be;
	size_t hs = (size_t)a->n * a->d;
	if (host_load)
		be->load(be, a->hq + h * hs, a->hk + h * hs, a->hv + h * hs);
	else if (out16)
		be->load_device_bf16(be, q + h * hs, b16[0] + h * hs, b16[1] + h * hs, b16[2] + h * hs, 0,
				     out16 + (size_t)h * a->d, a->heads * a->d, order);
	else
		be->load_device(be, q + h * hs, k + h * hs, v + h * hs);
}

/* the loaded head's metadata (what its run makes at this step); -1 after reporting */
static int site_metadata(dg_dit_attn *a, dg_policy_run *r)
{
	double t0 = dg_now();
	if (dg_policy_run_metadata(a->be, &r, 1, a->grid, a->text))
		return -1;
	if (!a->be->phases)
		a->stats.meta_seconds += dg_now() - t0;
	return 0;
}

int dg_dit_attention(dg_dit_attn *a, const dg_attn_site *s, const float *q, const float *k,
		     const float *v, float *out)
{
	DG_ASSERT(s->layer >= 0 && s->layer < a->layers && s->pass >= 0 && s->pass < a->passes);
	int n = a->n, d = a->d, H = a->heads;
	dg_wan_ops *ops = a->ops;
	/* the site's runs; with nothing but dense outputs, all heads go through the op table */
	dg_policy_run *runs = a->be ? a->runs + ((size_t)s->pass * a->layers + s->layer) * H : NULL;
	bool policy = false;
	/* cfg_meta=shared: the unconditional pass takes the conditional pass's new metadata */
	dg_policy_run *src = runs && s->pass > 0 && a->policy.cfg_meta == DG_CFG_META_SHARED
				     ? a->runs + (size_t)s->layer * H : NULL;
	for (int h = 0; runs && h < H; h++) {
		dg_policy_run_plan(&runs[h], &a->sched, s->step, s->layer);
		if (src)
			dg_policy_run_adopt(&runs[h], &src[h], s->step);
		policy |= !runs[h].dense_out || runs[h].make_meta || runs[h].fresh;
	}
	bool host_copy = !a->host && (a->capture || (policy && a->host_unit));
	if (host_copy)
		to_host(a, q, k, v);
	if (a->capture && a->capture(a->capture_user, s, H, n, d, host_copy ? a->hq : q, host_copy ? a->hk : k,
				     host_copy ? a->hv : v))
		return -1;
	bool wait = !a->no_wait || a->offload;
	if (wait)
		ops->sync(ops); /* the work queued before is not the attention's */
	if (a->offload) { /* this site's caches (fetched at the last site), and the next site's ahead: after
			   * the sync, which waits for every stream, so that their copies overlap this site. The
			   * next site with caches: dense layers have none (and CFG's second pass may skip
			   * layer 0's site, dg_wan_call.reuse_first) */
		int np = s->pass, nl = s->layer;
		do {
			if (++nl == a->layers)
				nl = 0, np = (np + 1) % a->passes;
		} while (dg_schedule_dense_layer(&a->sched, nl) && (np != s->pass || nl != s->layer));
		site_move(a, s->pass, s->layer, false);
		site_move(a, np, nl, false);
	}
	double t0 = dg_now();
	double full = (double)n * n;
	a->stats.calls += H;
	a->stats.full_pairs += H * full;
	if (!policy) {
		ops->attention(ops, q, k, v, H, n, n, d, out);
		a->stats.pairs += H * full;
	}
	size_t hs = (size_t)n * d;
	bool host_load = a->host_unit && !a->host;
	const float *qsrc = host_load ? a->hq : q;
	/* the table's bf16 copies of q, k, v, where it keeps them and the backend reads them (an
	 * operand buffer of the table has no other) */
	const uint16_t *b16[3] = { NULL, NULL, NULL };
	if (policy && !host_load && a->be->load_device_bf16 && ops->bf16) {
		const float *src[3] = { q, k, v };
		for (int t = 0; t < 3; t++)
			b16[t] = ops->bf16(ops, src[t], (size_t)H * hs);
	}
	bool in_place = b16[0] && b16[1] && b16[2];
	/* the heads' outputs: straight into the merged buffer's bf16 storage (in place), else into oh
	 * and merged after */
	uint16_t *out16 = in_place ? ops->bf16(ops, out, (size_t)H * hs) : NULL;
	if (policy && !out16 && !a->oh)
		a->oh = ops->alloc(ops, (size_t)H * hs);
	/* the heads' PCA groupings ahead, all in one go (of the whole sequence: joint attention groups
	 * the video queries alone, so not with a text prefix) */
	if (policy && a->be->prefetch_groups && !a->text) {
		const float **qh = dg_malloc((size_t)H * sizeof *qh);
		const uint16_t **qh16 = dg_malloc((size_t)H * sizeof *qh16);
		int nq = 0;
		for (int h = 0; h < H; h++) {
			dg_policy_run *r = &runs[h];
			if (dg_policy_run_groups_with(&r, 1, DG_GROUP_PCA)) {
				qh16[nq] = in_place ? b16[0] + h * hs : NULL;
				qh[nq++] = qsrc + h * hs;
			}
		}
		if (nq)
			a->be->prefetch_groups(a->be, DG_GROUP_PCA, nq, qh, in_place ? qh16 : NULL,
					       !a->host && !host_load);
		free(qh), free(qh16);
	}
	/* every head's metadata before the first attend, where a head makes some, none needs its dense
	 * pass and a load costs nothing (in place, or on the host): a backend may then make one head's
	 * selection while the next head's scores run (the GPU's block peers) */
	bool ahead = false, no_dense = true;
	for (int h = 0; policy && H > 1 && (out16 || a->host) && h < H; h++) {
		ahead |= runs[h].make_meta;
		no_dense &= !dg_policy_run_needs_dense(&runs[h]);
	}
	ahead &= no_dense;
	for (int h = 0; ahead && h < H; h++) {
		load_head(a, h, host_load, q, k, v, b16, out16, h == 0);
		if (site_metadata(a, &runs[h]))
			return -1;
	}
	for (int h = 0; policy && h < H; h++) {
		dg_backend *be = a->be;
		dg_policy_run *r = &runs[h];
		load_head(a, h, host_load, q, k, v, b16, out16, h == 0 && !ahead);
		if (dg_policy_run_needs_dense(r))
			be->dense(be);
		if (!ahead && site_metadata(a, r))
			return -1;
		dg_policy_out po = dg_policy_run_apply(be, r, s->step, NULL, NULL, false);
		be->output_device(be, po.dense, out16 ? NULL : a->oh + h * hs);
		a->stats.pairs += (double)po.pairs;
		a->stats.sparse_calls += !po.dense;
	}
	if (policy && !out16)
		ops->from_heads(ops, a->oh, n, H, d, out);
	if (policy && a->be->phases && wait)
		fold_phases(a);
	else if (policy && a->be->submit)
		a->be->submit(a->be); /* what it holds back, queued before the op table's later work */
	if (wait)
		ops->sync(ops);
	a->stats.seconds += dg_now() - t0;
	if (policy)
		a->stats.policy_seconds += dg_now() - t0;
	if (a->offload) { /* written back while the rest of the layer runs (the next sync waits for it) */
		site_move(a, s->pass, s->layer, true);
		if (s->pass == a->passes - 1 && s->layer == a->layers - 1)
			offload_step(a, s->step);
	}
	return 0;
}

int dg_dit_attention_direct(dg_dit_attn *a, const dg_attn_site *s, const uint16_t *q, const uint16_t *k,
			    const uint16_t *v, int ldi, uint16_t *o, int ldo)
{
	DG_ASSERT(s->layer >= 0 && s->layer < a->layers && s->pass >= 0 && s->pass < a->passes);
	const int n = a->n, d = a->d, H = a->heads;
	if (!a->be || !a->be->load_device_bf16 || a->host || a->text || a->capture || a->offload)
		return 1;
	dg_policy_run *runs = a->runs + ((size_t)s->pass * a->layers + s->layer) * H;
	for (int h = 0; h < H; h++) {
		dg_policy_run_plan(&runs[h], &a->sched, s->step, s->layer);
		if (!dg_policy_run_plain_reuse(&runs[h]))
			return 1;
	}
	const bool wait = !a->no_wait;
	if (wait)
		a->ops->sync(a->ops);
	const double t0 = dg_now();
	a->stats.calls += H;
	a->stats.full_pairs += H * (double)n * n;
	for (int h = 0; h < H; h++) {
		dg_backend *be = a->be;
		be->load_device_bf16(be, NULL, q + (size_t)h * d, k + (size_t)h * d, v + (size_t)h * d, ldi,
				     o + (size_t)h * d, ldo, h == 0);
		dg_policy_out po = dg_policy_run_apply(be, &runs[h], s->step, NULL, NULL, false);
		be->output_device(be, po.dense, NULL);
		a->stats.pairs += (double)po.pairs;
		a->stats.sparse_calls += !po.dense;
	}
	if (a->be->phases && wait)
		fold_phases(a);
	else if (a->be->submit)
		a->be->submit(a->be);
	if (wait)
		a->ops->sync(a->ops);
	a->stats.seconds += dg_now() - t0;
	a->stats.policy_seconds += dg_now() - t0;
	return 0;
}

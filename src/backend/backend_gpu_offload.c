/*
 * backend_gpu_offload.c: the GPU backend's --cache-offload (backend_gpu.h): cached residuals and key
 * lists parked in pinned host memory on a copy stream and fetched back before use, with the copy
 * times; the host memory pinned ahead on threads of its own (pin_pool) while the dense steps run.
 * Built only with CUDA (DG_HAVE_CUDA).
 */
#include "backend/backend_gpu.h"

#ifdef DG_HAVE_CUDA

/* ---- the pin pool (backend_gpu.h) ------------------------------------------------------------- */

/* one of the pool's threads: chunks in order until none is left (or the pool stops) */
static void *pin_worker(void *arg)
{
	gpu *g = arg;
	pin_pool *pp = &g->off.pool;
	const bool dev = cudaSetDevice(pp->device) == cudaSuccess;
	for (;;) {
		pthread_mutex_lock(&pp->mu);
		const int i = pp->stop || pp->next == pp->n ? -1 : pp->next++;
		pthread_mutex_unlock(&pp->mu);
		if (i < 0)
			break;
		char *p = dev ? aligned_alloc(4096, pp->chunk) : NULL;
		if (p) {
			/* the pages faulted in here, by this thread (the pool's threads in parallel), so that
			 * the driver's call only locks them */
			for (size_t o = 0; o < pp->chunk; o += 4096)
				p[o] = 0;
			if (cudaHostRegister(p, pp->chunk, cudaHostRegisterDefault) != cudaSuccess) {
				(void)cudaGetLastError();
				free(p);
				p = NULL;
			}
		}
		pthread_mutex_lock(&pp->mu);
		pp->at[i] = p;
		pp->state[i] = p ? 1 : -1;
		if (p)
			pp->pinned += pp->chunk;
		int done = 0;
		for (int j = 0; j < pp->n; j++)
			done += pp->state[j] != 0;
		if (done == pp->n)
			pp->done_s = dg_now() - pp->t0;
		pthread_cond_broadcast(&pp->cv);
		pthread_mutex_unlock(&pp->mu);
	}
	return NULL;
}

void gb_pin_ahead(dg_backend *be, double bytes)
{
	gpu *g = be->impl;
	pin_pool *pp = &g->off.pool;
	if (pp->n || !(bytes > 0))
		return;
	/* the plan's estimate and a margin: slices do not cross chunks */
	const size_t want = (size_t)(bytes * 1.05) + 1, page = 4096;
	pp->chunk = want < PIN_CHUNK ? (want + page - 1) / page * page : PIN_CHUNK;
	pp->n = (int)((want + pp->chunk - 1) / pp->chunk);
	pp->at = dg_calloc((size_t)pp->n, sizeof *pp->at);
	pp->state = dg_calloc((size_t)pp->n, 1);
	CUDA_CHECK(cudaGetDevice(&pp->device));
	pthread_mutex_init(&pp->mu, NULL);
	pthread_cond_init(&pp->cv, NULL);
	pp->t0 = dg_now();
	for (pp->nth = 0; pp->nth < PIN_THREADS && pp->nth < pp->n; pp->nth++)
		if (pthread_create(&pp->th[pp->nth], NULL, pin_worker, g))
			break;
	if (!pp->nth) /* no thread: park pins on its own, as without the pool */
		memset(pp->state, -1, (size_t)pp->n);
}

/* a pinned slice of at least bytes from the pool (a freed one first, else carved from the chunks in
 * order, waiting for one still being pinned), its capacity in *cap; NULL: the pool has none */
static void *pool_take(gpu *g, size_t bytes, size_t *cap)
{
	pin_pool *pp = &g->off.pool;
	if (!pp->n)
		return NULL;
	const size_t want = bytes ? (bytes + 255) & ~(size_t)255 : 256;
	void *p = NULL;
	pthread_mutex_lock(&pp->mu);
	int best = -1;
	for (int i = 0; i < pp->nfree; i++)
		if (pp->free_cap[i] >= want && (best < 0 || pp->free_cap[i] < pp->free_cap[best]))
			best = i;
	if (best >= 0) {
		p = pp->free_at[best];
		*cap = pp->free_cap[best];
		pp->nfree--;
		pp->free_at[best] = pp->free_at[pp->nfree];
		pp->free_cap[best] = pp->free_cap[pp->nfree];
	}
	while (!p && want <= pp->chunk && pp->cur < pp->n) {
		if (pp->state[pp->cur] == 0) {
			const double t0 = dg_now();
			pthread_cond_wait(&pp->cv, &pp->mu);
			g->off.st.pin_s += dg_now() - t0;
		} else if (pp->state[pp->cur] == 1 && pp->used + want <= pp->chunk) {
			p = pp->at[pp->cur] + pp->used;
			pp->used += want;
			*cap = want;
		} else {
			pp->cur++;
			pp->used = 0;
		}
	}
	pthread_mutex_unlock(&pp->mu);
	return p;
}

/* a slice back to the pool (the copy stream is done with it) */
static void pool_give(gpu *g, void *p, size_t cap)
{
	pin_pool *pp = &g->off.pool;
	pthread_mutex_lock(&pp->mu);
	if (pp->nfree == pp->free_max) {
		pp->free_max = pp->free_max ? 2 * pp->free_max : 256;
		pp->free_at = dg_realloc(pp->free_at, (size_t)pp->free_max * sizeof *pp->free_at);
		pp->free_cap = dg_realloc(pp->free_cap, (size_t)pp->free_max * sizeof *pp->free_cap);
	}
	pp->free_at[pp->nfree] = p;
	pp->free_cap[pp->nfree++] = cap;
	pthread_mutex_unlock(&pp->mu);
}

/* the pool's threads stopped and its chunks unregistered and freed (after every handle's unpin) */
void gb_pool_free(gpu *g)
{
	pin_pool *pp = &g->off.pool;
	if (!pp->n)
		return;
	pthread_mutex_lock(&pp->mu);
	pp->stop = true;
	pthread_mutex_unlock(&pp->mu);
	for (int i = 0; i < pp->nth; i++)
		pthread_join(pp->th[i], NULL);
	for (int i = 0; i < pp->n; i++)
		if (pp->at[i]) {
			CUDA_CHECK(cudaHostUnregister(pp->at[i]));
			free(pp->at[i]);
		}
	free(pp->at), free(pp->state), free(pp->free_at), free(pp->free_cap);
	pthread_mutex_destroy(&pp->mu);
	pthread_cond_destroy(&pp->cv);
	memset(pp, 0, sizeof *pp);
}

/* ---- parking and fetching --------------------------------------------------------------------- */

static void off_init(gpu *g)
{
	if (g->off.on)
		return;
	g->off.on = true;
	CUDA_CHECK(cudaStreamCreateWithFlags(&g->off.copy, cudaStreamNonBlocking));
	CUDA_CHECK(cudaEventCreateWithFlags(&g->off.main, cudaEventDisableTiming));
	for (int i = 0; i < OFF_RING; i++)
		CUDA_CHECK(cudaEventCreateWithFlags(&g->off.batch[i], cudaEventDisableTiming));
	for (int i = 0; i < 2 * OFF_PAIRS; i++)
		CUDA_CHECK(cudaEventCreate(&g->off.pev[i]));
}

/* the timed pairs so far into the totals (waits for them) */
void gb_off_collect(gpu *g)
{
	for (int i = 0; i < g->off.np; i++) {
		float ms;
		CUDA_CHECK(cudaEventSynchronize(g->off.pev[2 * i + 1]));
		CUDA_CHECK(cudaEventElapsedTime(&ms, g->off.pev[2 * i], g->off.pev[2 * i + 1]));
		*(g->off.pwait[i] ? &g->off.st.wait_s : &g->off.st.copy_s) += ms / 1e3;
	}
	g->off.np = 0;
}

/* an event pair around work on st: the copy stream's busy time, or (wait) a compute-stream wait */
static void pair_begin(gpu *g, cudaStream_t st)
{
	if (g->off.np == OFF_PAIRS)
		gb_off_collect(g);
	CUDA_CHECK(cudaEventRecord(g->off.pev[2 * g->off.np], st));
}

static void pair_end(gpu *g, cudaStream_t st, bool wait)
{
	CUDA_CHECK(cudaEventRecord(g->off.pev[2 * g->off.np + 1], st));
	g->off.pwait[g->off.np++] = wait;
}

/* the compute stream waits for the fetch that brings pk's device copy, if it has not yet */
void gb_settle(gpu *g, parking *pk)
{
	if (pk->seq <= g->off.waited)
		return;
	pair_begin(g, g->stream);
	CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->off.batch[pk->seq % OFF_RING], 0));
	pair_end(g, g->stream, true);
	g->off.waited = pk->seq;
}

/* the pinned copy goes (the copy stream may be writing it): back to the pool, or freed */
void gb_unpin(gpu *g, parking *pk)
{
	if (!pk->host)
		return;
	CUDA_CHECK(cudaStreamSynchronize(g->off.copy));
	if (pk->cap)
		pool_give(g, pk->host, pk->cap);
	else
		CUDA_CHECK(cudaFreeHost(pk->host));
	pk->host = NULL;
	pk->bytes = pk->cap = 0;
}

/* the bytes of a selection's storage (its lists, or its bitmaps of n keys) */
static size_t sel_bytes(gpu *g, dg_bsel *s, int n)
{
	return s->compact ? (size_t)s->ngroups * dg_bitmap_words(n) * 4 : (size_t)gb_sel_hoff(g, s)[s->ngroups] * 4;
}

static void **sel_dev(dg_bsel *s) { return s->compact ? (void **)&s->bits : (void **)&s->idx; }

/* a parked handle's bytes onto the device on the copy stream, as part of fetch batch off.seq + 1 */
static void fetch_one(gpu *g, parking *pk, void **dev, bool *any)
{
	if (!pk->parked)
		return;
	if (!*any)
		pair_begin(g, g->off.copy);
	*any = true;
	*dev = gb_dmalloc_on(g->off.copy, pk->bytes);
	CUDA_CHECK(cudaMemcpyAsync(*dev, pk->host, pk->bytes, cudaMemcpyHostToDevice, g->off.copy));
	pk->parked = false;
	pk->seq = g->off.seq + 1;
	g->off.st.up_bytes += (double)pk->bytes;
}

static void fetch_end(gpu *g, bool any)
{
	if (!any)
		return;
	g->off.seq++;
	CUDA_CHECK(cudaEventRecord(g->off.batch[g->off.seq % OFF_RING], g->off.copy));
	pair_end(g, g->off.copy, false);
}

void gb_fetch(dg_backend *be, int count, dg_bvec *const *vecs, dg_bsel *const *sels)
{
	gpu *g = be->impl;
	off_init(g);
	bool any = false;
	for (int i = 0; i < count; i++) {
		if (vecs && vecs[i])
			fetch_one(g, &vecs[i]->pk, &vecs[i]->x, &any);
		if (sels && sels[i])
			fetch_one(g, &sels[i]->pk, sel_dev(sels[i]), &any);
	}
	fetch_end(g, any);
}

/* usable on the compute stream: fetched now if parked (exposed), and waited for */
void gb_vec_resident(dg_backend *be, dg_bvec *v)
{
	gpu *g = be->impl;
	bool any = false;
	fetch_one(g, &v->pk, &v->x, &any);
	fetch_end(g, any);
	gb_settle(g, &v->pk);
}

void gb_sel_resident(dg_backend *be, dg_bsel *s)
{
	gpu *g = be->impl;
	bool any = false;
	gb_sel_ready(g, s);
	fetch_one(g, &s->pk, sel_dev(s), &any);
	fetch_end(g, any);
	gb_settle(g, &s->pk);
}

/* written back (if changed or never parked) and released, in the copy stream's order after the
 * compute stream's work so far */
static void park_one(gpu *g, parking *pk, void **dev, size_t bytes, bool *any)
{
	if (pk->parked || !*dev)
		return;
	if (!*any) {
		CUDA_CHECK(cudaEventRecord(g->off.main, g->stream));
		CUDA_CHECK(cudaStreamWaitEvent(g->off.copy, g->off.main, 0));
		pair_begin(g, g->off.copy);
	}
	*any = true;
	if (pk->host && pk->bytes != bytes && !(pk->cap && bytes <= pk->cap))
		gb_unpin(g, pk);
	if (!pk->host) {
		pk->host = pool_take(g, bytes, &pk->cap);
		if (!pk->host) {
			double t0 = dg_now();
			CUDA_CHECK(cudaHostAlloc(&pk->host, bytes ? bytes : 16, cudaHostAllocDefault));
			g->off.st.pin_s += dg_now() - t0;
			g->off.st.pin_own_bytes += (double)bytes;
			pk->cap = 0;
		}
		pk->dirty = true;
	}
	if (pk->bytes != bytes) { /* a new copy, or a pool slice that still holds the new size */
		pk->bytes = bytes;
		pk->dirty = true;
	}
	if (pk->dirty) {
		CUDA_CHECK(cudaMemcpyAsync(pk->host, *dev, bytes, cudaMemcpyDeviceToHost, g->off.copy));
		g->off.st.down_bytes += (double)bytes;
	}
	CUDA_CHECK(cudaFreeAsync(*dev, g->off.copy));
	*dev = NULL;
	pk->dirty = false;
	pk->parked = true;
}

void gb_park(dg_backend *be, int count, dg_bvec *const *vecs, dg_bsel *const *sels)
{
	gpu *g = be->impl;
	off_init(g);
	gb_flush(be); /* a batched launch reads them */
	bool any = false;
	for (int i = 0; i < count; i++) {
		dg_bvec *v = vecs ? vecs[i] : NULL;
		dg_bsel *s = sels ? sels[i] : NULL;
		if (v)
			park_one(g, &v->pk, &v->x, dg_res_bytes(gb_res_code(v->t), be->n, be->d), &any);
		if (s)
			gb_sel_ready(g, s); /* the write-back follows the stream's work */
		if (s && s->bits) /* compacted, or made as bitmaps (the peers') */
			s->compact = true;
		if (s && !s->shared && *sel_dev(s)) /* shared lists: one copy for every site, kept */
			park_one(g, &s->pk, sel_dev(s), sel_bytes(g, s, be->n), &any);
	}
	if (any)
		pair_end(g, g->off.copy, false);
}

void gb_offload_stats(dg_backend *be, dg_offload_stats *st)
{
	gpu *g = be->impl;
	if (g->off.on)
		gb_off_collect(g);
	*st = g->off.st;
	pin_pool *pp = &g->off.pool;
	if (pp->n) {
		pthread_mutex_lock(&pp->mu);
		st->pin_ahead_bytes = (double)pp->pinned;
		st->pin_ahead_s = pp->done_s;
		pthread_mutex_unlock(&pp->mu);
	}
}

#endif

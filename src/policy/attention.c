/*
 * attention.c: CPU dense and sparse attention with an online softmax over key chunks (SGEMM per
 * chunk). The CPU twin of the GPU kernels; see attention.h.
 */
#include "policy/attention.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cblas.h>

#include "util/util.h"

void openblas_set_num_threads(int n); /* OpenBLAS extension */

#define BQ 128 /* queries per block */
#define BK 256 /* keys per chunk */

/* OpenBLAS takes a working buffer (128 MiB of address space in Debian's build) for each SGEMM that
 * runs while others hold theirs, keeps it for later calls, and retries forever when that allocation
 * fails. Taken here once per process, one per OpenMP thread: every thread multiplies in a loop until
 * all have made four products since the last one started, so their calls overlap and OpenBLAS holds
 * as many buffers as dsgap's threads will ever need at once. A call under a memory limit (libdsgap's
 * callers, include/dsgap.h) then finds them taken and gets DSGAP_E_MEMORY from its own allocations
 * instead of hanging in OpenBLAS. Where the buffers do not fit (ulimit -v), each thread's probe of
 * their size, held by all threads at once, fails first and no SGEMM is made: an out-of-memory report
 * naming the buffer, not a hang. */
#define BLAS_BUFFER ((size_t)128 << 20)
static bool blas_ok = true;
static void warm_blas(void)
{
	enum { N = 256, ROUNDS = 4 }; /* N: large enough for OpenBLAS's buffered path */
	int entered = 0, done = 0;
#pragma omp parallel
	{
		int team = omp_get_num_threads();
		float *a = calloc((size_t)N * N, sizeof *a), *c = malloc((size_t)N * N * sizeof *c);
		void *probe = malloc(BLAS_BUFFER + ((size_t)1 << 16));
		if (!probe || !a || !c) {
#pragma omp atomic write
			blas_ok = false;
		}
#pragma omp barrier
		free(probe);
		bool ok;
#pragma omp atomic read
		ok = blas_ok;
		if (ok) {
#pragma omp atomic
			entered++;
			int seen_in = 0, seen_done = 0;
			for (int r = 0; seen_in < team || seen_done < team; r++) {
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, N, 1.0f, a, N, a, N,
					    0.0f, c, N);
				if (seen_in < team) {
#pragma omp atomic read
					seen_in = entered;
					r = -1; /* count rounds from the moment every thread is in */
				} else if (r == ROUNDS) {
#pragma omp atomic
					done++;
				}
#pragma omp atomic read
				seen_done = done;
			}
		}
		free(a), free(c);
	}
}

void dg_attn_init_threads(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	openblas_set_num_threads(1);
	pthread_once(&once, warm_blas);
	if (!blas_ok) {
		char what[96];
		snprintf(what, sizeof what, "OpenBLAS's work buffer of each of %d OpenMP threads (fewer: OMP_NUM_THREADS)",
			 omp_get_max_threads());
		dg_out_of_memory(BLAS_BUFFER, what);
	}
}

/* Per-thread state of one query block. */
typedef struct {
	int d;
	float *s;   /* (BQ, BK) scores, then probabilities */
	float *acc; /* (BQ, d) unnormalised output */
	float *m;   /* (BQ) running max of scale*s */
	float *l;   /* (BQ) running sum of exp(scale*s - m) */
	float *mass; /* (BQ) retained mass against lse_ref */
	float *kc, *vc, *qb; /* gather buffers (BK, d), (BK, d), (BQ, d) */
} block_state;

static void block_state_init(block_state *b, int d)
{
	b->d = d;
	b->s = dg_malloc((size_t)BQ * BK * sizeof(float));
	b->acc = dg_malloc((size_t)BQ * d * sizeof(float));
	b->m = dg_malloc(BQ * sizeof(float));
	b->l = dg_malloc(BQ * sizeof(float));
	b->mass = dg_malloc(BQ * sizeof(float));
	b->kc = dg_malloc((size_t)BK * d * sizeof(float));
	b->vc = dg_malloc((size_t)BK * d * sizeof(float));
	b->qb = dg_malloc((size_t)BQ * d * sizeof(float));
}

static void block_state_free(block_state *b)
{
	free(b->s);
	free(b->acc);
	free(b->m);
	free(b->l);
	free(b->mass);
	free(b->kc);
	free(b->vc);
	free(b->qb);
}

static void block_begin(block_state *b, int bq)
{
	memset(b->acc, 0, (size_t)bq * b->d * sizeof(float));
	for (int i = 0; i < bq; i++) {
		b->m[i] = -INFINITY;
		b->l[i] = 0;
		b->mass[i] = 0;
	}
}

/* One chunk: qb (bq, d) against kc, vc (bk, d). lse_ref (bq) or NULL for the retained mass. vc NULL:
 * the running max and sum only (an LSE pass: no P.V). */
static void block_chunk(block_state *b, const float *qb, int bq, const float *kc, const float *vc,
			int bk, const float *lse_ref)
{
	int d = b->d;
	float scale = 1.0f / sqrtf((float)d);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bq, bk, d, scale, qb, d, kc, d, 0.0f,
		    b->s, bk);
	for (int i = 0; i < bq; i++) {
		float *s = b->s + (size_t)i * bk, mx = b->m[i];
		if (lse_ref) {
			float ms = 0;
			for (int j = 0; j < bk; j++)
				ms += expf(s[j] - lse_ref[i]);
			b->mass[i] += ms;
		}
		for (int j = 0; j < bk; j++)
			mx = s[j] > mx ? s[j] : mx;
		float alpha = expf(b->m[i] - mx), sum = 0;
		for (int j = 0; j < bk; j++) {
			s[j] = expf(s[j] - mx);
			sum += s[j];
		}
		b->l[i] = b->l[i] * alpha + sum;
		b->m[i] = mx;
		if (alpha != 1.0f && vc)
			for (int c = 0; c < d; c++)
				b->acc[(size_t)i * d + c] *= alpha;
	}
	if (vc)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bq, d, bk, 1.0f, b->s, bk, vc, d, 1.0f,
			    b->acc, d);
}

void dg_attn_dense(const float *q, const float *k, const float *v, int nq, int nk, int d, float *o,
		   float *lse)
{
	int nblocks = (nq + BQ - 1) / BQ;
#pragma omp parallel
	{
		block_state b;
		block_state_init(&b, d);
#pragma omp for schedule(dynamic)
		for (int blk = 0; blk < nblocks; blk++) {
			int q0 = blk * BQ, bq = nq - q0 < BQ ? nq - q0 : BQ;
			block_begin(&b, bq);
			for (int k0 = 0; k0 < nk; k0 += BK) {
				int bk = nk - k0 < BK ? nk - k0 : BK;
				block_chunk(&b, q + (size_t)q0 * d, bq, k + (size_t)k0 * d,
					    o ? v + (size_t)k0 * d : NULL, bk, NULL);
			}
			for (int i = 0; i < bq; i++) {
				float inv = 1.0f / b.l[i];
				for (int c = 0; o && c < d; c++)
					o[(size_t)(q0 + i) * d + c] = b.acc[(size_t)i * d + c] * inv;
				if (lse)
					lse[q0 + i] = b.m[i] + logf(b.l[i]);
			}
		}
		block_state_free(&b);
	}
}

void dg_attn_rows(const float *q, const float *k, int n, int d, dg_attn_row_fn fn, void *ctx)
{
	float scale = 1.0f / sqrtf((float)d);
	/* query rows per SGEMM: 32, fewer where (rows, n) scores a thread would pass 32 MB */
	int rows = (int)((8u << 20) / (unsigned)n);
	rows = rows < 1 ? 1 : rows > 32 ? 32 : rows;
	int nblocks = (n + rows - 1) / rows;
#pragma omp parallel
	{
		float *S = dg_malloc((size_t)rows * n * sizeof(float)), *p = dg_malloc((size_t)n * sizeof(float));
#pragma omp for schedule(dynamic)
		for (int blk = 0; blk < nblocks; blk++) {
			int q0 = blk * rows, bq = n - q0 < rows ? n - q0 : rows;
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bq, n, d, scale, q + (size_t)q0 * d, d, k,
				    d, 0.0f, S, n);
			for (int i = 0; i < bq; i++) {
				float *s = S + (size_t)i * n, mx = -INFINITY;
				for (int j = 0; j < n; j++)
					mx = s[j] > mx ? s[j] : mx;
				double l = 0;
				for (int j = 0; j < n; j++) {
					p[j] = expf(s[j] - mx);
					l += p[j];
				}
				float inv = (float)(1.0 / l), lnl = (float)log(l);
				for (int j = 0; j < n; j++) {
					p[j] *= inv;
					s[j] = (s[j] - mx) - lnl; /* log p */
				}
				fn(ctx, q0 + i, p, s);
			}
		}
		free(S), free(p);
	}
}

/* A single query against its key list, two passes (scores, then weighted sum): the per-query
 * oracle's path, where a chunked SGEMM of one row would only add gather traffic. */
static void single_query(const float *qi, const float *k, const float *v, int d, const int *keys,
			 int nkeys, float *scores, float *out, float lse_ref, float *mass)
{
	float scale = 1.0f / sqrtf((float)d), mx = -INFINITY;
	for (int t = 0; t < nkeys; t++) {
		const float *kj = k + (size_t)keys[t] * d;
		float dot = 0;
#pragma omp simd reduction(+ : dot)
		for (int c = 0; c < d; c++)
			dot += qi[c] * kj[c];
		scores[t] = dot * scale;
		mx = scores[t] > mx ? scores[t] : mx;
	}
	float sum = 0, ms = 0;
	for (int c = 0; c < d; c++)
		out[c] = 0;
	for (int t = 0; t < nkeys; t++) {
		if (mass)
			ms += expf(scores[t] - lse_ref);
		float p = expf(scores[t] - mx);
		sum += p;
		const float *vj = v + (size_t)keys[t] * d;
#pragma omp simd
		for (int c = 0; c < d; c++)
			out[c] += p * vj[c];
	}
	for (int c = 0; c < d; c++)
		out[c] /= sum;
	if (mass)
		*mass = ms;
}

int64_t dg_attn_sparse(const float *q, const float *k, const float *v, int n, int d,
		       const dg_groups *g, const dg_selection *sel, const float *residual,
		       const float *lse_ref, float *o, float *mass)
{
	DG_ASSERT(sel->ngroups == g->ngroups);
	int64_t pairs = 0;
#pragma omp parallel reduction(+ : pairs)
	{
		block_state b;
		block_state_init(&b, d);
		float *scores = dg_malloc((size_t)n * sizeof(float));
		float lref[BQ];
#pragma omp for schedule(dynamic, 4)
		for (int grp = 0; grp < g->ngroups; grp++) {
			const int *keys = sel->idx + sel->off[grp];
			int nkeys = (int)(sel->off[grp + 1] - sel->off[grp]);
			for (int p0 = g->off[grp]; p0 < g->off[grp + 1]; p0 += BQ) {
				int bq = g->off[grp + 1] - p0 < BQ ? g->off[grp + 1] - p0 : BQ;
				const int *qi = g->perm + p0;
				pairs += (int64_t)bq * nkeys;
				if (bq <= 2) {
					for (int i = 0; i < bq; i++)
						single_query(q + (size_t)qi[i] * d, k, v, d, keys, nkeys, scores,
							     o + (size_t)qi[i] * d, lse_ref ? lse_ref[qi[i]] : 0,
							     mass ? &mass[qi[i]] : NULL);
				} else {
					for (int i = 0; i < bq; i++) {
						memcpy(b.qb + (size_t)i * d, q + (size_t)qi[i] * d, d * sizeof(float));
						lref[i] = lse_ref ? lse_ref[qi[i]] : 0;
					}
					block_begin(&b, bq);
					for (int t0 = 0; t0 < nkeys; t0 += BK) {
						int bk = nkeys - t0 < BK ? nkeys - t0 : BK;
						for (int t = 0; t < bk; t++) {
							memcpy(b.kc + (size_t)t * d, k + (size_t)keys[t0 + t] * d, d * sizeof(float));
							memcpy(b.vc + (size_t)t * d, v + (size_t)keys[t0 + t] * d, d * sizeof(float));
						}
						block_chunk(&b, b.qb, bq, b.kc, b.vc, bk, lse_ref ? lref : NULL);
					}
					for (int i = 0; i < bq; i++) {
						float inv = 1.0f / b.l[i], *oi = o + (size_t)qi[i] * d;
						for (int c = 0; c < d; c++)
							oi[c] = b.acc[(size_t)i * d + c] * inv;
						if (mass)
							mass[qi[i]] = b.mass[i];
					}
				}
				if (residual)
					for (int i = 0; i < bq; i++)
						for (int c = 0; c < d; c++)
							o[(size_t)qi[i] * d + c] += residual[(size_t)qi[i] * d + c];
			}
		}
		free(scores);
		block_state_free(&b);
	}
	return pairs;
}

/*
 * pca_group.cuh: the PCA grouping's kernels and its level-by-level pipeline (not a public header),
 * shared by pca_group.cu (the promoted launcher, dg_pca_groups: pca_run<D>, chunks of 8 blocks, 8
 * lanes a projection, node sorts in shared memory up to 4096 rows, no Gram reduction at one-chunk
 * levels) and dev/kernels/pca_group_v.cu (the other numbered versions, on pca_group_lab.cuh's
 * switched copies of the Gram stage, the projection and the pipeline).
 * The algorithm and its layouts: pca_group.cu.
 */
#ifndef DG_PCA_GROUP_CUH
#define DG_PCA_GROUP_CUH

#include "meta_common.cuh"

#include <cub/cub.cuh>

#include <stdlib.h>
#include <string.h>

namespace {

#define BS 128 /* queries per block / leaf */

struct StartVec {
	float v[128];
};

/* per-level tables (device ints), see the launcher; heads index blockIdx.y and share them */
struct Level {
	int nsplit;         /* nodes split at this level */
	int nchunks;        /* chunks of the split nodes' blocks */
	const int *cb0;     /* (nchunks) first block of each chunk */
	const int *cb1;     /* (nchunks) end block */
	const int *slo;     /* (nsplit) first block of each split node */
	const int *shi;     /* (nsplit) end block */
	const int *sc0;     /* (nsplit) first chunk of each split node */
	const int *sc1;     /* (nsplit) end chunk */
	const int *bnode;   /* (nb) node index (all nodes of the level, in order) of each block */
	const int *bslot;   /* (nb) split-node slot of each block or -1 */
};

__global__ void init_identity(int32_t *perm, int32_t *goff, int n, int nb, int heads)
{
	const size_t total = (size_t)n * heads;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
		perm[i] = (int32_t)(i % n);
	for (int k = blockIdx.x * blockDim.x + threadIdx.x; k <= nb; k += gridDim.x * blockDim.x)
		goff[k] = k * BS < n ? k * BS : n;
}

/*
 * Gram partials: partial[h][c] (D, D) = sum over the chunk's blocks of X_b^T X_b as MMAs (bf16 in,
 * fp32 accumulate; exact products) with M = N = D and K = the block's rows, both operands read from
 * X_b^T (D, XT_LD) bf16 in shared memory (A row-major D x rows, B = X_b column-major); rows past the
 * block's end are zero. Warp w computes output rows 16w..16w+15 (at D = 64 warps 4-7 only stage).
 * psum[h][c] (D) = sum of x, in row order. 256 threads, grid (chunks, heads).
 */
#define XT_LD (BS + 8) /* padded row: fragment loads of 8 rows x 4 words hit 32 banks */

/* X_b^T (D, XT_LD) of block rows [r0, r0 + rows) into xt, zeros past rows: warp w stages the 16-byte
 * column vectors w * D / 64 .. of rows lane + 32 i (lane = row: its 4 perm entries, then all the
 * thread's D/8 vectors, then their stores: consecutive lanes, consecutive halfwords) */
template <int D>
__device__ __forceinline__ void stage_xt(const uint16_t *q, const int32_t *perm, int r0, int rows, uint16_t *xt)
{
	const int tid = threadIdx.x;
	constexpr int VPW = D / 64, RG = BS / 32; /* vectors of a row per warp; row groups */
	const int warp = tid >> 5, lane = tid & 31;
	int idx[RG];
	uint4 val[RG][VPW];
#pragma unroll
	for (int i = 0; i < RG; i++)
		idx[i] = lane + 32 * i < rows ? perm[r0 + lane + 32 * i] : -1;
#pragma unroll
	for (int i = 0; i < RG; i++)
#pragma unroll
		for (int v = 0; v < VPW; v++)
			val[i][v] = idx[i] >= 0 ? __ldg(reinterpret_cast<const uint4 *>(q + (size_t)idx[i] * D) +
							warp * VPW + v)
						: make_uint4(0, 0, 0, 0);
#pragma unroll
	for (int i = 0; i < RG; i++)
#pragma unroll
		for (int v = 0; v < VPW; v++) {
			const uint32_t w[4] = { val[i][v].x, val[i][v].y, val[i][v].z, val[i][v].w };
			uint16_t *col = xt + (size_t)(warp * VPW + v) * 8 * XT_LD + lane + 32 * i;
#pragma unroll
			for (int j = 0; j < 8; j++)
				col[j * XT_LD] = (uint16_t)(w[j >> 1] >> (16 * (j & 1)));
		}
}

template <int D>
__global__ void __launch_bounds__(256) gram_partial_mma(const uint16_t *q, const int32_t *perm, int n, Level L,
							float *partial, float *psum)
{
	__shared__ __align__(16) uint16_t xt[D * XT_LD];
	const int c = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
	q += (size_t)h * n * D;
	perm += (size_t)h * n;
	const int warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
	constexpr int NT = D / 8; /* n-tiles of 8 output columns */
	float acc[NT][4], s = 0.f;
#pragma unroll
	for (int j = 0; j < NT; j++)
		acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
	const uint16_t *ra = xt + (warp * 16 + gq) * XT_LD + 2 * tq, *rb = ra + 8 * XT_LD;
	for (int b = L.cb0[c]; b < L.cb1[c]; b++) {
		const int r0 = b * BS, rows = min(BS, n - r0);
		__syncthreads(); /* the last block's fragments are read */
		stage_xt<D>(q, perm, r0, rows, xt);
		__syncthreads();
		if (tid < D)
			for (int r = 0; r < rows; r++)
				s += bf2f(xt[tid * XT_LD + r]);
		if (warp * 16 >= D)
			continue;
#pragma unroll 2
		for (int k0 = 0; k0 < BS; k0 += 16) {
			const uint32_t a[4] = { *(const uint32_t *)(ra + k0), *(const uint32_t *)(rb + k0),
						*(const uint32_t *)(ra + k0 + 8), *(const uint32_t *)(rb + k0 + 8) };
#pragma unroll
			for (int j = 0; j < NT; j++) {
				const uint16_t *bc = xt + (8 * j + gq) * XT_LD + k0 + 2 * tq;
				mma_16816(acc[j], a, *(const uint32_t *)bc, *(const uint32_t *)(bc + 8));
			}
		}
	}
	const size_t slot = (size_t)h * L.nchunks + c;
	if (tid < D)
		psum[slot * D + tid] = s;
	if (warp * 16 >= D)
		return;
	float *out = partial + slot * D * D;
	const int row = warp * 16 + gq;
#pragma unroll
	for (int j = 0; j < NT; j++) {
		const int col = 8 * j + 2 * tq;
		*(float2 *)(out + (size_t)row * D + col) = make_float2(acc[j][0], acc[j][1]);
		*(float2 *)(out + (size_t)(row + 8) * D + col) = make_float2(acc[j][2], acc[j][3]);
	}
}

/* G[h][slot] = sum over the node's chunks of partial[h][c], in chunk order */
template <int D>
__global__ void gram_reduce(Level L, const float *partial, float *G)
{
	const int slot = blockIdx.x, e = blockIdx.y * 256 + threadIdx.x, h = blockIdx.z;
	if (e >= D * D)
		return;
	const int lo = L.sc0[slot], hi = L.sc1[slot];
	const float *p = partial + (size_t)h * L.nchunks * D * D;
	float s = 0.f;
#pragma unroll 16
	for (int c = lo; c < hi; c++) /* loads batched ahead of the in-order adds */
		s += p[(size_t)c * D * D + e];
	G[((size_t)h * L.nsplit + slot) * D * D + e] = s;
}

/* centre the node's Gram matrix and run 4 power iterations; v[h][slot] (D). D threads. direct: every
 * split node of the level is one chunk, whose partial is the Gram matrix (gram_reduce not run: G is
 * the partials) */
template <int D>
__global__ void __launch_bounds__(D) power_iter(Level L, int n, const float *G, const float *psum, StartVec start,
						float *V, bool direct)
{
	extern __shared__ float gs[]; /* (D, D+1) */
	__shared__ float s[D], v[D], w[D];
	__shared__ double red[D / 32];
	const int slot = blockIdx.x, h = blockIdx.y, a = threadIdx.x;
	const int lo = L.slo[slot], hi = L.shi[slot];
	const int cnt = min(hi * BS, n) - lo * BS;
	const float *ps = psum + (size_t)h * L.nchunks * D;
	float sa = 0.f;
#pragma unroll 16
	for (int c = L.sc0[slot]; c < L.sc1[slot]; c++)
		sa += ps[(size_t)c * D + a];
	s[a] = sa;
	v[a] = start.v[a];
	__syncthreads();
	const size_t node = (size_t)h * L.nsplit + slot;
	const float *g = G + (direct ? (size_t)h * L.nchunks + L.sc0[slot] : node) * D * D;
	const float fc = (float)cnt;
	/* the upper triangle is the Gram matrix (as on the CPU): rows read whole (coalesced), then the
	 * lower triangle mirrored from the upper one in shared memory, then centred */
#pragma unroll 8
	for (int e = a; e < D * D; e += D) /* loads batched: this loop is latency-bound otherwise */
		gs[(e / D) * (D + 1) + e % D] = g[e];
	__syncthreads();
	for (int r = a + 1; r < D; r++)
		gs[r * (D + 1) + a] = gs[a * (D + 1) + r];
	__syncthreads();
	for (int r = 0; r < D; r++) {
		const int lo2 = min(r, a), hi2 = max(r, a);
		gs[r * (D + 1) + a] -= s[lo2] * s[hi2] / fc;
	}
	__syncthreads();
	for (int it = 0; it < 4; it++) {
		float acc = 0.f;
		for (int b = 0; b < D; b++)
			acc = fmaf(gs[a * (D + 1) + b], v[b], acc);
		w[a] = acc;
		double sq = (double)acc * acc;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1)
			sq += __shfl_xor_sync(0xffffffffu, sq, o);
		if ((a & 31) == 0)
			red[a >> 5] = sq;
		__syncthreads();
		double tot = 0;
		for (int i = 0; i < D / 32; i++)
			tot += red[i];
		const float norm = (float)sqrt(tot);
		__syncthreads();
		if (!(norm > 0))
			break; /* all queries equal: keep the vector */
		v[a] = w[a] / norm;
		__syncthreads();
	}
	V[node * D + a] = v[a];
}

/* sort keys (heads, n): head | node | orderable(projection) | query (split nodes), head | node | row |
 * query (the others); hshift: where the head bits start (64: none). PCA_PROJ_LANES (8) lanes a row: lane
 * l's D/8 columns l D/8 .. as 16-byte loads, summed in column order, then the butterfly over the 8
 * lanes */
enum { PCA_PROJ_LANES = 8 };
template <int D>
__global__ void project(const uint16_t *q, const int32_t *perm, int n, Level L, const float *V, int ib, int hshift,
			unsigned long long *keys)
{
	constexpr int LANES = PCA_PROJ_LANES;
	const int lane = threadIdx.x % LANES;
	const int r0 = (blockIdx.x * blockDim.x + threadIdx.x) / LANES, h = blockIdx.y;
	/* a warp's rows past n work on row n - 1 (its block, so the warp's branch, is theirs too)
	 * and store nothing: the shuffles see the whole warp */
	const bool live = r0 < n;
	const int r = live ? r0 : n - 1;
	const int b = r / BS, slot = L.bslot[b], qi = perm[(size_t)h * n + r];
	uint32_t mid = (uint32_t)r;
	if (slot >= 0) {
		const uint16_t *x = q + ((size_t)h * n + qi) * D;
		const float *v = V + ((size_t)h * L.nsplit + slot) * D;
		float acc = 0.f;
		constexpr int CPL = D / LANES; /* columns a lane: 16 or 8 */
#pragma unroll
		for (int u = 0; u < CPL / 8; u++) {
			const uint4 w = __ldg(reinterpret_cast<const uint4 *>(x + lane * CPL) + u);
			const uint32_t ws[4] = { w.x, w.y, w.z, w.w };
			const float *vv = v + lane * CPL + 8 * u;
#pragma unroll
			for (int j = 0; j < 8; j++)
				acc = fmaf(__uint_as_float(j & 1 ? ws[j >> 1] & 0xffff0000u : ws[j >> 1] << 16),
					   vv[j], acc);
		}
#pragma unroll
		for (int o = LANES / 2; o > 0; o >>= 1)
			acc += __shfl_xor_sync(0xffffffffu, acc, o, LANES);
		mid = f2key(acc);
	}
	if (lane == 0 && live)
		keys[(size_t)h * n + r] = (hshift < 64 ? (unsigned long long)h << hshift : 0ull) |
					  ((unsigned long long)L.bnode[b] << (32 + ib)) |
					  ((unsigned long long)mid << ib) | (unsigned long long)qi;
}

/* levels whose split nodes hold at most PCA_NS_ROWS rows: one CTA per (split node, head) sorts
 * its keys in shared memory (bitonic, ascending; keys are unique) and writes the node's new order.
 * Dynamic shared memory: 8 bytes a key of the level's largest node, rounded up to a power of two */
#define NS_NT 1024
__global__ void __launch_bounds__(NS_NT) node_sort(const unsigned long long *keys, Level L, int n, int ib,
						   int32_t *perm)
{
	extern __shared__ unsigned long long sk[];
	const int slot = blockIdx.x, tid = threadIdx.x;
	keys += (size_t)blockIdx.y * n;
	perm += (size_t)blockIdx.y * n;
	const int start = L.slo[slot] * BS, end = min(L.shi[slot] * BS, n), cnt = end - start;
	int P2 = 1;
	while (P2 < cnt)
		P2 <<= 1;
	for (int i = tid; i < P2; i += NS_NT)
		sk[i] = i < cnt ? keys[start + i] : ~0ull;
	__syncthreads();
	for (int k = 2; k <= P2; k <<= 1)
		for (int j = k >> 1; j > 0; j >>= 1) {
			for (int i = tid; i < P2; i += NS_NT) {
				const int ixj = i ^ j;
				if (ixj > i) {
					const unsigned long long a = sk[i], b = sk[ixj];
					if ((i & k) == 0 ? a > b : a < b) {
						sk[i] = b;
						sk[ixj] = a;
					}
				}
			}
			__syncthreads();
		}
	const unsigned long long mask = (1ull << ib) - 1;
	for (int i = tid; i < cnt; i += NS_NT)
		perm[start + i] = (int32_t)(sk[i] & mask);
}

/* after the sort of all heads' keys (head bits on top, n keys per head): position p holds head p / n's
 * row p % n, so perm (heads, n) is the keys' low bits in place */
__global__ void extract(const unsigned long long *keys, size_t total, int ib, int32_t *perm)
{
	const unsigned long long mask = (1ull << ib) - 1;
	for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < total; r += (size_t)gridDim.x * blockDim.x)
		perm[r] = (int32_t)(keys[r] & mask);
}

static int bits_for(long long x) /* bits to hold values 0 .. x-1 */
{
	int b = 0;
	while ((1LL << b) < x)
		b++;
	return b;
}

/* the host's plan of the levels (data-independent), exactly as groups.c's loop, chunks of ch blocks */
struct Plan {
	enum { MAXLEV = 64 };
	int nlevels, maxsplit, maxchunks;
	int nsplit[MAXLEV], nchunks[MAXLEV], bits[MAXLEV], maxrows[MAXLEV];
	size_t off[MAXLEV];
	int *tab; /* per level: cb0, cb1 (nchunks), slo, shi, sc0, sc1 (nsplit), bnode, bslot (nb) */
	size_t used;
};

static void plan_levels(int n, int ch, Plan *P)
{
	const int nb = (n + BS - 1) / BS;
	int *lo = (int *)malloc(sizeof(int) * nb), *hi = (int *)malloc(sizeof(int) * nb);
	int *nlo = (int *)malloc(sizeof(int) * nb), *nhi = (int *)malloc(sizeof(int) * nb);
	size_t cap = 4096;
	P->tab = (int *)malloc(sizeof(int) * cap);
	P->used = 0;
	P->nlevels = 0;
	P->maxsplit = P->maxchunks = 1;
	int nodes = 1;
	lo[0] = 0;
	hi[0] = nb;
	for (;;) {
		int nsplit = 0, nchunks = 0, maxrows = 0;
		for (int k = 0; k < nodes; k++)
			if (hi[k] - lo[k] > 1) {
				nsplit++;
				nchunks += (hi[k] - lo[k] + ch - 1) / ch;
				const int rows = (hi[k] * BS < n ? hi[k] * BS : n) - lo[k] * BS;
				maxrows = rows > maxrows ? rows : maxrows;
			}
		if (!nsplit || P->nlevels == Plan::MAXLEV)
			break;
		const size_t need = 2 * (size_t)nchunks + 4 * (size_t)nsplit + 2 * (size_t)nb;
		while (P->used + need > cap) {
			cap *= 2;
			P->tab = (int *)realloc(P->tab, sizeof(int) * cap);
		}
		int *cb0 = P->tab + P->used, *cb1 = cb0 + nchunks, *sl = cb1 + nchunks, *sh = sl + nsplit,
		    *sc0 = sh + nsplit, *sc1 = sc0 + nsplit, *bn = sc1 + nsplit, *bs = bn + nb;
		int next = 0, si = 0, ci = 0;
		for (int k = 0; k < nodes; k++) {
			const int blocks = hi[k] - lo[k];
			for (int b = lo[k]; b < hi[k]; b++) {
				bn[b] = k;
				bs[b] = blocks > 1 ? si : -1;
			}
			if (blocks <= 1) {
				nlo[next] = lo[k];
				nhi[next++] = hi[k];
				continue;
			}
			sl[si] = lo[k];
			sh[si] = hi[k];
			sc0[si] = ci;
			for (int b = lo[k]; b < hi[k]; b += ch) {
				cb0[ci] = b;
				cb1[ci++] = b + ch < hi[k] ? b + ch : hi[k];
			}
			sc1[si++] = ci;
			const int mid = lo[k] + (blocks + 1) / 2;
			nlo[next] = lo[k];
			nhi[next++] = mid;
			nlo[next] = mid;
			nhi[next++] = hi[k];
		}
		const int L = P->nlevels++;
		P->nsplit[L] = nsplit;
		P->nchunks[L] = nchunks;
		P->bits[L] = bits_for(nodes);
		P->maxrows[L] = maxrows;
		P->off[L] = P->used;
		P->maxsplit = nsplit > P->maxsplit ? nsplit : P->maxsplit;
		P->maxchunks = nchunks > P->maxchunks ? nchunks : P->maxchunks;
		P->used += need;
		int *x = lo;
		lo = nlo;
		nlo = x;
		x = hi;
		hi = nhi;
		nhi = x;
		nodes = next;
	}
	free(lo);
	free(hi);
	free(nlo);
	free(nhi);
}

/* the grouping of heads x n queries q (heads, n, D) into perm and goff, on st: chunks of PCA_CHUNK
 * blocks per Gram partial (gram_partial_mma), PCA_PROJ_LANES lanes a projection (project), the levels
 * whose nodes hold at most PCA_NS_ROWS rows sorted node by node (node_sort; the others by one CUB sort
 * of all heads' keys), and the levels whose split nodes are one chunk each without gram_reduce
 * (power_iter reads the partials): 0, or -1 after one line */
enum { PCA_CHUNK = 8, PCA_NS_ROWS = 4096 };
template <int D>
int pca_run(const uint16_t *q, int heads, int n, int32_t *perm, int32_t *goff, cudaStream_t st)
{
	constexpr int ch = PCA_CHUNK, NS_ROWS = PCA_NS_ROWS, PROJ_LANES = PCA_PROJ_LANES;
	const auto gram = gram_partial_mma<D>;
	const size_t gram_smem = 0;
	const int nb = (n + BS - 1) / BS;
	const int ib = bits_for(n) > 0 ? bits_for(n) : 1;
	Plan P;
	plan_levels(n, ch, &P);
	/* key bits: node | projection | query, plus the head on top at the levels sorted by CUB */
	const int hb = bits_for(heads);
	for (int lev = 0; lev < P.nlevels; lev++)
		if (P.bits[lev] + 32 + ib + (P.maxrows[lev] > NS_ROWS ? hb : 0) > 64) {
			free(P.tab);
			DGM_ARG(0, "pca grouping: %d queries x %d heads too many (sort key over 64 bits)", n, heads);
		}
	/* start vector exactly as dg_pca_start (host fp32) */
	StartVec sv;
	{
		float norm = 0;
		for (int i = 0; i < D; i++) {
			sv.v[i] = 1.0f + 0.25f * (float)(i % 3);
			norm += sv.v[i] * sv.v[i];
		}
		const float r = sqrtf(norm);
		for (int i = 0; i < D; i++)
			sv.v[i] /= r;
	}

	/* ---- device scratch */
	const size_t total = (size_t)n * heads;
	size_t sort_bytes = 0;
	if (cub::DeviceRadixSort::SortKeys(NULL, sort_bytes, (unsigned long long *)NULL, (unsigned long long *)NULL,
					   total, 0, 64, st) != cudaSuccess) {
		free(P.tab);
		DGM_ARG(0, "pca grouping: sort size query failed");
	}
	const size_t a_tab = dgm_align((P.used ? P.used : 1) * sizeof(int)),
		     a_part = dgm_align((size_t)heads * P.maxchunks * D * D * 4),
		     a_psum = dgm_align((size_t)heads * P.maxchunks * D * 4),
		     a_G = dgm_align((size_t)heads * P.maxsplit * D * D * 4),
		     a_V = dgm_align((size_t)heads * P.maxsplit * D * 4), a_keys = dgm_align(total * 8),
		     a_sort = dgm_align(sort_bytes);
	char *base = NULL;
	cudaError_t e = cudaMallocAsync((void **)&base, a_tab + a_part + a_psum + a_G + a_V + 2 * a_keys + a_sort, st);
	if (e == cudaSuccess && P.used)
		e = cudaMemcpyAsync(base, P.tab, P.used * sizeof(int), cudaMemcpyHostToDevice, st);
	free(P.tab); /* pageable: cudaMemcpyAsync has staged it on return */
	DGM_CUDA(e);
	char *p = base;
	const int *dtab = (const int *)p;
	p += a_tab;
	float *partial = (float *)p;
	p += a_part;
	float *psum = (float *)p;
	p += a_psum;
	float *G = (float *)p;
	p += a_G;
	float *V = (float *)p;
	p += a_V;
	unsigned long long *k0 = (unsigned long long *)p, *k1 = (unsigned long long *)(p + a_keys);
	p += 2 * a_keys;
	void *tmp = p;

	const size_t smem_pow = (size_t)D * (D + 1) * 4;
	static_assert(NS_ROWS >= 1 && (NS_ROWS & (NS_ROWS - 1)) == 0 && NS_ROWS <= 16384, "node sorts of 2^k <= 16384 keys");
	if (dgm_dyn_smem((const void *)gram, gram_smem) || dgm_dyn_smem((const void *)power_iter<D>, smem_pow) ||
	    dgm_dyn_smem((const void *)node_sort, (size_t)NS_ROWS * 8))
		DGM_ARG(0, "pca grouping: cannot get shared memory");
	init_identity<<<(unsigned)((total + 255) / 256), 256, 0, st>>>(perm, goff, n, nb, heads);
	DGM_LAUNCHED();
	for (int lev = 0; lev < P.nlevels; lev++) {
		Level L;
		L.nsplit = P.nsplit[lev];
		L.nchunks = P.nchunks[lev];
		L.cb0 = dtab + P.off[lev];
		L.cb1 = L.cb0 + L.nchunks;
		L.slo = L.cb1 + L.nchunks;
		L.shi = L.slo + L.nsplit;
		L.sc0 = L.shi + L.nsplit;
		L.sc1 = L.sc0 + L.nsplit;
		L.bnode = L.sc1 + L.nsplit;
		L.bslot = L.bnode + nb;
		const bool by_node = P.maxrows[lev] <= NS_ROWS;
		const int hshift = by_node ? 64 : P.bits[lev] + 32 + ib;
		gram<<<dim3(L.nchunks, heads), 256, gram_smem, st>>>(q, perm, n, L, partial, psum);
		const bool direct = P.maxrows[lev] <= ch * BS; /* every split node one chunk */
		if (!direct)
			gram_reduce<D><<<dim3(L.nsplit, (D * D + 255) / 256, heads), 256, 0, st>>>(L, partial, G);
		power_iter<D><<<dim3(L.nsplit, heads), D, smem_pow, st>>>(L, n, direct ? partial : G, psum, sv, V, direct);
		project<D><<<dim3((unsigned)(((size_t)n * PROJ_LANES + 255) / 256), heads), 256, 0, st>>>(
			q, perm, n, L, V, ib, hshift, k0);
		DGM_LAUNCHED();
		if (by_node) {
			size_t p2 = 1;
			while (p2 < (size_t)P.maxrows[lev])
				p2 <<= 1;
			node_sort<<<dim3(L.nsplit, heads), NS_NT, p2 * 8, st>>>(k0, L, n, ib, perm);
		} else {
			size_t sb = sort_bytes;
			DGM_CUDA(cub::DeviceRadixSort::SortKeys(tmp, sb, k0, k1, total, 0,
								 hshift + hb, st));
			extract<<<(unsigned)((total + 255) / 256), 256, 0, st>>>(k1, total, ib, perm);
		}
		DGM_LAUNCHED();
	}
	DGM_CUDA(cudaFreeAsync(base, st));
	return 0;
}

/* the launchers' argument checks (dg_pca_groups; dev/kernels' versions): 0, or -1 after one line */
static int pca_check(const uint16_t *q, int heads, int n, int d, const int32_t *perm, const int32_t *goff)
{
	DGM_ARG(d == 64 || d == 128, "pca grouping: head_dim %d (64 or 128 supported)", d);
	DGM_ARG(n >= 1 && n < (1 << 19), "pca grouping: n %d (1 .. 2^19-1)", n);
	DGM_ARG(heads >= 1 && heads <= 65535, "pca grouping: %d heads (1 .. 65535)", heads);
	DGM_ARG(q && perm && goff, "pca grouping: NULL argument");
	return 0;
}

} // namespace

#endif

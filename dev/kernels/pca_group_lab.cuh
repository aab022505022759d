/*
 * pca_group_lab.cuh: the kernel lab's PCA grouping pipeline (dev/kernels only): kernels/pca_group.cuh's
 * Gram-partial stage, projection and pipeline with every switch the numbered versions need
 * (pca_group_v.cu): how a block's rows are staged (STAGE), lanes a projection (LANES, PROJ_LANES),
 * the largest node sorted in shared memory (NS_ROWS), the Gram reduction skipped at one-chunk levels
 * (DIRECT), any Gram-partial kernel and chunk size, and the phase timing. kernels/ ships the promoted
 * variant alone: pca_run_lab<D, 8, 4096, true>(gram_partial_mma_lab<D, STAGE_VEC>, 0, 8, ...) is
 * kernels/' pca_run<D> (the same kernels' code).
 * Contract: as kernels/pca_group.cuh's pca_run (asynchronous on st; 0, or -1 after one line).
 */
#ifndef DG_PCA_GROUP_LAB_CUH
#define DG_PCA_GROUP_LAB_CUH

#include "pca_group.cuh"

namespace {

/* how a Gram-partial kernel stages a block's rows (stage_xt) */
enum pca_stage {
	STAGE_PAIRS,   /* dev/kernels' v2, v3: a dependent perm -> q load pair per element */
	STAGE_BATCHED, /* the promoted kernel (v4, v5): 16 rows' perm entries, then their 16 values, then
			* the stores (two latencies per 16 rows instead of two per row) */
	STAGE_VEC,     /* dev/kernels' v6: 16-byte loads, lane = row: 4 perm entries, then all the
			* thread's D/8 vectors, then their stores (consecutive lanes, consecutive halfwords) */
};

/* X_b^T (D, XT_LD) of block rows [r0, r0 + rows) into xt, zeros past rows. PAIRS and BATCHED: thread
 * tid stages column tid % D of rows tid / D + i * (256 / D); VEC: warp w the 16-byte column vectors
 * w * D / 64 .. of rows lane + 32 i */
template <int D, int STAGE>
__device__ __forceinline__ void stage_xt_lab(const uint16_t *q, const int32_t *perm, int r0, int rows, uint16_t *xt)
{
	const int tid = threadIdx.x, cc = tid % D;
	if (STAGE == STAGE_VEC) {
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
		return;
	}
	constexpr int STEP = 256 / D, NR = BS / STEP, B = 16;
	if (STAGE == STAGE_PAIRS) {
		for (int e = tid; e < BS * D; e += 256) {
			const int r = e / D, c = e % D;
			xt[c * XT_LD + r] = r < rows ? q[(size_t)perm[r0 + r] * D + c] : (uint16_t)0;
		}
		return;
	}
#pragma unroll 1
	for (int i0 = 0; i0 < NR; i0 += B) {
		int idx[B];
		uint16_t val[B];
#pragma unroll
		for (int j = 0; j < B; j++) {
			const int r = tid / D + (i0 + j) * STEP;
			idx[j] = r < rows ? perm[r0 + r] : -1;
		}
#pragma unroll
		for (int j = 0; j < B; j++)
			val[j] = idx[j] >= 0 ? q[(size_t)idx[j] * D + cc] : (uint16_t)0;
#pragma unroll
		for (int j = 0; j < B; j++)
			xt[cc * XT_LD + tid / D + (i0 + j) * STEP] = val[j];
	}
}

template <int D, int STAGE>
__global__ void __launch_bounds__(256) gram_partial_mma_lab(const uint16_t *q, const int32_t *perm, int n, Level L,
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
		stage_xt_lab<D, STAGE>(q, perm, r0, rows, xt);
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

/* sort keys (heads, n): head | node | orderable(projection) | query (split nodes), head | node | row |
 * query (the others); hshift: where the head bits start (64: none). LANES lanes a row: 32 (the
 * promoted kernel: lane c's scalar columns c, c + 32, ..., summed in that order, then the butterfly),
 * or 8 (dev/kernels' v6: lane l's D/8 columns l D/8 .. as 16-byte loads, summed in column order,
 * then the butterfly over the 8 lanes) */
template <int D, int LANES>
__global__ void project_lab(const uint16_t *q, const int32_t *perm, int n, Level L, const float *V, int ib, int hshift,
			unsigned long long *keys)
{
	static_assert(LANES == 32 || LANES == 8, "project: 32 or 8 lanes a row");
	const int lane = threadIdx.x % LANES;
	const int r0 = (blockIdx.x * blockDim.x + threadIdx.x) / LANES, h = blockIdx.y;
	if (LANES == 32 && r0 >= n)
		return;
	/* LANES 8: a warp's rows past n work on row n - 1 (its block, so the warp's branch, is theirs too)
	 * and store nothing: the shuffles see the whole warp */
	const bool live = r0 < n;
	const int r = live ? r0 : n - 1;
	const int b = r / BS, slot = L.bslot[b], qi = perm[(size_t)h * n + r];
	uint32_t mid = (uint32_t)r;
	if (slot >= 0) {
		const uint16_t *x = q + ((size_t)h * n + qi) * D;
		const float *v = V + ((size_t)h * L.nsplit + slot) * D;
		float acc = 0.f;
		if constexpr (LANES == 32) {
#pragma unroll
			for (int c = lane; c < D; c += 32)
				acc = fmaf(bf2f(x[c]), v[c], acc);
		} else {
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

/* the Gram partials' kernel of a level: grid (chunks, heads), 256 threads */
typedef void (*pca_gram_kernel)(const uint16_t *q, const int32_t *perm, int n, Level L, float *partial,
				float *psum);

/* the grouping of heads x n queries q (heads, n, D) into perm and goff, on st, with chunks of ch blocks
 * per Gram partial and gram (gram_smem bytes of dynamic shared memory) computing them, PROJ_LANES lanes
 * a projection (project), and the levels whose nodes hold at most NS_ROWS rows sorted node by node
 * (node_sort; the others by one CUB sort of all heads' keys); DIRECT: the levels whose split nodes are
 * one chunk each skip gram_reduce (power_iter reads the partials): 0, or -1
 * after one line. phase_ms (dev/kernels' timing, NULL otherwise): PCA_PHASES device times summed over
 * the levels, from events around each kernel (the call then waits for st) */
enum { PCA_GRAM, PCA_REDUCE, PCA_POWER, PCA_PROJECT, PCA_SORT, PCA_PHASES };
template <int D, int PROJ_LANES = 32, int NS_ROWS = 4096, bool DIRECT = false>
int pca_run_lab(pca_gram_kernel gram, size_t gram_smem, int ch, const uint16_t *q, int heads, int n, int32_t *perm,
	    int32_t *goff, cudaStream_t st, float *phase_ms = nullptr)
{
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
	/* phase timing: event (lev, phase) before each phase's kernels, one more at the end */
	cudaEvent_t ev[Plan::MAXLEV * PCA_PHASES + 1];
	const int nev = phase_ms ? P.nlevels * PCA_PHASES + 1 : 0;
	for (int i = 0; i < nev; i++)
		DGM_CUDA(cudaEventCreate(&ev[i]));
#define PCA_MARK(lev, ph)                                                     \
	do {                                                                  \
		if (nev)                                                      \
			DGM_CUDA(cudaEventRecord(ev[(lev) * PCA_PHASES + (ph)], st)); \
	} while (0)
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
		PCA_MARK(lev, PCA_GRAM);
		gram<<<dim3(L.nchunks, heads), 256, gram_smem, st>>>(q, perm, n, L, partial, psum);
		PCA_MARK(lev, PCA_REDUCE);
		const bool direct = DIRECT && P.maxrows[lev] <= ch * BS; /* every split node one chunk */
		if (!direct)
			gram_reduce<D><<<dim3(L.nsplit, (D * D + 255) / 256, heads), 256, 0, st>>>(L, partial, G);
		PCA_MARK(lev, PCA_POWER);
		power_iter<D><<<dim3(L.nsplit, heads), D, smem_pow, st>>>(L, n, direct ? partial : G, psum, sv, V, direct);
		PCA_MARK(lev, PCA_PROJECT);
		project_lab<D, PROJ_LANES><<<dim3((unsigned)(((size_t)n * PROJ_LANES + 255) / 256), heads), 256, 0, st>>>(
			q, perm, n, L, V, ib, hshift, k0);
		DGM_LAUNCHED();
		PCA_MARK(lev, PCA_SORT);
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
#undef PCA_MARK
	DGM_CUDA(cudaFreeAsync(base, st));
	if (nev) {
		DGM_CUDA(cudaEventRecord(ev[nev - 1], st));
		DGM_CUDA(cudaEventSynchronize(ev[nev - 1]));
		for (int i = 0; i < PCA_PHASES; i++)
			phase_ms[i] = 0.f;
		for (int i = 0; i + 1 < nev; i++) {
			float ms = 0.f;
			DGM_CUDA(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
			phase_ms[i % PCA_PHASES] += ms;
		}
		for (int i = 0; i < nev; i++)
			cudaEventDestroy(ev[i]);
	}
	return 0;
}

} // namespace

#endif

/*
 * bench_attn.cu: dsgap-bench-kernels, the benchmark of the dense and gather-KV sparse attention kernels
 * (docs/spec.md §8). Random bf16 inputs generated on the device (never zeros; varied row scales), warm-up,
 * CUDA events around each launch, median of --reps runs. The inputs (3 x heads x n x d bf16, 300 MB at
 * the default shape) are 5x the H200's 60 MB L2, so runs do not reuse a warm cache across launches.
 *   dsgap-bench-kernels [--n 32760] [--heads 12] [--d 128] [--reps 30] [--csv FILE] [--quick]
 * Prints and appends CSV lines name,value,unit,device,date,commit:
 *   dense_ms, dense_tflops, dense_tflops_d64,
 *   sparse_ms@rho, sparse_eff_tflops@rho (4 d sum(queries x keys) / time), sparse_over_dense@rho
 *   (our dense time / our sparse time; scripts/gpu_bench_torch.py adds the cuDNN ratios),
 *   sparse_block_over_dense@0.15 (block-run lists),
 *   dense_pairs_ms@0.15, dense_pairs_tflops@0.15, sparse_over_dense_pairs@0.15 (our dense kernel,
 *   dg_flash_fwd_kv, on the sparse call's (query, key) pairs with the keys contiguous: every query
 *   against the first 128*ceil(0.15*n/128) keys of its head; the last ratio below 1 is what gathering
 *   the rows costs),
 *   sparse_query_ms@0.15, sparse_query_over_dense@0.15 (per-query oracle, groups of one),
 *   sparse_perhead_ms@0.15, sparse_perhead_over_one@0.15 (the same work as one launch per head),
 *   sparse_heads_ms@0.15, sparse_heads_token_major_ms@0.15, sparse_token_major_over_head_major@0.15 (the
 *   DiT's batched launch, dg_sparse_fwd_heads, on head-major inputs and on the same buffers read
 *   token-major with row stride heads x d, as the processor's reuse calls read torch's Q/K/V); all in the
 *   fast P.V mode (P rounded to bf16), and the precise mode (P as bf16 hi + lo, dsgap_kernels.h) as
 *   dense_precise_ms, dense_precise_over_fast, sparse_precise_ms@rho, sparse_precise_over_fast@rho:
 *   precise time over fast time.
 * Sparse setup: groups of 128 queries (a random permutation of the head's queries, as PCA groups
 * give), each with its own random sorted list of 128*ceil(rho*n/128) keys.
 * The earlier kernel versions' benchmark, dev/kernels/bench_versions.cu, includes this file with
 * DG_BENCH_ATTN_NO_MAIN and adds their lines to these.
 */
#include "dsgap_kernels.h"
#include "host_common.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <vector>

__device__ __forceinline__ uint64_t hash64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}
__device__ __forceinline__ float u01(uint64_t h) { return (float)((h >> 40) + 0.5) * (1.0f / 16777216.0f); }

/* x[r, c] = scale_r * (sum of 4 uniforms - 2) * sqrt(3) + offset, scale_r = exp(lo + (hi-lo) u) */
__global__ void fill_bf16(uint16_t *x, size_t rows, int d, uint64_t seed, float lo, float hi, float offset)
{
	const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= rows * d)
		return;
	const size_t r = i / d;
	const float sc = expf(lo + (hi - lo) * u01(hash64(seed ^ (r * 0x9E3779B97F4A7C15ull))));
	const uint64_t h = hash64(seed + 0x632BE59BD9B4E019ull * (i + 1));
	const float z = (u01(h) + u01(h << 16) + u01(h << 32) + u01(hash64(h)) - 2.f) * 1.7320508f;
	const float f = sc * z + offset;
	uint32_t u = __float_as_uint(f);
	u += 0x7fff + ((u >> 16) & 1);
	x[i] = (uint16_t)(u >> 16);
}

/* perm: a random permutation of 0..n-1 per head (by sorting random keys on the host is slow; use an
 * affine bijection i -> (a i + b) mod n with gcd(a, n) = 1 instead) */
__global__ void fill_perm(int32_t *perm, int heads, int n, long long a, long long b)
{
	const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= (size_t)heads * n)
		return;
	const long long h = i / n, j = i % n;
	perm[i] = (int32_t)((a * j + b + 7919 * h) % n);
}

/* one thread per (head, group): a random sorted subset of `count` of the n keys (selection sampling),
 * or with blocks = 1 a random sorted subset of count/128 blocks of 128 keys (last block clipped) */
__global__ void fill_lists(int32_t *sidx, long long total_groups, int n, int count, int blocks, uint64_t seed)
{
	const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (t >= total_groups)
		return;
	int32_t *out = sidx + t * (long long)count;
	uint64_t s = hash64(seed ^ (uint64_t)(t + 1) * 0x9E3779B97F4A7C15ull);
	int w = 0;
	if (!blocks) {
		int need = count;
		for (int j = 0; j < n && need > 0; j++) {
			s = hash64(s + 0x9E3779B97F4A7C15ull);
			if (u01(s) * (float)(n - j) < (float)need) {
				out[w++] = j;
				need--;
			}
		}
		while (w < count) /* float rounding left a few: take the last keys */
			out[w] = n - count + w, w++;
	} else {
		const int nb = (n + 127) / 128;
		int need = count / 128;
		for (int b = 0; b < nb && need > 0; b++) {
			s = hash64(s + 0x9E3779B97F4A7C15ull);
			if (u01(s) * (float)(nb - b) < (float)need) {
				for (int j = b * 128; j < min(n, b * 128 + 128); j++)
					out[w++] = j;
				need--;
			}
		}
		while (w < count)
			out[w] = w % n, w++; /* pad (never reached for 128-aligned n) */
	}
}

static int g_reps = 30;
static char g_dev[256], g_date[32], g_commit[64];
static FILE *g_csv;

static void emit(const char *name, double value, const char *unit)
{
	printf("%s,%.6g,%s,%s,%s,%s\n", name, value, unit, g_dev, g_date, g_commit);
	if (g_csv)
		fprintf(g_csv, "%s,%.6g,%s,%s,%s,%s\n", name, value, unit, g_dev, g_date, g_commit);
	fflush(stdout);
}

/* median time in ms of fn() over g_reps launches after 3 warm-ups */
template <typename F> static double time_ms(F fn, int reps = 0)
{
	if (reps <= 0)
		reps = g_reps;
	cudaEvent_t a, b;
	CUDA_CHECK(cudaEventCreate(&a));
	CUDA_CHECK(cudaEventCreate(&b));
	for (int i = 0; i < 3; i++) {
		if (fn()) {
			fprintf(stderr, "bench: launch failed\n");
			exit(1);
		}
		const time_t t0 = time(NULL); /* watchdog: a deadlocked kernel ends the benchmark */
		while (cudaStreamQuery(0) == cudaErrorNotReady)
			if (time(NULL) - t0 > 30) {
				printf("# bench: HANG, kernel still running after 30 s\n");
				fflush(stdout);
				_exit(3);
			}
	}
	CUDA_CHECK(cudaDeviceSynchronize());
	std::vector<float> t(reps);
	for (int i = 0; i < reps; i++) {
		CUDA_CHECK(cudaEventRecord(a));
		fn();
		CUDA_CHECK(cudaEventRecord(b));
		CUDA_CHECK(cudaEventSynchronize(b));
		CUDA_CHECK(cudaEventElapsedTime(&t[i], a, b));
	}
	CUDA_CHECK(cudaGetLastError());
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	std::sort(t.begin(), t.end());
	return reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
}

struct Groups {
	int32_t *perm = NULL, *goff = NULL, *sidx = NULL;
	int64_t *soff = NULL;
	int ngroups = 0;
	double pairs = 0; /* computed (query, key) pairs, all heads */
	void free_all() { cudaFree(perm); cudaFree(goff); cudaFree(sidx); cudaFree(soff); }
};

/* groups of gsize queries (a random permutation), each with `count` keys (token or block lists) */
static Groups make_groups(int heads, int n, int gsize, int count, int blocks, uint64_t seed)
{
	Groups G;
	G.ngroups = (n + gsize - 1) / gsize;
	const int ng = G.ngroups;
	std::vector<int32_t> goff((size_t)heads * (ng + 1));
	std::vector<int64_t> soff((size_t)heads * (ng + 1));
	for (int h = 0; h < heads; h++)
		for (int g = 0; g <= ng; g++) {
			goff[(size_t)h * (ng + 1) + g] = std::min(n, g * gsize);
			soff[(size_t)h * (ng + 1) + g] = ((int64_t)h * ng + g) * count;
		}
	CUDA_CHECK(cudaMalloc(&G.perm, (size_t)heads * n * 4));
	CUDA_CHECK(cudaMalloc(&G.goff, goff.size() * 4));
	CUDA_CHECK(cudaMalloc(&G.soff, soff.size() * 8));
	CUDA_CHECK(cudaMalloc(&G.sidx, (size_t)heads * ng * count * 4));
	CUDA_CHECK(cudaMemcpy(G.goff, goff.data(), goff.size() * 4, cudaMemcpyHostToDevice));
	CUDA_CHECK(cudaMemcpy(G.soff, soff.data(), soff.size() * 8, cudaMemcpyHostToDevice));
	long long a = 40503;
	while (std::__gcd(a, (long long)n) != 1)
		a++;
	fill_perm<<<(unsigned)(((size_t)heads * n + 255) / 256), 256>>>(G.perm, heads, n, a, 12345);
	const long long tg = (long long)heads * ng;
	fill_lists<<<(unsigned)((tg + 127) / 128), 128>>>(G.sidx, tg, n, count, blocks, seed);
	CUDA_CHECK(cudaGetLastError());
	CUDA_CHECK(cudaDeviceSynchronize());
	G.pairs = (double)heads * n * count;
	return G;
}

/* the benchmark's shape, device buffers (inputs filled) and the promoted dense time */
struct Bench {
	int n = 32760, heads = 12, d = 128;
	bool quick = false;
	uint16_t *q = NULL, *k = NULL, *v = NULL, *ob = NULL;
	float *o = NULL, *lse = NULL, *res = NULL;
	double t_dense = 0; /* dg_flash_fwd, bf16 output + LSE, fast mode (the denominator of the ratios) */
};

/* arguments (prog: the name in the usage line), device, CSV file, inputs: 0, or the exit status */
static int bench_setup(int argc, char **argv, const char *prog, Bench &B)
{
	const char *csv = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--n") && i + 1 < argc)
			B.n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--heads") && i + 1 < argc)
			B.heads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--d") && i + 1 < argc)
			B.d = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			g_reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
			csv = argv[++i];
		else if (!strcmp(argv[i], "--quick"))
			B.quick = true;
		else {
			fprintf(stderr, "usage: %s [--n N] [--heads H] [--d D] [--reps R] [--csv FILE] [--quick]\n", prog);
			return 2;
		}
	}
	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "bench: no CUDA device\n");
		return 1;
	}
	cudaDeviceProp prop;
	CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
	snprintf(g_dev, sizeof g_dev, "%s", prop.name);
	time_t now = time(NULL);
	strftime(g_date, sizeof g_date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	snprintf(g_commit, sizeof g_commit, "%s", getenv("DG_COMMIT") ? getenv("DG_COMMIT") : DG_GIT_COMMIT);
	if (csv && !(g_csv = fopen(csv, "a"))) {
		fprintf(stderr, "bench: cannot open %s\n", csv);
		return 1;
	}
	printf("# %s: %s, %d SMs, n=%d heads=%d d=%d reps=%d (median)\n", prog, prop.name, prop.multiProcessorCount,
	       B.n, B.heads, B.d, g_reps);

	const int n = B.n, heads = B.heads, d = B.d;
	const size_t elems = (size_t)heads * n * d;
	CUDA_CHECK(cudaMalloc(&B.q, elems * 2));
	CUDA_CHECK(cudaMalloc(&B.k, elems * 2));
	CUDA_CHECK(cudaMalloc(&B.v, elems * 2));
	CUDA_CHECK(cudaMalloc(&B.ob, elems * 2));
	CUDA_CHECK(cudaMalloc(&B.o, elems * 4));
	CUDA_CHECK(cudaMalloc(&B.res, elems * 4));
	CUDA_CHECK(cudaMalloc(&B.lse, (size_t)2 * heads * n * 4)); /* 2x: the d=64 run uses 2*heads */
	const unsigned fb = (unsigned)((elems + 255) / 256);
	fill_bf16<<<fb, 256>>>(B.q, (size_t)heads * n, d, 1, -1.f, 1.f, 0.f);
	fill_bf16<<<fb, 256>>>(B.k, (size_t)heads * n, d, 2, -0.5f, 0.5f, 0.f);
	fill_bf16<<<fb, 256>>>(B.v, (size_t)heads * n, d, 3, -0.3f, 0.3f, 0.2f);
	CUDA_CHECK(cudaMemset(B.res, 0, elems * 4));
	CUDA_CHECK(cudaDeviceSynchronize());
	return 0;
}

/* the sparse benchmark's token lists at density rho (its seed: the same lists in every run) */
static Groups token_groups(const Bench &B, double rho)
{
	const int count = std::min(B.n, 128 * (int)ceil(rho * B.n / 128.0));
	return make_groups(B.heads, B.n, 128, count, 0, 1000 + (uint64_t)(rho * 100));
}

/* the promoted kernels' lines (sets B.t_dense) */
static void bench_promoted(Bench &B)
{
	const int n = B.n, heads = B.heads, d = B.d;
	uint16_t *q = B.q, *k = B.k, *v = B.v, *ob = B.ob;
	float *o = B.o, *lse = B.lse, *res = B.res;
	const double dense_flop = 4.0 * n * (double)n * d * heads;
	{ /* dense, bf16 output + LSE (what the engine uses) */
		auto run = [&](int precise) {
			return time_ms([&] { return dg_flash_fwd(q, k, v, heads, n, d, NULL, ob, lse, precise, NULL); });
		};
		const double t = run(0), tp = run(1);
		B.t_dense = t;
		emit("dense_ms", t, "ms");
		emit("dense_tflops", dense_flop / t * 1e-9, "TFLOP/s");
		emit("dense_precise_ms", tp, "ms");
		emit("dense_precise_over_fast", tp / t, "x");
	}
	if (d == 128 && !B.quick) {
		const double t = time_ms([&] { return dg_flash_fwd(q, k, v, heads * 2, n, 64, NULL, ob, lse, 0, NULL); });
		emit("dense_tflops_d64", 4.0 * n * (double)n * 64 * heads * 2 / t * 1e-9, "TFLOP/s");
	}

	/* sparse: groups of 128, token lists, densities */
	const double rhos[] = {0.05, 0.1, 0.15, 0.2, 0.3, 0.5};
	double t15 = 0; /* the sparse call at 0.15 */
	for (double rho : rhos) {
		if (B.quick && rho != 0.15)
			continue;
		Groups G = token_groups(B, rho);
		char name[64];
		auto run = [&](int precise) {
			return time_ms([&] {
				return dg_sparse_fwd(q, k, v, heads, n, d, G.perm, G.goff, G.ngroups, G.soff, G.sidx, res, lse,
						     o, NULL, precise, NULL);
			});
		};
		const double t = run(0), tp = run(1);
		if (rho == 0.15)
			t15 = t;
		snprintf(name, sizeof name, "sparse_ms@%.2g", rho);
		emit(name, t, "ms");
		snprintf(name, sizeof name, "sparse_eff_tflops@%.2g", rho);
		emit(name, 4.0 * d * G.pairs / t * 1e-9, "TFLOP/s");
		snprintf(name, sizeof name, "sparse_over_dense@%.2g", rho);
		emit(name, B.t_dense / t, "x");
		snprintf(name, sizeof name, "sparse_precise_ms@%.2g", rho);
		emit(name, tp, "ms");
		snprintf(name, sizeof name, "sparse_precise_over_fast@%.2g", rho);
		emit(name, tp / t, "x");
		if (rho == 0.15) {
			/* the same work as one launch per head (the DiT's sparse calls): launch and ramp overhead */
			const double th = time_ms([&] {
				const size_t hs = (size_t)n * d;
				for (int h = 0; h < heads; h++)
					if (dg_sparse_fwd(q + h * hs, k + h * hs, v + h * hs, 1, n, d, G.perm + (size_t)h * n,
							  G.goff + (size_t)h * (G.ngroups + 1), G.ngroups,
							  G.soff + (size_t)h * (G.ngroups + 1), G.sidx, res + h * hs, NULL,
							  o + h * hs, NULL, 0, NULL))
						return -1;
				return 0;
			});
			emit("sparse_perhead_ms@0.15", th, "ms");
			emit("sparse_perhead_over_one@0.15", th / t, "x");
			if (heads <= DG_SPARSE_HEADS_MAX) {
				/* the DiT's batched launch (dg_sparse_fwd_heads: heads merged in the output) on head-major
				 * inputs and on the same buffers read token-major (row stride heads x d, as the processor's
				 * reuse calls read torch's Q/K/V in place): what the layout costs the gather */
				dg_sparse_head tab[DG_SPARSE_HEADS_MAX];
				for (int h = 0; h < heads; h++)
					tab[h] = { G.perm + (size_t)h * n, G.goff + (size_t)h * (G.ngroups + 1),
						   G.soff + (size_t)h * (G.ngroups + 1), G.sidx, res + (size_t)h * n * d, DG_RES_F32 };
				auto run_heads = [&](int ldi) {
					return time_ms([&] {
						return dg_sparse_fwd_heads(q, k, v, ldi, heads, n, d, tab, G.ngroups, ob, heads * d, 0,
									   NULL);
					});
				};
				const double hm = run_heads(0), tm = run_heads(heads * d);
				emit("sparse_heads_ms@0.15", hm, "ms");
				emit("sparse_heads_token_major_ms@0.15", tm, "ms");
				emit("sparse_token_major_over_head_major@0.15", tm / hm, "x");
			}
		}
		G.free_all();
	}
	{ /* block-run lists at 0.15 */
		const int count = 128 * (int)ceil(0.15 * n / 128.0);
		Groups G = make_groups(heads, n, 128, count, 1, 77);
		const double t = time_ms([&] {
			return dg_sparse_fwd(q, k, v, heads, n, d, G.perm, G.goff, G.ngroups, G.soff, G.sidx, res, lse, o,
					     NULL, 0, NULL);
		});
		emit("sparse_block_ms@0.15", t, "ms");
		emit("sparse_block_over_dense@0.15", B.t_dense / t, "x");
		G.free_all();
	}
	{ /* our dense kernel on the same pairs as the sparse call at 0.15, keys contiguous */
		const int count = std::min(n, 128 * (int)ceil(0.15 * n / 128.0));
		uint16_t *kc = NULL, *vc = NULL; /* (heads, count, d): each head's first count rows */
		const size_t row = (size_t)count * d * 2, pitch = (size_t)n * d * 2;
		CUDA_CHECK(cudaMalloc((void **)&kc, heads * row));
		CUDA_CHECK(cudaMalloc((void **)&vc, heads * row));
		CUDA_CHECK(cudaMemcpy2D(kc, row, k, pitch, row, heads, cudaMemcpyDeviceToDevice));
		CUDA_CHECK(cudaMemcpy2D(vc, row, v, pitch, row, heads, cudaMemcpyDeviceToDevice));
		const double t = time_ms([&] { return dg_flash_fwd_kv(q, kc, vc, heads, n, count, d, NULL, ob, lse, NULL); });
		emit("dense_pairs_ms@0.15", t, "ms");
		emit("dense_pairs_tflops@0.15", 4.0 * n * (double)count * d * heads / t * 1e-9, "TFLOP/s");
		if (t15 > 0)
			emit("sparse_over_dense_pairs@0.15", t / t15, "x");
		cudaFree(kc);
		cudaFree(vc);
	}
	if (!B.quick) { /* per-query oracle: groups of one query, each with its own list */
		const int count = 128 * (int)ceil(0.15 * n / 128.0);
		Groups G = make_groups(heads, n, 1, count, 0, 99);
		const double t = time_ms(
			[&] {
				return dg_sparse_fwd(q, k, v, heads, n, d, G.perm, G.goff, G.ngroups, G.soff, G.sidx, res, lse,
						     o, NULL, 0, NULL);
			},
			5);
		emit("sparse_query_ms@0.15", t, "ms");
		emit("sparse_query_over_dense@0.15", B.t_dense / t, "x");
		G.free_all();
	}
}

static void bench_free(Bench &B)
{
	cudaFree(B.q);
	cudaFree(B.k);
	cudaFree(B.v);
	cudaFree(B.ob);
	cudaFree(B.o);
	cudaFree(B.lse);
	cudaFree(B.res);
	if (g_csv)
		fclose(g_csv);
	g_csv = NULL;
}

#ifndef DG_BENCH_ATTN_NO_MAIN
int main(int argc, char **argv)
{
	Bench B;
	const int rc = bench_setup(argc, argv, "dsgap-bench-kernels", B);
	if (rc)
		return rc;
	bench_promoted(B);
	bench_free(B);
	return 0;
}
#endif

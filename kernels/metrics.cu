/*
 * metrics.cu: fidelity metrics on the device (docs/spec.md §4), GPU twin of dg_metrics_compute
 * (src/policy/metrics.c), accumulated in double:
 *   rel_l1 = sum|o-ref| / sum|ref|, rel_l2 = |o-ref| / |ref|, cosine, psnr (peak = max-min of ref,
 *   inf when o == ref), mass_mean and mass_p5 (gsl_stats_quantile_from_sorted_data at 0.05: linear
 *   interpolation at (nq-1)*0.05 of the sorted values; mass NULL: both 1).
 * One pass of per-block double partials, a CUB radix sort of the mass, and one finishing block that
 * reduces the partials in a fixed order (deterministic) and writes the 6 doubles.
 * Build: part of dsgapkernels; test: tests/kernels/gpu_meta.c.
 */
#include "dsgap_kernels.h"
#include "meta_common.cuh"

#include <cub/cub.cuh>

namespace {

#define MT_NT 256
#define MT_BLOCKS 512
#define NACC 8 /* l1, r1, d2, r2, o2, dot, lo, hi */

DGM_DEV double warp_sum(double x)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		x += __shfl_xor_sync(0xffffffffu, x, o);
	return x;
}
DGM_DEV double warp_min(double x)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		x = fmin(x, __shfl_xor_sync(0xffffffffu, x, o));
	return x;
}
DGM_DEV double warp_max(double x)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		x = fmax(x, __shfl_xor_sync(0xffffffffu, x, o));
	return x;
}

/* block-reduce the 8 accumulators into out[0..7] (thread 0) */
DGM_DEV void block_reduce8(double a[NACC], double *out)
{
	__shared__ double sh[MT_NT / 32][NACC];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	for (int i = 0; i < 6; i++)
		a[i] = warp_sum(a[i]);
	a[6] = warp_min(a[6]);
	a[7] = warp_max(a[7]);
	if (lane == 0)
		for (int i = 0; i < NACC; i++)
			sh[warp][i] = a[i];
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int i = 0; i < NACC; i++)
			out[i] = sh[0][i];
		for (int w = 1; w < MT_NT / 32; w++) {
			for (int i = 0; i < 6; i++)
				out[i] += sh[w][i];
			out[6] = fmin(out[6], sh[w][6]);
			out[7] = fmax(out[7], sh[w][7]);
		}
	}
	__syncthreads();
}

__global__ void __launch_bounds__(MT_NT) metric_partials(const float *ref, const float *o, size_t count, double *part)
{
	double a[NACC] = {0, 0, 0, 0, 0, 0, INFINITY, -INFINITY};
	for (size_t i = blockIdx.x * (size_t)MT_NT + threadIdx.x; i < count; i += (size_t)gridDim.x * MT_NT) {
		const double r = ref[i], x = o[i], e = x - r;
		a[0] += fabs(e);
		a[1] += fabs(r);
		a[2] += e * e;
		a[3] += r * r;
		a[4] += x * x;
		a[5] += r * x;
		a[6] = r < a[6] ? r : a[6];
		a[7] = r > a[7] ? r : a[7];
	}
	block_reduce8(a, part + (size_t)blockIdx.x * NACC);
}

__global__ void __launch_bounds__(MT_NT) metric_finish(const double *part, int nparts, size_t count,
						       const float *sorted_mass, int nq, double *out)
{
	double a[NACC] = {0, 0, 0, 0, 0, 0, INFINITY, -INFINITY};
	for (int b = threadIdx.x; b < nparts; b += MT_NT) {
		const double *p = part + (size_t)b * NACC;
		for (int i = 0; i < 6; i++)
			a[i] += p[i];
		a[6] = fmin(a[6], p[6]);
		a[7] = fmax(a[7], p[7]);
	}
	__shared__ double tot[NACC];
	block_reduce8(a, tot);
	double msum = 0;
	if (sorted_mass)
		for (int i = threadIdx.x; i < nq; i += MT_NT)
			msum += (double)sorted_mass[i];
	double mm[NACC] = {msum, 0, 0, 0, 0, 0, 0, 0};
	__shared__ double mt[NACC];
	block_reduce8(mm, mt);
	if (threadIdx.x == 0) {
		const double l1 = tot[0], r1 = tot[1], d2 = tot[2], r2 = tot[3], o2 = tot[4], dot = tot[5];
		const double lo = tot[6], hi = tot[7];
		out[0] = l1 / r1;
		out[1] = sqrt(d2 / r2);
		out[2] = dot / sqrt(r2 * o2);
		out[3] = d2 > 0 ? 20.0 * log10((hi - lo) / sqrt(d2 / (double)count)) : INFINITY;
		if (!sorted_mass) {
			out[4] = out[5] = 1.0;
		} else {
			out[4] = mt[0] / nq;
			/* gsl_stats_float_quantile_from_sorted_data(sorted, 1, nq, 0.05), no contraction */
			double p5 = 0.0;
			if (nq > 0) {
				const double index = __dmul_rn(0.05, (double)(nq - 1));
				const int lhs = (int)index;
				const double delta = __dadd_rn(index, -(double)lhs);
				if (lhs == nq - 1)
					p5 = sorted_mass[lhs];
				else
					p5 = __dadd_rn(__dmul_rn(__dadd_rn(1.0, -delta), (double)sorted_mass[lhs]),
						       __dmul_rn(delta, (double)sorted_mass[lhs + 1]));
			}
			out[5] = p5;
		}
	}
}

} // namespace

extern "C" int dg_metrics_device(const float *ref, const float *o, uint64_t count, const float *mass, int nq,
				 double *out, dg_stream stream)
{
	DGM_ARG(ref && o && out, "metrics: NULL argument");
	DGM_ARG(count >= 1, "metrics: no values");
	DGM_ARG(!mass || nq >= 1, "metrics: %d mass values", nq);
	cudaStream_t st = (cudaStream_t)stream;
	size_t sort_bytes = 0;
	if (mass)
		DGM_CUDA(cub::DeviceRadixSort::SortKeys(NULL, sort_bytes, mass, (float *)NULL, nq, 0, 32, st));
	const int nparts = (int)((count + MT_NT - 1) / MT_NT < MT_BLOCKS ? (count + MT_NT - 1) / MT_NT : MT_BLOCKS);
	const size_t a_part = dgm_align((size_t)nparts * NACC * 8), a_mass = mass ? dgm_align((size_t)nq * 4) : 0;
	char *base = NULL;
	DGM_CUDA(cudaMallocAsync((void **)&base, a_part + a_mass + dgm_align(sort_bytes), st));
	double *part = (double *)base;
	float *sorted = mass ? (float *)(base + a_part) : NULL;
	if (mass)
		DGM_CUDA(cub::DeviceRadixSort::SortKeys(base + a_part + a_mass, sort_bytes, mass, sorted, nq, 0, 32, st));
	metric_partials<<<nparts, MT_NT, 0, st>>>(ref, o, count, part);
	metric_finish<<<1, MT_NT, 0, st>>>(part, nparts, count, sorted, nq, out);
	DGM_LAUNCHED();
	DGM_CUDA(cudaFreeAsync(base, st));
	return 0;
}

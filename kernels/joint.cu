/*
 * joint.cu: joint attention's metadata on the device (docs/spec.md §3.7), the twins of
 * src/policy/select.c dg_joint_selection and src/policy/groups.c's joint groupings:
 *   dg_joint_keys  a selection's lists made joint: text groups get every key, video groups the text
 *                  keys [0, forced) then their own keys past them. One thread per group counts the
 *                  new list (its keys >= forced are a suffix of the ascending list: a binary search),
 *                  a CUB exclusive scan gives the offsets, one CTA per group writes the list;
 *   dg_joint_perm  a grouping of the video queries alone (e.g. dg_pca_groups on rows [text, n))
 *                  put behind the text queries: perm[i] = i for i < text, perm[text + i] = text +
 *                  vperm[i].
 * Launchers: dsgap_kernels.h ("joint attention"). Used by src/backend/backend_gpu.c; checked
 * against the CPU backend by tests/replay/gpu_replay.sh (text-token traces, identical selections).
 */
#include "dsgap_kernels.h"
#include "meta_common.cuh"

#include <cub/cub.cuh>

namespace {

#define JK_NT 256

/* the first position of [lo, hi) whose key is >= forced (keys ascending) */
__device__ long long first_at_least(const int32_t *sidx, long long lo, long long hi, int forced)
{
	while (lo < hi) {
		long long mid = lo + (hi - lo) / 2;
		if (sidx[mid] < forced)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* cnt (ngroups+1): each group's joint list length, 0 past the last (the scan's total) */
__global__ void joint_count(const long long *soff, const int32_t *sidx, int ngroups, int n, int text_groups,
			    int forced, long long *cnt)
{
	for (int g = blockIdx.x * blockDim.x + threadIdx.x; g <= ngroups; g += gridDim.x * blockDim.x) {
		if (g == ngroups)
			cnt[g] = 0;
		else if (g < text_groups)
			cnt[g] = n;
		else
			cnt[g] = forced + soff[g + 1] - first_at_least(sidx, soff[g], soff[g + 1], forced);
	}
}

/* one CTA per group (grid-stride): the joint list at its new offset */
__global__ void joint_write(const long long *soff, const int32_t *sidx, int ngroups, int n, int text_groups,
			    int forced, const long long *out_off, int32_t *out)
{
	for (int g = blockIdx.x; g < ngroups; g += gridDim.x) {
		int32_t *dst = out + out_off[g];
		if (g < text_groups) {
			for (int j = threadIdx.x; j < n; j += blockDim.x)
				dst[j] = j;
			continue;
		}
		long long lo = first_at_least(sidx, soff[g], soff[g + 1], forced), m = soff[g + 1] - lo;
		for (int j = threadIdx.x; j < forced; j += blockDim.x)
			dst[j] = j;
		for (long long t = threadIdx.x; t < m; t += blockDim.x)
			dst[forced + t] = sidx[lo + t];
	}
}

__global__ void joint_perm(const int32_t *vperm, int n, int text, int32_t *perm)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		perm[i] = i < text ? i : text + vperm[i - text];
}

int blocks_for(long long items)
{
	long long b = (items + JK_NT - 1) / JK_NT;
	return b < 1 ? 1 : b > 65535 ? 65535 : (int)b;
}

} // namespace

extern "C" int dg_joint_keys(const int64_t *soff, const int32_t *sidx, int ngroups, int n, int text_groups,
			     int forced, int64_t *soff_out, int32_t *sidx_out, dg_stream stream)
{
	DGM_ARG(soff && sidx && soff_out && sidx_out, "joint keys: NULL argument");
	DGM_ARG(ngroups >= 1 && n >= 1, "joint keys: ngroups %d, n %d", ngroups, n);
	DGM_ARG(text_groups >= 0 && text_groups <= ngroups && forced >= 0 && forced <= n,
		"joint keys: %d text groups of %d, %d forced keys of %d", text_groups, ngroups, forced, n);
	cudaStream_t st = (cudaStream_t)stream;
	long long *cnt = NULL;
	DGM_CUDA(cudaMallocAsync(&cnt, (size_t)(ngroups + 1) * sizeof *cnt, st));
	joint_count<<<blocks_for(ngroups + 1), JK_NT, 0, st>>>((const long long *)soff, sidx, ngroups, n, text_groups,
							      forced, cnt);
	DGM_LAUNCHED();
	size_t bytes = 0;
	DGM_CUDA(cub::DeviceScan::ExclusiveSum(NULL, bytes, cnt, (long long *)soff_out, ngroups + 1, st));
	void *tmp = NULL;
	DGM_CUDA(cudaMallocAsync(&tmp, bytes, st));
	DGM_CUDA(cub::DeviceScan::ExclusiveSum(tmp, bytes, cnt, (long long *)soff_out, ngroups + 1, st));
	DGM_CUDA(cudaFreeAsync(tmp, st));
	DGM_CUDA(cudaFreeAsync(cnt, st));
	joint_write<<<ngroups < 65535 ? ngroups : 65535, JK_NT, 0, st>>>((const long long *)soff, sidx, ngroups, n,
									 text_groups, forced,
									 (const long long *)soff_out, sidx_out);
	DGM_LAUNCHED();
	return 0;
}

extern "C" int dg_joint_perm(const int32_t *vperm, int n, int text, int32_t *perm, dg_stream stream)
{
	DGM_ARG(vperm && perm, "joint perm: NULL argument");
	DGM_ARG(text >= 0 && text < n, "joint perm: %d text tokens of %d", text, n);
	joint_perm<<<blocks_for(n), JK_NT, 0, (cudaStream_t)stream>>>(vperm, n, text, perm);
	DGM_LAUNCHED();
	return 0;
}

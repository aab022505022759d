/*
 * residual.cu: the residual bookkeeping of cached-residual policies, fused in one pass:
 *   out = o_sparse + r_old (r_old may be NULL: out = o_sparse), r_new = o_ref - o_sparse
 * (count fp32 values each; out or r_new may be NULL). CPU twin: the loops in src/backend/backend_cpu.c.
 */
#include <cstdio>

#include "dsgap_kernels.h"

__global__ void residual_update_kernel(const float *__restrict__ o_ref, const float *__restrict__ o_sp,
				       const float *__restrict__ r_old, float *__restrict__ out,
				       float *__restrict__ r_new, uint64_t count)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < count;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		float s = o_sp[i];
		if (out)
			out[i] = r_old ? s + r_old[i] : s;
		if (r_new)
			r_new[i] = o_ref[i] - s;
	}
}

extern "C" int dg_residual_update(const float *o_ref, const float *o_sp, const float *r_old, float *out,
				  float *r_new, uint64_t count, dg_stream stream)
{
	if (!o_sp || (r_new && !o_ref)) {
		fprintf(stderr, "residual_update: o_sp (and o_ref with r_new) are required\n");
		return -1;
	}
	if (count == 0)
		return 0;
	int blocks = (int)((count + 255) / 256 < 4096 ? (count + 255) / 256 : 4096);
	residual_update_kernel<<<blocks, 256, 0, (cudaStream_t)stream>>>(o_ref, o_sp, r_old, out, r_new, count);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

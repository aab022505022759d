/*
 * tma_map.h: the tensor maps of the kernels' TMA loads (host side; not a public header): a head-major
 * bf16 tensor (heads, rows, d) as a 3-D map of boxes of 64 columns x box_rows rows x 1 head, 128B
 * swizzle (a box lands as one column block of attn_tiles.cuh's tile layout), zero fill past the bounds.
 * Users: flash_fwd.cu (the dense kernel's Q, K and V), dev/kernels' TMA versions.
 * Contract: 0, or -1 with one line on stderr naming who asked (the driver lacks the entry point, or
 * the encoder refused the shape); base 16-byte aligned, d a multiple of 64, box_rows 1..256.
 */
#ifndef DG_TMA_MAP_H
#define DG_TMA_MAP_H

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>

static inline int dg_tile_map(CUtensorMap *m, const void *base, int heads, int rows, int d, int box_rows,
				  const char *who)
{
	typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
				      const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
				      CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
	static const encode_fn encode = [] { /* once, thread-safe (a C++ local static) */
		void *fn = NULL;
		cudaDriverEntryPointQueryResult q;
		if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) !=
			    cudaSuccess ||
		    q != cudaDriverEntryPointSuccess)
			fn = NULL;
		return (encode_fn)fn;
	}();
	if (!encode) {
		fprintf(stderr, "%s: no cuTensorMapEncodeTiled in the driver\n", who);
		return -1;
	}
	const cuuint64_t dim[3] = {(cuuint64_t)d, (cuuint64_t)rows, (cuuint64_t)heads};
	const cuuint64_t stride[2] = {(cuuint64_t)d * 2, (cuuint64_t)rows * d * 2};
	const cuuint32_t box[3] = {64, (cuuint32_t)box_rows, 1}, step[3] = {1, 1, 1};
	const CUresult r = encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void *>(base), dim, stride, box, step,
				  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
				  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "%s: cuTensorMapEncodeTiled failed (%d)\n", who, (int)r);
		return -1;
	}
	return 0;
}

#endif

/*
 * api_convert.h: libdsgap's layout conversions on the device (api_convert.cu): the caller's strided
 * Q/K/V/O (bf16, fp16 or fp32; element (t, h, e) at p + t*st + h*sh + e*se, strides in elements)
 * to and from the layouts of the DiT engine's attention entry point, in bf16: Q/K/V head-major
 * (heads, tokens, d), the output token-major with the heads merged (tokens, heads*d). Queued on
 * `stream` (a cudaStream_t; NULL: the legacy default stream). Their host twins are in
 * src/api/api.c. Plain C, so that C files include it; built into dsgapkernels (every kernels/ .cu).
 */
#ifndef DG_API_CONVERT_H
#define DG_API_CONVERT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dtype codes: those of dsgap.h's dsgap_dtype */
enum { DG_API_BF16 = 0, DG_API_FP16 = 1, DG_API_FP32 = 2 };

/* dst (heads, tokens, d) bf16 = src, rounded to nearest even (bf16 copied as it is). Returns 0 or
 * the launch's cudaError_t. */
int dg_api_gather_bf16(const void *src, int dtype, int64_t st, int64_t sh, int64_t se, int tokens, int heads,
		       int d, uint16_t *dst, void *stream);
/* dst (strided, dtype) = src (tokens, heads*d) bf16, rounded to nearest even for fp16 (widened
 * exactly for fp32, copied for bf16). Returns 0 or the launch's cudaError_t. */
int dg_api_scatter_bf16(const uint16_t *src, int tokens, int heads, int d, void *dst, int dtype, int64_t st,
			int64_t sh, int64_t se, void *stream);

#ifdef __cplusplus
}
#endif

#endif

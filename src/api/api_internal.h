/*
 * api_internal.h: libdsgap's pieces below the ABI (include/dsgap.h), for the tests: the host
 * conversions between the caller's strided tensors and the DiT attention entry point's layouts,
 * the twins of kernels/api_convert.cu.
 */
#ifndef DG_API_INTERNAL_H
#define DG_API_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "dsgap.h"

/* fp16 <-> fp32: widening exact, narrowing to nearest even (overflow to inf, NaN kept) */
float dg_api_f16_to_f32(uint16_t h);
uint16_t dg_api_f32_to_f16(float f);
/* dst (heads, n, d) fp32 = t's elements (t, h, e) of dtype dt, widened exactly */
void dg_api_gather_host(const dsgap_tensor *t, dsgap_dtype dt, int n, int heads, int d, float *dst);
/* t's elements (t, h, e) = src (n, heads*d) fp32, rounded to nearest even into dt */
void dg_api_scatter_host(const float *src, int n, int heads, int d, const dsgap_tensor *t, dsgap_dtype dt);

#endif

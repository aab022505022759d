/*
 * attn_common.cuh: the umbrella of the attention kernels' parts (not a public header), included by
 * attn_sm90.cuh, sparse_small.cuh, cache_store.cu, the metadata kernels (meta_common.cuh) and the
 * kernel lab (dev/kernels/). Each part states its own contract:
 *   attn_ptx.cuh       DG_DEV, bf16 and the PTX wrappers (cp.async, mbarrier, wgmma, mma.sync, ...)
 *   attn_params.cuh    the launch's parameter block, per-head accessors, work items and their walk
 *   attn_tiles.cuh     tile loads into 128-byte-swizzled shared memory (contiguous, gathered)
 *   attn_softmax.cuh   the online softmax on an MMA accumulator, masks, P's packing
 *   attn_epilogue.cuh  normalise and write O, the residual, the retained mass or the LSE
 *   attn_launch.cuh    host side: argument checks, parameter blocks, grid, launch
 * A kernel may include only the parts it needs.
 */
#ifndef DG_ATTN_COMMON_CUH
#define DG_ATTN_COMMON_CUH

#include "attn_ptx.cuh"
#include "attn_params.cuh"
#include "attn_tiles.cuh"
#include "attn_softmax.cuh"
#include "attn_epilogue.cuh"
#include "attn_launch.cuh"

#endif

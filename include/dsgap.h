/*
 * dsgap.h: libdsgap, dsgap's policies (docs/spec.md §3) inside any attention call: a small, stable C
 * ABI over the same policy code (src/backend/policy_run.c) and backends (CPU, GPU) as dsgap replay
 * and dsgap generate. One context is one model's self-attention under one policy: it keeps the
 * metadata (groups, selections) and cached residuals of every (branch, layer, head) across the
 * denoising steps, following the schedule (warm-up, anchors, dense layers).
 *
 *   dsgap_config cfg = { DSGAP_ABI_VERSION, "mc-sparse", &rho, 1, "warmup=10", 30, 12, 128, 2,
 *                        21, 30, 52, 0, "gpu" };
 *   dsgap_context *ctx;
 *   if (dsgap_context_create(&cfg, &ctx)) { puts(dsgap_last_error(NULL)); ... }
 *   for each step, layer, branch:
 *       dsgap_attend(ctx, step, layer, branch, &q, &k, &v, &o, DSGAP_BF16, tokens, stream);
 *   dsgap_context_destroy(ctx);
 *
 * Versioning. DSGAP_ABI_VERSION is this header's version; dsgap_abi_version() the library's. They
 * must be equal: a caller (e.g. a ctypes binding) checks it before anything else, and
 * dsgap_context_create refuses a config whose abi_version differs. A change of any signature,
 * struct layout or meaning bumps the version; new functions may be added within a version.
 *
 * Ownership. The library copies what the config points to (strings, densities) during
 * dsgap_context_create; the context owns every buffer it allocates (staging, metadata, residuals:
 * on the device for "gpu") until dsgap_context_destroy. Q, K, V and O stay the caller's: read
 * (Q, K, V) and written (O) only during the call and the work it orders on `stream`; O must not
 * overlap Q, K or V.
 *
 * Threading. A context is used by one thread at a time (calls on one context are not reentrant).
 * Distinct contexts are independent on the CPU. On the GPU a call converts Q/K/V on `stream`, waits
 * for the whole device (the DiT engine's attention entry point, src/dit/dit_attn.c, which a context
 * runs on, does so at its start and end), and queues the conversion into O on `stream`: O is ready
 * for the stream's next work, and for the host after it synchronises the stream. Where Q, K, V and O
 * are bf16 rows of one token stride (torch's (tokens, heads, dim), contiguous or padded; rows 16-byte
 * aligned) a call at a plain reuse step reads Q, K, V and writes O in place, with no conversion
 * (the same output). Calls of several
 * contexts serialise on the device. A stream being captured into a CUDA graph is not supported.
 *
 * Errors. Every function returns a code (dsgap_status: 0 = DSGAP_OK) and never exits on bad input;
 * the message of a context's last failure is dsgap_last_error(ctx), that of the calling thread's
 * last failed dsgap_context_create (or of a call with ctx NULL) dsgap_last_error(NULL). Messages are
 * one line, lowercase, problem first ("layer 7 out of range [0, 4)"). A failed dsgap_attend leaves
 * O unspecified and the context usable; a failure inside the policy (DSGAP_E_RUN) may leave the
 * (branch, layer)'s metadata as it was. The library never ends its caller's process on memory:
 * an allocation that fails in dsgap_context_create or in a call (host or device) returns
 * DSGAP_E_MEMORY with a message naming the bytes, the context's estimated need (operand buffers,
 * working buffers, the policy's caches built during the run), the memory available (MemAvailable,
 * the address-space limit RLIMIT_AS, or the device's free memory) and the largest token count (and
 * branches=1 where it helps) that would fit. A host call checks up front that its working memory
 * (the threads' buffers, the site's new caches) can be allocated; after a failure inside a call the
 * context refuses further calls (DSGAP_E_RUN) and is to be destroyed, which frees it (what the
 * interrupted code had allocated may stay allocated). Other fatal conditions of the core on the
 * calling thread (a CUDA runtime error) return DSGAP_E_RUN or DSGAP_E_DEVICE alike; internal
 * assertions (bugs) still abort.
 *
 * Tensors. Q, K, V, O of one branch and layer: `tokens` rows of `heads` heads of head_dim elements,
 * element (t, h, e) at data + t*stride_token + h*stride_head + e*stride_dim (strides in elements,
 * non-negative: (tokens, heads, dim) as diffusers' projections give them, (heads, tokens, dim), or
 * any view of either), host memory for "cpu", device memory of the current CUDA device for
 * "gpu". dtype DSGAP_BF16 or DSGAP_FP16 on both devices, DSGAP_FP32 too on the CPU. The policies
 * compute in fp32 on the CPU (bf16/fp16 inputs widened exactly) and on bf16 Q/K/V on the GPU (fp16
 * and fp32 inputs rounded to bf16); O is rounded to nearest even into its dtype.
 */
#ifndef DSGAP_H
#define DSGAP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DSGAP_ABI_VERSION 1

#if defined(__GNUC__)
#define DSGAP_API __attribute__((visibility("default")))
#else
#define DSGAP_API
#endif

typedef enum {
	DSGAP_OK = 0,
	DSGAP_E_ARG = 1,     /* a bad argument: NULL pointer, size out of range, ABI version mismatch */
	DSGAP_E_POLICY = 2,  /* the policy spec, a density or the schedule is not valid */
	DSGAP_E_DEVICE = 3,  /* the device is not available or cannot run this shape (GPU: head_dim 64 or 128) */
	DSGAP_E_INDEX = 4,   /* step, layer or branch out of range, or tokens other than the context's */
	DSGAP_E_DTYPE = 5,   /* a dtype the device does not take */
	DSGAP_E_RUN = 6,     /* the policy failed on these inputs (e.g. queries that cannot be grouped) */
	DSGAP_E_MEMORY = 7   /* out of memory (host or device): the message names the size and what fits */
} dsgap_status;

typedef enum { DSGAP_BF16 = 0, DSGAP_FP16 = 1, DSGAP_FP32 = 2 } dsgap_dtype;

typedef struct dsgap_context dsgap_context;

typedef struct {
	int abi_version;          /* DSGAP_ABI_VERSION */
	const char *policy;       /* a policy spec: "dense", "mc-sparse", "oracle-tile", "svg2",
				   * "mc-sparse/budget=topp:0.9" (docs/spec.md §3) */
	const double *densities;  /* top-k densities in (0, 1]: one for every layer, or one per layer */
	int ndensities;           /* 1 or layers */
	const char *schedule;     /* "warmup=W,anchors=a;b,dense_layers=l" (steps and layers as passed
				   * to dsgap_attend), or NULL / "" for none (the first step is the anchor) */
	int layers, heads, head_dim;
	int branches;             /* 1, or 2 with classifier-free guidance (each branch keeps its own state) */
	int frames, height, width; /* the latent token grid (tile3d, voxel, radial, sta use it); 1 x 1 x N
				    * for a sequence without one */
	int text_tokens;          /* tokens before the grid's in the sequence (a joint attention's text) */
	const char *device;       /* "cpu" or "gpu" */
} dsgap_config;

typedef struct {
	void *data;
	int64_t stride_token, stride_head, stride_dim; /* in elements, each >= 0 */
} dsgap_tensor;

typedef struct {
	long long calls;        /* (branch, layer, head) units attended */
	long long sparse_calls; /* of which sparse outputs */
	double pairs;           /* computed (query, key) pairs of all outputs */
	double full_pairs;      /* calls * tokens^2: pairs / full_pairs is the effective density */
	double seconds;         /* host time inside dsgap_attend: on the CPU the whole call; on the GPU the
				 * time to queue its work, which the call does not wait for */
	double policy_seconds;  /* of which the (branch, layer) calls that ran the policy */
	double meta_seconds;    /* device time of the metadata: groups, scores, selections */
	double attend_seconds;  /* device time of the sparse attention with its residual */
} dsgap_stats;

/* The library's ABI version: equal to DSGAP_ABI_VERSION of the header it was built with. */
DSGAP_API int dsgap_abi_version(void);
/* "0.1.0 (commit abc123; cpu, gpu)": the library's version, commit and devices (static storage). */
DSGAP_API const char *dsgap_version(void);

/* A context for cfg into *ctx (NULL on failure; then dsgap_last_error(NULL) says why).
 * Tokens = text_tokens + frames*height*width, fixed for the context. */
DSGAP_API int dsgap_context_create(const dsgap_config *cfg, dsgap_context **ctx);

/*
 * O = attention of Q, K, V (tokens, heads, head_dim each) under the context's policy at denoising
 * step `step` (0-based, ascending across calls; the schedule's steps) of block `layer` in CFG branch
 * `branch`. stream: the cudaStream_t the caller's work is ordered on ("gpu"; NULL = the legacy
 * default stream); ignored on the CPU. On the GPU the call reads Q/K/V and writes O in the order of
 * that stream and returns without waiting for the device: O is complete for the stream's later work.
 * Every element of O (t < tokens, h < heads, e < head_dim) is written; nothing else at O's address is.
 */
DSGAP_API int dsgap_attend(dsgap_context *ctx, int step, int layer, int branch, const dsgap_tensor *q,
			   const dsgap_tensor *k, const dsgap_tensor *v, const dsgap_tensor *o,
			   dsgap_dtype dtype, int tokens, void *stream);

/*
 * *dense = 1 when the call dsgap_attend(ctx, step, layer, branch, ...) would give plain dense
 * attention and change nothing the context keeps: a step of the warm-up that is not an anchor, a
 * dense layer, the "dense" policy. The caller may then compute that attention itself (e.g. with its
 * framework's fastest dense kernel) and not make the call; such calls are not in the counters.
 * *dense = 0 when the call makes, adopts or uses metadata or residuals: it must go to dsgap_attend.
 * Asking changes nothing; arguments are checked as dsgap_attend checks them.
 */
DSGAP_API int dsgap_site_is_dense(dsgap_context *ctx, int step, int layer, int branch, int *dense);

/* The context's counters since it was created (on the GPU this waits for the work queued so far). */
DSGAP_API int dsgap_context_stats(const dsgap_context *ctx, dsgap_stats *out);

/* The message of ctx's last failure ("" if none), or with ctx NULL the calling thread's last failure
 * of a call without a context (dsgap_context_create). Valid until the next call on the same
 * context (or, for NULL, the thread's next failing call). */
DSGAP_API const char *dsgap_last_error(const dsgap_context *ctx);

/* Closed-loop fidelity, as `dsgap generate` measures it (src/dit/fidelity.c, docs/spec.md §4): for
 * each frame f < F of x against ref, both float32 (C, F, H, W) contiguous, psnr[f] = 10 log10(L^2 /
 * MSE) over the frame's C*H*W values, L = max - min of ref's frame (1 if 0), +inf when identical;
 * ssim[f] the mean SSIM map (11x11 Gaussian window, sigma 1.5, renormalised at the borders,
 * C1 = (0.01 L)^2, C2 = (0.03 L)^2). DSGAP_E_ARG (dsgap_last_error(NULL)) on a NULL pointer or a size
 * below 1. Needs no context; host memory only. */
DSGAP_API int dsgap_frames_fidelity(const float *ref, const float *x, int channels, int frames, int height,
				    int width, double *psnr, double *ssim);

/* Free the context and everything it holds (waits for its device work). NULL is a no-op. */
DSGAP_API void dsgap_context_destroy(dsgap_context *ctx);

#ifdef __cplusplus
}
#endif

#endif

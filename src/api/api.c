/*
 * api.c: libdsgap's C ABI (include/dsgap.h). A context is the DiT engine's self-attention entry point
 * (dit/dit_attn.h: per (branch, layer, head) policy runs of backend/policy_run.h, the schedule, dense
 * sites through the op table) on an op table of the device's kind (dit/wan_ops.h: CPU or GPU), so
 * that a policy inside another model runs exactly the code of dsgap generate. What is added here:
 *   - validation of everything the caller passes, with codes and one-line messages, before any
 *     core function sees it (the core reports bad input on stderr and some of it stops the
 *     program; the spec and schedule parsers' lines are captured, see capture_begin);
 *   - the caller's strided bf16/fp16/fp32 Q/K/V into the entry point's layout, head-major
 *     (heads, tokens, d) operand buffers, and its merged output (tokens, heads*d) back into the
 *     caller's strided O: on the host in fp32 (the functions below), on the device in bf16
 *     (kernels/api_convert.cu, on the caller's stream). On the device nothing waits: the op table's
 *     stream waits for the caller's conversions, the entry point queues its work without waiting
 *     for the device (dg_dit_attn_opts.no_wait), and the caller's stream waits for the op table's
 *     before the output's conversion (events). Where q, k, v and o are bf16 token-major rows of one
 *     stride (torch's (tokens, heads, dim), contiguous or padded) and the site is a plain reuse step
 *     (dg_dit_attention_direct), the sparse kernel reads the caller's Q, K, V and writes its O in
 *     place: no conversion at all.
 */
#include "api/api_internal.h"

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dit/dit_attn.h"
#include "dit/fidelity.h"
#include "dit/memplan.h"
#include "dit/wan_ops.h"
#include "policy/policy.h"
#include "util/util.h"

#ifdef DG_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "api_convert.h"
#endif

#define MSG_MAX 1024

struct dsgap_context {
	char err[MSG_MAX];
	bool gpu;
	dg_wan_ops *ops;
	dg_dit_attn *attn;
	int layers, heads, d, branches, n;
	float *q, *k, *v, *out; /* operand buffers of ops: (heads, n, d) x 3, (n, heads*d) */
	double seconds;         /* inside dsgap_attend (host time) */
	dg_policy policy;       /* as parsed, and the schedule: the memory estimates of a failure */
	dg_schedule sched;
	double rho;
	char broken[MSG_MAX];   /* a call failed inside the core (out of memory): every later call refused */
#ifdef DG_HAVE_CUDA
	cudaEvent_t converted;  /* the caller's stream after the conversions: the table's stream waits on it */
	cudaEvent_t attended;   /* the table's stream after the entry point: the caller's waits on it */
#endif
};

static _Thread_local char thread_err[MSG_MAX];

static DG_PRINTF(3, 4) int fail(dsgap_context *ctx, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx ? ctx->err : thread_err, MSG_MAX, fmt, ap);
	va_end(ap);
	return code;
}

/* ------------------------------------------------------------------------------------------------ */
/* the core's messages during dsgap_context_create                                                  */

/*
 * The parsers and constructors report on stderr (util.h: dg_error). While a context is made, stderr
 * is a memory stream (glibc's stderr is a variable), under a lock so that two creates do not
 * interleave: the lines become the failure's message, or, when nothing failed (warnings), go to
 * the real stderr after. Another thread writing to stderr meanwhile has its line moved there too.
 */
typedef struct {
	FILE *saved, *mem;
	char *buf;
	size_t len;
} capture;

static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;

static void capture_begin(capture *c)
{
	pthread_mutex_lock(&capture_lock);
	fflush(stderr);
	c->saved = stderr;
	c->buf = NULL;
	c->len = 0;
	c->mem = open_memstream(&c->buf, &c->len);
	if (c->mem)
		stderr = c->mem;
}

/* ends the capture; with msg, the captured lines ("dsgap: error: " dropped, joined by "; ") */
static void capture_end(capture *c, char *msg, size_t size)
{
	if (c->mem) {
		fflush(c->mem);
		stderr = c->saved;
		fclose(c->mem); /* buf, len final */
	}
	if (msg && size) {
		msg[0] = 0;
		size_t at = 0;
		for (char *line = c->buf, *next; line && *line; line = next) {
			next = strchr(line, '\n');
			if (next)
				*next++ = 0;
			const char *text = line;
			if (!strncmp(text, "dsgap: error: ", 14))
				text += 14;
			if (!*text)
				continue;
			int w = snprintf(msg + at, size - at, "%s%s", at ? "; " : "", text);
			if (w < 0 || (size_t)w >= size - at)
				break;
			at += (size_t)w;
		}
	} else if (c->buf && c->len) {
		fwrite(c->buf, 1, c->len, stderr);
	}
	free(c->buf);
	pthread_mutex_unlock(&capture_lock);
}

/* ------------------------------------------------------------------------------------------------ */
/* host conversions (the twins of kernels/api_convert.cu)                                           */

float dg_api_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
	union { uint32_t u; float f; } x;
	if (exp == 0x1f) {
		x.u = sign | 0x7f800000u | (man << 13); /* inf, nan */
	} else if (exp) {
		x.u = sign | ((exp + 112) << 23) | (man << 13);
	} else { /* zero or subnormal: man * 2^-24, exact in fp32 */
		x.f = ldexpf((float)man, -24);
		x.u |= sign;
	}
	return x.f;
}

uint16_t dg_api_f32_to_f16(float f)
{
	union { float f; uint32_t u; } x = { .f = f };
	uint16_t sign = (uint16_t)((x.u >> 16) & 0x8000u);
	uint32_t a = x.u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return sign | 0x7e00u; /* nan */
	if (a >= 0x477ff000u)    /* rounds to 65520 or more: inf */
		return sign | 0x7c00u;
	if (a < 0x38800000u) { /* below the smallest normal (2^-14): a multiple of 2^-24, nearest even */
		float m = fabsf(f) * 16777216.0f; /* exact: scaling by a power of two */
		return sign | (uint16_t)nearbyintf(m); /* the default rounding mode: to nearest even */
	}
	uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* round the 13 dropped bits to nearest even */
	return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

static inline float load_f32(const void *p, dsgap_dtype dt, int64_t at)
{
	switch (dt) {
	case DSGAP_BF16: return dg_bf16_to_f32(((const uint16_t *)p)[at]);
	case DSGAP_FP16: return dg_api_f16_to_f32(((const uint16_t *)p)[at]);
	default: return ((const float *)p)[at];
	}
}

void dg_api_gather_host(const dsgap_tensor *t, dsgap_dtype dt, int n, int heads, int d, float *dst)
{
#pragma omp parallel for schedule(static) if ((double)n * heads * d > 1e5)
	for (int h = 0; h < heads; h++)
		for (int i = 0; i < n; i++) {
			float *row = dst + ((size_t)h * n + i) * d;
			int64_t base = i * t->stride_token + h * t->stride_head;
			for (int e = 0; e < d; e++)
				row[e] = load_f32(t->data, dt, base + e * t->stride_dim);
		}
}

void dg_api_scatter_host(const float *src, int n, int heads, int d, const dsgap_tensor *t, dsgap_dtype dt)
{
#pragma omp parallel for schedule(static) if ((double)n * heads * d > 1e5)
	for (int i = 0; i < n; i++)
		for (int h = 0; h < heads; h++) {
			const float *row = src + ((size_t)i * heads + h) * d;
			int64_t base = i * t->stride_token + h * t->stride_head;
			for (int e = 0; e < d; e++) {
				int64_t at = base + e * t->stride_dim;
				if (dt == DSGAP_BF16)
					((uint16_t *)t->data)[at] = dg_f32_to_bf16(row[e]);
				else if (dt == DSGAP_FP16)
					((uint16_t *)t->data)[at] = dg_api_f32_to_f16(row[e]);
				else
					((float *)t->data)[at] = row[e];
			}
		}
}

/* ------------------------------------------------------------------------------------------------ */
/* memory: what a context needs, what is available, what would fit (DSGAP_E_MEMORY's message)       */

#define GB 1e9

typedef struct {
	double operands, scratch, caches, threads, total; /* bytes */
} mem_need;

/* the estimates of a context (dit/memplan.h's for the policy's part) of n tokens and branches */
static void context_need(const dg_policy *p, const dg_schedule *s, double rho, int layers, int heads, int d,
			 int branches, int n, bool gpu, mem_need *m)
{
	dg_wan_config c;
	dg_wan_config_default(&c);
	c.dim = heads * d, c.num_heads = heads, c.num_layers = layers, c.ffn_dim = 0;
	int grid[3] = { 1, 1, n };
	dg_memplan plan;
	dg_memplan_make(&plan, &c, grid, p, rho, s, branches, gpu, false);
	int threads = 1;
#ifdef _OPENMP
	threads = omp_get_max_threads();
#endif
	m->operands = 4.0 * heads * n * d * (gpu ? 2 : 4);
	/* the CPU backend's six (n, d) / n buffers (backend_cpu.c), else the plan's O, LSE, scores */
	m->scratch = p->dense ? 0 : plan.scratch + (gpu ? 0 : 3.0 * n * d * 4);
	m->caches = p->dense ? 0 : plan.device_caches;
	/* the host threads' score rows of dense attention (policy/attention.c: at most 32 MB each) */
	double rows = fmin(32.0 * n * 4, 32e6) + 2.0 * n * 4;
	m->threads = gpu ? 0 : threads * rows;
	m->total = m->operands + m->scratch + m->caches + m->threads;
}

/* bytes the process may still allocate on the host and where that limit comes from */
static double host_available(const char **what)
{
	double avail = dg_memplan_host_limit(); /* DSGAP_HOST_LIMIT_GIB or MemAvailable */
	*what = getenv("DSGAP_HOST_LIMIT_GIB") ? "DSGAP_HOST_LIMIT_GIB" : "MemAvailable";
	struct rlimit r;
	if (!getrlimit(RLIMIT_AS, &r) && r.rlim_cur != RLIM_INFINITY) {
		double vm = 0;
		FILE *f = fopen("/proc/self/statm", "r");
		if (f) {
			unsigned long pages = 0;
			if (fscanf(f, "%lu", &pages) == 1)
				vm = (double)pages * sysconf(_SC_PAGESIZE);
			fclose(f);
		}
		double left = (double)r.rlim_cur - vm;
		if (!(avail > 0) || left < avail)
			avail = left, *what = "RLIMIT_AS, the address-space limit";
	}
	return avail > 0 ? avail : 0;
}

static double available(bool gpu, const char **what)
{
#ifdef DG_HAVE_CUDA
	if (gpu) {
		size_t fr = 0, total = 0;
		*what = "the device's free memory";
		return cudaMemGetInfo(&fr, &total) == cudaSuccess ? (double)fr : 0;
	}
#endif
	(void)gpu;
	return host_available(what);
}

/* msg: "<head>: <the context's need>, <available>: <what would fit>" (one line) */
static void memory_message(char *msg, size_t size, const char *head, const dg_policy *p, const dg_schedule *s,
			   double rho, int layers, int heads, int d, int branches, int n, bool gpu, double avail,
			   const char *from)
{
	mem_need m;
	context_need(p, s, rho, layers, heads, d, branches, n, gpu, &m);
	int at = snprintf(msg, size, "%s: policy '%s', %d layers x %d heads x %d, %d branch%s, %d tokens on the %s "
			  "needs about %.2f GB (operand buffers %.2f, working buffers %.2f, the policy's caches built "
			  "during the run %.2f), and %.2f GB is available (%s)", head, p->dense ? "dense" : p->name,
			  layers, heads, d, branches, branches > 1 ? "es" : "", n, gpu ? "gpu" : "cpu", m.total / GB,
			  m.operands / GB, (m.scratch + m.threads) / GB, m.caches / GB, avail / GB, from);
	if (at < 0 || (size_t)at >= size)
		return;
	int lo = 0, hi = n; /* the most tokens that fit: need grows with n */
	while (lo < hi) {
		int mid = lo + (hi - lo + 1) / 2;
		mem_need t;
		context_need(p, s, rho, layers, heads, d, branches, mid, gpu, &t);
		if (t.total <= avail)
			lo = mid;
		else
			hi = mid - 1;
	}
	mem_need b1;
	context_need(p, s, rho, layers, heads, d, 1, n, gpu, &b1);
	if (lo >= n)
		snprintf(msg + at, size - at, ": it should fit; free memory elsewhere in the process (or raise the limit) "
			 "and try again");
	else if (lo > 0)
		snprintf(msg + at, size - at, ": at most %d tokens (a smaller grid or fewer text tokens) would fit%s", lo,
			 branches > 1 && b1.total <= avail ? ", or branches=1 (no CFG state) at these tokens" : "");
	else
		snprintf(msg + at, size - at, ": no token count fits; free memory or raise the limit");
}

/* ------------------------------------------------------------------------------------------------ */
/* the ABI                                                                                          */

int dsgap_abi_version(void) { return DSGAP_ABI_VERSION; }

const char *dsgap_version(void)
{
	static char v[160];
	if (!v[0])
		snprintf(v, sizeof v, "%s (commit %s; cpu%s)", DG_VERSION, dg_git_commit(),
#ifdef DG_HAVE_CUDA
			 ", gpu"
#else
			 ""
#endif
		);
	return v;
}

const char *dsgap_last_error(const dsgap_context *ctx) { return ctx ? ctx->err : thread_err; }

/* the config's sizes and strings; 0 or a code (thread_err set) */
static int check_config(const dsgap_config *c, bool *gpu)
{
	if (!c)
		return fail(NULL, DSGAP_E_ARG, "config is NULL");
	if (c->abi_version != DSGAP_ABI_VERSION)
		return fail(NULL, DSGAP_E_ARG, "config of ABI version %d, this libdsgap is version %d",
			    c->abi_version, DSGAP_ABI_VERSION);
	if (!c->device || (strcmp(c->device, "cpu") && strcmp(c->device, "gpu")))
		return fail(NULL, DSGAP_E_ARG, "device '%s' is neither cpu nor gpu", c->device ? c->device : "(null)");
	*gpu = !strcmp(c->device, "gpu");
	if (!c->policy || !*c->policy)
		return fail(NULL, DSGAP_E_POLICY, "no policy spec");
	struct { const char *name; int v, lo, hi; } sizes[] = {
		{ "layers", c->layers, 1, 1 << 16 },     { "heads", c->heads, 1, 1 << 12 },
		{ "head_dim", c->head_dim, 1, 1 << 12 }, { "branches", c->branches, 1, 2 },
		{ "frames", c->frames, 1, 1 << 20 },     { "height", c->height, 1, 1 << 20 },
		{ "width", c->width, 1, 1 << 20 },       { "text_tokens", c->text_tokens, 0, 1 << 24 },
	};
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
		if (sizes[i].v < sizes[i].lo || sizes[i].v > sizes[i].hi)
			return fail(NULL, DSGAP_E_ARG, "%s %d out of range [%d, %d]", sizes[i].name, sizes[i].v,
				    sizes[i].lo, sizes[i].hi);
	double tokens = (double)c->frames * c->height * c->width + c->text_tokens;
	if (tokens > (1 << 24))
		return fail(NULL, DSGAP_E_ARG, "%.0f tokens: more than %d", tokens, 1 << 24);
	if (*gpu && c->head_dim != 64 && c->head_dim != 128)
		return fail(NULL, DSGAP_E_DEVICE, "the GPU kernels take head_dim 64 or 128, not %d", c->head_dim);
	if (c->ndensities != 1 && c->ndensities != c->layers)
		return fail(NULL, DSGAP_E_POLICY, "%d densities for %d layers: give 1 or %d", c->ndensities,
			    c->layers, c->layers);
	if (!c->densities)
		return fail(NULL, DSGAP_E_POLICY, "densities is NULL");
	for (int i = 0; i < c->ndensities; i++)
		if (!(c->densities[i] > 0 && c->densities[i] <= 1))
			return fail(NULL, DSGAP_E_POLICY, "density %g%s is outside (0, 1]", c->densities[i],
				    c->ndensities > 1 ? " (of a layer)" : "");
	return 0;
}

void dsgap_context_destroy(dsgap_context *ctx)
{
	if (!ctx)
		return;
	if (ctx->attn)
		dg_dit_attn_settle(ctx->attn); /* its device work done before its buffers go */
	dg_dit_attn_free(ctx->attn);
#ifdef DG_HAVE_CUDA
	if (ctx->converted)
		cudaEventDestroy(ctx->converted);
	if (ctx->attended)
		cudaEventDestroy(ctx->attended);
#endif
	if (ctx->ops) {
		float *bufs[] = { ctx->q, ctx->k, ctx->v, ctx->out };
		for (int i = 0; i < 4; i++)
			if (bufs[i])
				ctx->ops->release(ctx->ops, bufs[i]);
		ctx->ops->destroy(ctx->ops);
	}
	free(ctx);
}

/* what dsgap_context_create keeps across its trap (not automatic variables: a longjmp leaves those
 * changed after setjmp indeterminate) */
static _Thread_local struct {
	capture cap;
	bool capturing;
	dg_policy policy;
	dg_schedule sched;
	dsgap_context *ctx;
} mk;

int dsgap_context_create(const dsgap_config *cfg, dsgap_context **out)
{
	if (!out)
		return fail(NULL, DSGAP_E_ARG, "context pointer is NULL");
	*out = NULL;
	bool gpu = false;
	int rc = check_config(cfg, &gpu);
	if (rc)
		return rc;
	dg_trap trap;
	memset(&mk, 0, sizeof mk);
	int jumped = setjmp(trap.jb);
	if (jumped) { /* out of memory (or another fatal condition) on this thread: a code, never an exit */
		dg_trap_cur = NULL;
		if (mk.capturing)
			capture_end(&mk.cap, NULL, 0), mk.capturing = false;
		char head[384];
		int n = cfg->text_tokens + cfg->frames * cfg->height * cfg->width;
		bool oom = jumped == 1 || strstr(trap.msg, "out of memory");
		dsgap_context_destroy(mk.ctx); /* what was made; parts allocated before the failure may stay */
		mk.ctx = NULL;
		if (oom) {
			const char *from;
			double avail = available(gpu, &from);
			snprintf(head, sizeof head, "%s making the context", trap.msg);
			memory_message(thread_err, MSG_MAX, head, &mk.policy, &mk.sched, cfg->densities[0], cfg->layers,
				       cfg->heads, cfg->head_dim, cfg->branches, n, gpu, avail, from);
		} else {
			fail(NULL, 0, "making the context: %s", trap.msg);
		}
		return oom ? DSGAP_E_MEMORY : gpu ? DSGAP_E_DEVICE : DSGAP_E_RUN;
	}
	dg_trap_cur = &trap;
	char why[256];
	capture_begin(&mk.cap);
	mk.capturing = true;
	if (dg_policy_parse(cfg->policy, &mk.policy))
		rc = DSGAP_E_POLICY;
	else if (dg_schedule_parse(cfg->schedule, &mk.sched))
		rc = DSGAP_E_POLICY;
	else if (dg_schedule_check_loop(&mk.sched, 0, cfg->layers, why, sizeof why))
		rc = DSGAP_E_POLICY, dg_error("schedule '%s': %s", cfg->schedule, why);
	dg_policy policy = mk.policy;
	dg_schedule sched = mk.sched;
	dsgap_context *ctx = NULL;
	if (!rc) {
		ctx = mk.ctx = dg_calloc(1, sizeof *ctx);
		ctx->policy = policy, ctx->sched = sched, ctx->rho = cfg->densities[0];
		ctx->gpu = gpu;
		ctx->layers = cfg->layers, ctx->heads = cfg->heads, ctx->d = cfg->head_dim;
		ctx->branches = cfg->branches;
		ctx->n = cfg->text_tokens + cfg->frames * cfg->height * cfg->width;
		ctx->ops = gpu ? dg_wan_ops_gpu() : dg_wan_ops_cpu();
		if (!ctx->ops)
			rc = DSGAP_E_DEVICE;
	}
	if (!rc) {
		int grid[3] = { cfg->frames, cfg->height, cfg->width };
		dg_dit_attn_opts opts = { .layer_rho = cfg->ndensities > 1 ? cfg->densities : NULL,
					  .text_tokens = cfg->text_tokens, .no_wait = gpu };
		/* densities were checked: a failure here is the device's (its backend) */
		ctx->attn = dg_dit_attn_new_opts(ctx->ops, &policy, cfg->densities[0], &sched, grid, cfg->layers,
						 cfg->heads, cfg->head_dim, cfg->branches, &opts);
		if (!ctx->attn)
			rc = DSGAP_E_DEVICE;
	}
	mk.capturing = false;
	capture_end(&mk.cap, rc ? thread_err : NULL, MSG_MAX);
	if (rc) {
		dg_trap_cur = NULL;
		if (!thread_err[0])
			fail(NULL, rc, "policy '%s' on %s: cannot make the context", cfg->policy, cfg->device);
		dsgap_context_destroy(ctx);
		return rc;
	}
	size_t hs = (size_t)ctx->heads * ctx->n * ctx->d;
	ctx->q = ctx->ops->alloc_operand(ctx->ops, hs);
	ctx->k = ctx->ops->alloc_operand(ctx->ops, hs);
	ctx->v = ctx->ops->alloc_operand(ctx->ops, hs);
	ctx->out = ctx->ops->alloc_operand(ctx->ops, hs);
	dg_trap_cur = NULL;
	mk.ctx = NULL;
	*out = ctx;
	return DSGAP_OK;
}

int dsgap_context_stats(const dsgap_context *ctx, dsgap_stats *out)
{
	if (!ctx || !out)
		return fail(NULL, DSGAP_E_ARG, "%s is NULL", ctx ? "stats" : "context");
	dg_dit_attn_stats s;
	dg_dit_attn_settle(ctx->attn); /* the device times of the calls queued so far */
	dg_dit_attn_get_stats(ctx->attn, &s);
	*out = (dsgap_stats){ s.calls, s.sparse_calls, s.pairs, s.full_pairs, ctx->seconds, s.policy_seconds,
			      s.meta_seconds, s.attend_seconds };
	return DSGAP_OK;
}

/* a tensor argument: present, strides non-negative, its extent addressable */
static int check_tensor(dsgap_context *ctx, const char *name, const dsgap_tensor *t)
{
	if (!t || !t->data)
		return fail(ctx, DSGAP_E_ARG, "%s is NULL", name);
	if (t->stride_token < 0 || t->stride_head < 0 || t->stride_dim < 0)
		return fail(ctx, DSGAP_E_ARG, "%s: negative stride (%lld, %lld, %lld)", name,
			    (long long)t->stride_token, (long long)t->stride_head, (long long)t->stride_dim);
	double last = (double)(ctx->n - 1) * t->stride_token + (double)(ctx->heads - 1) * t->stride_head +
		      (double)(ctx->d - 1) * t->stride_dim;
	if (last > 9e15)
		return fail(ctx, DSGAP_E_ARG, "%s: strides reach past 2^53 elements", name);
	return 0;
}

/* step, layer and branch of a call: within the context's */
static int check_site(dsgap_context *ctx, int step, int layer, int branch)
{
	if (step < 0)
		return fail(ctx, DSGAP_E_INDEX, "step %d is negative", step);
	if (layer < 0 || layer >= ctx->layers)
		return fail(ctx, DSGAP_E_INDEX, "layer %d out of range [0, %d)", layer, ctx->layers);
	if (branch < 0 || branch >= ctx->branches)
		return fail(ctx, DSGAP_E_INDEX, "branch %d out of range [0, %d)", branch, ctx->branches);
	return 0;
}

int dsgap_site_is_dense(dsgap_context *ctx, int step, int layer, int branch, int *dense)
{
	if (!ctx || !dense)
		return fail(ctx, DSGAP_E_ARG, "%s is NULL", ctx ? "dense" : "context");
	ctx->err[0] = 0;
	int rc = check_site(ctx, step, layer, branch);
	if (rc)
		return rc;
	dg_attn_site site = { .step = step, .layer = layer, .pass = branch, .sigma = 0 };
	*dense = dg_dit_attn_site_dense(ctx->attn, &site);
	return DSGAP_OK;
}

static int attend(dsgap_context *ctx, int step, int layer, int branch, const dsgap_tensor *q,
		  const dsgap_tensor *k, const dsgap_tensor *v, const dsgap_tensor *o, dsgap_dtype dtype,
		  int tokens, void *stream);

/* a host call's working memory up front (its threads' buffers are not covered by the trap, util.h):
 * the policy's buffers, the threads' score rows and the caches one site adds */
static int host_memory_check(dsgap_context *ctx, int step, int layer, int branch)
{
	mem_need m;
	context_need(&ctx->policy, &ctx->sched, ctx->rho, ctx->layers, ctx->heads, ctx->d, ctx->branches, ctx->n,
		     false, &m);
	double site = ctx->policy.dense ? 0 : m.caches / ((double)ctx->branches * ctx->layers);
	double want = m.threads + (ctx->policy.dense ? 0 : m.scratch) + site;
	void *p = want > 0 && want < 9e18 ? malloc((size_t)want) : NULL;
	if (p || !(want > 0)) {
		free(p);
		return 0;
	}
	const char *from;
	double avail = host_available(&from);
	char head[256];
	snprintf(head, sizeof head, "out of memory (%.0f bytes of working memory) at step %d, layer %d, branch %d",
		 want, step, layer, branch);
	memory_message(ctx->err, MSG_MAX, head, &ctx->policy, &ctx->sched, ctx->rho, ctx->layers, ctx->heads,
		       ctx->d, ctx->branches, ctx->n, false, avail, from);
	return DSGAP_E_MEMORY;
}

int dsgap_attend(dsgap_context *ctx, int step, int layer, int branch, const dsgap_tensor *q,
		 const dsgap_tensor *k, const dsgap_tensor *v, const dsgap_tensor *o, dsgap_dtype dtype,
		 int tokens, void *stream)
{
	if (!ctx)
		return fail(NULL, DSGAP_E_ARG, "context is NULL");
	ctx->err[0] = 0;
	if (ctx->broken[0])
		return fail(ctx, DSGAP_E_RUN, "this context failed in an earlier call (%.700s): destroy it "
			    "(dsgap_context_destroy frees its memory) and make one that fits", ctx->broken);
	dg_trap trap;
	int jumped = setjmp(trap.jb);
	if (jumped) {
		dg_trap_cur = NULL;
		bool oom = jumped == 1 || strstr(trap.msg, "out of memory");
		if (oom) {
			const char *from;
			double avail = available(ctx->gpu, &from);
			char head[384];
			snprintf(head, sizeof head, "%s at step %d, layer %d, branch %d", trap.msg, step, layer, branch);
			memory_message(ctx->err, MSG_MAX, head, &ctx->policy, &ctx->sched, ctx->rho, ctx->layers,
				       ctx->heads, ctx->d, ctx->branches, ctx->n, ctx->gpu, avail, from);
		} else {
			fail(ctx, 0, "step %d, layer %d, branch %d: %s", step, layer, branch, trap.msg);
		}
		snprintf(ctx->broken, MSG_MAX, "%.600s", ctx->err);
		return oom ? DSGAP_E_MEMORY : ctx->gpu ? DSGAP_E_DEVICE : DSGAP_E_RUN;
	}
	dg_trap_cur = &trap;
	int rc = attend(ctx, step, layer, branch, q, k, v, o, dtype, tokens, stream);
	dg_trap_cur = NULL;
	return rc;
}

#ifdef DG_HAVE_CUDA
/* t holds H heads of d as token-major rows ld apart (head h's row r at r * ld + h * d), 16-byte rows:
 * what the sparse kernel reads in place (dg_dit_attention_direct) */
static bool token_major(const dsgap_tensor *t, int ld, int H, int d)
{
	return t->stride_dim == 1 && t->stride_head == d && t->stride_token == ld && ld >= H * d && ld % 8 == 0 &&
	       !((uintptr_t)t->data & 15);
}

/* the op table works on the legacy default stream, and the entry point may copy Q/K/V to the host
 * (peers' host twins) before it waits for the device: it is ordered after the caller's work so far
 * (the conversions, or the caller's own writes of Q, K, V; nothing to do when the caller's stream is
 * that stream already: torch's default stream) */
static int order_after(dsgap_context *ctx, void *stream)
{
	if (stream && ((!ctx->converted && cudaEventCreateWithFlags(&ctx->converted, cudaEventDisableTiming)) ||
		       cudaEventRecord(ctx->converted, (cudaStream_t)stream) || cudaStreamWaitEvent(0, ctx->converted, 0)))
		return fail(ctx, DSGAP_E_DEVICE, "ordering the op table after the caller's stream: %s",
			    cudaGetErrorString(cudaGetLastError()));
	return 0;
}

/* the entry point queued its work on the table's stream: the caller's waits for it */
static int caller_after(dsgap_context *ctx, void *stream)
{
	if (stream && ((!ctx->attended && cudaEventCreateWithFlags(&ctx->attended, cudaEventDisableTiming)) ||
		       cudaEventRecord(ctx->attended, 0) || cudaStreamWaitEvent((cudaStream_t)stream, ctx->attended, 0)))
		return fail(ctx, DSGAP_E_DEVICE, "ordering the caller's stream after the op table: %s",
			    cudaGetErrorString(cudaGetLastError()));
	return 0;
}
#endif

static int attend(dsgap_context *ctx, int step, int layer, int branch, const dsgap_tensor *q,
		  const dsgap_tensor *k, const dsgap_tensor *v, const dsgap_tensor *o, dsgap_dtype dtype,
		  int tokens, void *stream)
{
	if (dtype != DSGAP_BF16 && dtype != DSGAP_FP16 && dtype != DSGAP_FP32)
		return fail(ctx, DSGAP_E_DTYPE, "dtype %d is none of bf16 (0), fp16 (1), fp32 (2)", (int)dtype);
	if (ctx->gpu && dtype == DSGAP_FP32)
		return fail(ctx, DSGAP_E_DTYPE, "fp32 tensors on the gpu: pass bf16 or fp16");
	int rc = check_site(ctx, step, layer, branch);
	if (rc)
		return rc;
	if (tokens != ctx->n)
		return fail(ctx, DSGAP_E_INDEX, "%d tokens: the context was made for %d", tokens, ctx->n);
	const dsgap_tensor *ts[4] = { q, k, v, o };
	const char *names[4] = { "q", "k", "v", "o" };
	for (int i = 0; i < 4; i++) {
		rc = check_tensor(ctx, names[i], ts[i]);
		if (rc)
			return rc;
	}
	if (!ctx->gpu && (rc = host_memory_check(ctx, step, layer, branch)))
		return rc;
	double t0 = dg_now();
	int n = ctx->n, H = ctx->heads, d = ctx->d;
	dg_attn_site site = { .step = step, .layer = layer, .pass = branch, .sigma = 0 };
#ifdef DG_HAVE_CUDA
	const int ld = (int)q->stride_token;
	if (ctx->gpu && dtype == DSGAP_BF16 && token_major(q, ld, H, d) && token_major(k, ld, H, d) &&
	    token_major(v, ld, H, d) && token_major(o, ld, H, d)) {
		if ((rc = order_after(ctx, stream)))
			return rc;
		rc = dg_dit_attention_direct(ctx->attn, &site, q->data, k->data, v->data, ld, o->data, ld);
		if (rc < 0)
			return fail(ctx, DSGAP_E_RUN, "the policy failed at step %d, layer %d, branch %d (its reason is "
				    "on stderr)", step, layer, branch);
		if (rc == 0) {
			if ((rc = caller_after(ctx, stream)))
				return rc;
			ctx->seconds += dg_now() - t0;
			return DSGAP_OK;
		}
	}
#endif
	float *dst[3] = { ctx->q, ctx->k, ctx->v };
	if (!ctx->gpu) {
		for (int i = 0; i < 3; i++)
			dg_api_gather_host(ts[i], dtype, n, H, d, dst[i]);
	} else {
#ifdef DG_HAVE_CUDA
		for (int i = 0; i < 3; i++) {
			uint16_t *b = ctx->ops->bf16(ctx->ops, dst[i], (size_t)H * n * d);
			int e = dg_api_gather_bf16(ts[i]->data, (int)dtype, ts[i]->stride_token, ts[i]->stride_head,
						   ts[i]->stride_dim, n, H, d, b, stream);
			if (e)
				return fail(ctx, DSGAP_E_DEVICE, "converting %s on the device: CUDA error %d", names[i], e);
		}
		if ((rc = order_after(ctx, stream)))
			return rc;
#endif
	}
	if (dg_dit_attention(ctx->attn, &site, ctx->q, ctx->k, ctx->v, ctx->out))
		return fail(ctx, DSGAP_E_RUN, "the policy failed at step %d, layer %d, branch %d (its reason is "
			    "on stderr)", step, layer, branch);
	if (!ctx->gpu) {
		dg_api_scatter_host(ctx->out, n, H, d, o, dtype);
	} else {
#ifdef DG_HAVE_CUDA
		if ((rc = caller_after(ctx, stream)))
			return rc;
		const uint16_t *b = ctx->ops->bf16(ctx->ops, ctx->out, (size_t)H * n * d);
		int e = dg_api_scatter_bf16(b, n, H, d, o->data, (int)dtype, o->stride_token, o->stride_head,
					    o->stride_dim, stream);
		if (e)
			return fail(ctx, DSGAP_E_DEVICE, "converting o on the device: CUDA error %d", e);
#endif
	}
	ctx->seconds += dg_now() - t0;
	return DSGAP_OK;
}

int dsgap_frames_fidelity(const float *ref, const float *x, int channels, int frames, int height, int width,
			  double *psnr, double *ssim)
{
	if (!ref || !x || !psnr || !ssim)
		return fail(NULL, DSGAP_E_ARG, "frames fidelity: a NULL pointer");
	if (channels < 1 || frames < 1 || height < 1 || width < 1)
		return fail(NULL, DSGAP_E_ARG, "frames fidelity: size %dx%dx%dx%d (channels, frames, height, width) "
			    "below 1", channels, frames, height, width);
	dg_frames_fidelity(ref, x, channels, frames, height, width, psnr, ssim);
	return DSGAP_OK;
}

/*
 * gpu_api.c: libdsgap's C ABI on the GPU against the same ABI on the CPU (include/dsgap.h). Device
 * tensors in strided layouts (token-major padded, head-major, an element stride of 2, and torch's
 * (tokens, heads, dim) contiguous and padded to 16 bytes, which take the conversions' 16-byte path;
 * each case turns the layouts one place on, so that each of q, k, v, o meets each), bf16 and fp16, on a
 * non-blocking stream whose copies of the inputs are still queued when dsgap_attend is called (the
 * call must order itself after them), under dense, a ladder rung, mc-sparse (warm-up, anchor, residual
 * reused) and peers whose metadata runs on the device with no host copy of Q/K/V (svg2's k-means,
 * pisa's block scores and first-order term; DiTFastAttn's window kernel), two CFG branches, several
 * steps and layers. The GPU computes on bf16 Q/K/V with P rounded to bf16 (the closed loop's fast
 * mode), the CPU in fp32: per call, rel_l2(GPU, CPU) <= 2e-2 (bf16 attention is ~4e-3; a selection
 * that differs at a near tie moves a few keys), every output element finite and the positions
 * between them untouched; the same with a text prefix (joint attention, docs/spec.md §3.7: mc-sparse,
 * a ladder rung, pisa and ditfastattn, the text rows dense on reuse steps without a dense pass too).
 * Also fp32 refused on the GPU, and 100 contexts of several kinds made, used and freed with the
 * device memory in use back where it was (contexts()).
 * Exits 77 (skipped) without a device.
 *   build/tests/gpu_api      (on the GPU machine: scripts/device_all.sh, step gpu_api)
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "backend/backend.h"
#include "dsgap.h"
#include "testhelp.h"
#include "util/util.h"

#define H 2
#define L 2
#define B 2
#define STEPS 4
#define POISON16 0x7fc1u
#define TOL 2e-2
#define LAYOUTS 6 /* of tens_new */

#define CU(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static int D = 128;
static int T = 0; /* text tokens before the grid's */

typedef struct {
	uint16_t *host; /* the whole buffer, elements and gaps */
	void *dev;
	size_t len;
	dsgap_tensor th, td; /* on the host (CPU context), on the device */
	int n;
} tens;

static void tens_new(tens *x, int layout, int n)
{
	int64_t st, sh, sd = 1;
	switch (layout) {
	case 0: sh = D + 8, st = H * (D + 8) + 4; break;
	case 1: st = D, sh = (int64_t)n * D + 16; break;
	case 2: sd = 2, sh = 2 * D, st = 2 * D * H + 2; break;
	case 4: sh = D, st = (int64_t)H * D; break;           /* torch's contiguous (tokens, heads, dim) */
	case 5: sh = D + 8, st = (int64_t)H * (D + 8) + 16; break; /* padded, rows on 16 bytes */
	default: sh = D + 4, st = H * (D + 4) + 2; break;
	}
	x->len = (size_t)((n - 1) * st + (H - 1) * sh + (D - 1) * sd + 1 + 8);
	x->host = malloc(x->len * 2);
	CU(cudaMalloc(&x->dev, x->len * 2));
	x->th = (dsgap_tensor){ x->host, st, sh, sd };
	x->td = (dsgap_tensor){ x->dev, st, sh, sd };
	x->n = n;
}

static void tens_free(tens *x)
{
	free(x->host);
	CU(cudaFree(x->dev));
}

static size_t at(const tens *x, int t, int h, int e)
{
	return (size_t)(t * x->th.stride_token + h * x->th.stride_head + e * x->th.stride_dim);
}

static double gauss(uint64_t *s)
{
	double u[2];
	for (int i = 0; i < 2; i++) {
		*s = *s * 6364136223846793005ull + 1442695040888963407ull;
		u[i] = ((*s >> 11) + 0.5) / 9007199254740992.0;
	}
	return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* host buffer: poison, then the elements of (step, layer, branch, which) in dtype dt */
static void tens_fill(tens *x, dsgap_dtype dt, int step, int layer, int branch, int which)
{
	for (size_t i = 0; i < x->len; i++)
		x->host[i] = POISON16;
	uint64_t base = 1000 + 97 * layer + 13 * branch + which, drift = base * 31 + step;
	for (int h = 0; h < H; h++)
		for (int t = 0; t < x->n; t++)
			for (int e = 0; e < D; e++) {
				/* fp16 inputs hold bf16 values: the GPU computes on bf16 Q/K/V, the CPU on the
				 * inputs as given, and the two must see the same numbers to be compared */
				float f = dg_round_bf16((float)(1.3 * gauss(&base) + 0.25 * gauss(&drift)));
				x->host[at(x, t, h, e)] = dt == DSGAP_BF16 ? dg_f32_to_bf16(f) : dg_api_f32_to_f16(f);
			}
}

static float val(const tens *x, dsgap_dtype dt, size_t a)
{
	return dt == DSGAP_BF16 ? dg_bf16_to_f32(x->host[a]) : dg_api_f16_to_f32(x->host[a]);
}

typedef struct {
	double worst;      /* largest rel_l2 of a call */
	long nonfinite;    /* GPU output elements not finite */
	long gaps;         /* GPU output positions between elements that lost their poison */
	int fails;         /* calls that did not return DSGAP_OK */
} outcome;

static void run_case(const char *spec, const char *sched, double rho, const int grid[3], dsgap_dtype dt)
{
	int n = T + grid[0] * grid[1] * grid[2];
	dsgap_config c = { DSGAP_ABI_VERSION, spec, &rho, 1, sched, L, H, D, B, grid[0], grid[1], grid[2], T, "cpu" };
	dsgap_context *cpu, *gpu;
	if (dsgap_context_create(&c, &cpu)) {
		CHECKF(0, "%s: cpu context (%s)", spec, dsgap_last_error(NULL));
		return;
	}
	c.device = "gpu";
	if (dsgap_context_create(&c, &gpu)) {
		CHECKF(0, "%s: gpu context (%s)", spec, dsgap_last_error(NULL));
		dsgap_context_destroy(cpu);
		return;
	}
	cudaStream_t stream;
	CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	tens t[4], og; /* q, k, v, o on the CPU; og: the GPU's o copied back, in o's layout */
	static int turn; /* the layouts one place on at each case */
	for (int i = 0; i < 4; i++)
		tens_new(&t[i], (i + turn) % LAYOUTS, n);
	tens_new(&og, (3 + turn) % LAYOUTS, n);
	turn++;
	outcome out = { 0 };
	for (int s = 0; s < STEPS; s++)
		for (int l = 0; l < L; l++)
			for (int b = 0; b < B; b++) {
				for (int i = 0; i < 3; i++) {
					tens_fill(&t[i], dt, s, l, b, i);
					/* queued on the stream, not waited for: dsgap_attend must order after it */
					CU(cudaMemcpyAsync(t[i].dev, t[i].host, t[i].len * 2, cudaMemcpyHostToDevice, stream));
				}
				for (size_t i = 0; i < og.len; i++)
					og.host[i] = t[3].host[i] = POISON16;
				CU(cudaMemcpyAsync(og.dev, og.host, og.len * 2, cudaMemcpyHostToDevice, stream));
				out.fails += dsgap_attend(gpu, s, l, b, &t[0].td, &t[1].td, &t[2].td, &og.td, dt, n, stream) != 0;
				out.fails += dsgap_attend(cpu, s, l, b, &t[0].th, &t[1].th, &t[2].th, &t[3].th, dt, n, NULL) != 0;
				CU(cudaMemcpyAsync(og.host, og.dev, og.len * 2, cudaMemcpyDeviceToHost, stream));
				CU(cudaStreamSynchronize(stream));
				double num = 0, den = 0;
				char *is = calloc(og.len, 1);
				for (int tk = 0; tk < n; tk++)
					for (int h = 0; h < H; h++)
						for (int e = 0; e < D; e++) {
							size_t a = at(&og, tk, h, e);
							is[a] = 1;
							float g = val(&og, dt, a), r = val(&t[3], dt, a);
							out.nonfinite += !isfinite(g);
							num += ((double)g - r) * ((double)g - r), den += (double)r * r;
						}
				for (size_t i = 0; i < og.len; i++)
					out.gaps += !is[i] && og.host[i] != POISON16;
				free(is);
				double rel = sqrt(num / (den > 0 ? den : 1));
				if (!(rel <= out.worst))
					out.worst = rel;
			}
	dsgap_stats sg, sc;
	dsgap_context_stats(gpu, &sg), dsgap_context_stats(cpu, &sc);
	CHECKF(out.fails == 0 && out.nonfinite == 0 && out.gaps == 0 && out.worst <= TOL,
	       "%s [%s] %s d=%d n=%d text=%d: GPU ABI = CPU ABI, worst rel_l2 %.2e (<= %.0e), %ld non-finite, %ld gaps "
	       "written, %d failed calls; density gpu %.3f cpu %.3f; %.1f ms a call on the gpu",
	       spec, sched, dt == DSGAP_BF16 ? "bf16" : "fp16", D, n, T, out.worst, TOL, out.nonfinite, out.gaps,
	       out.fails, sg.pairs / sg.full_pairs, sc.pairs / sc.full_pairs, 1e3 * sg.seconds / (STEPS * L * B));
	for (int i = 0; i < 4; i++)
		tens_free(&t[i]);
	tens_free(&og);
	CU(cudaStreamDestroy(stream));
	dsgap_context_destroy(gpu);
	dsgap_context_destroy(cpu);
}

/* the device's memory in use: the driver's count, after the stream-ordered pool gave back what it
 * keeps unused, and of the pool what is allocated from it now */
static void device_used(size_t *driver, uint64_t *pool)
{
	size_t free_b, total;
	cudaMemPool_t mp;
	CU(cudaDeviceSynchronize());
	CU(cudaDeviceGetDefaultMemPool(&mp, 0));
	CU(cudaMemPoolTrimTo(mp, 0));
	CU(cudaMemGetInfo(&free_b, &total));
	*driver = total - free_b;
	CU(cudaMemPoolGetAttribute(mp, cudaMemPoolAttrUsedMemCurrent, pool));
}

/* 100 contexts of several kinds, each made, attended (2 steps x 2 layers x 2 branches) and destroyed,
 * after one round of every kind (kernels loaded, the pool grown): the device memory in use comes
 * back to where it was (the driver's count within 2 MiB, its page; the pool's exactly). A leaked
 * context would hold at least its operand buffers, 4 x 2 heads x 1024 tokens x 128 x 4 B = 4 MiB.
 * The driver's count is the device's (every process's): run this test with the GPU to itself
 * (scripts/device_all.sh runs it after the other checks). */
static void contexts(const int grid[3])
{
	static const struct { const char *spec, *sched; } kinds[] = {
		{ "dense", "" }, { "oracle-tile", "warmup=1" }, { "mc-sparse", "warmup=1" },
		{ "mc-sparse/cfg_meta=shared", "warmup=1" }, { "mc-sparse/budget=topp:0.9", "warmup=1" },
		{ "svg2", "warmup=1" }, { "pisa", "warmup=1" },
	};
	const int nk = sizeof kinds / sizeof *kinds, n = grid[0] * grid[1] * grid[2];
	double rho = 0.2;
	tens t[4];
	for (int i = 0; i < 4; i++) {
		tens_new(&t[i], i, n);
		tens_fill(&t[i], DSGAP_BF16, 0, 0, 0, i);
		CU(cudaMemcpy(t[i].dev, t[i].host, t[i].len * 2, cudaMemcpyHostToDevice));
	}
	size_t drv0 = 0, drv1;
	uint64_t pool0 = 0, pool1;
	int ok = 0;
	for (int i = -nk; i < 100; i++) {
		if (i == 0)
			device_used(&drv0, &pool0);
		int kind = (i + nk) % nk;
		dsgap_config c = { DSGAP_ABI_VERSION, kinds[kind].spec, &rho, 1, kinds[kind].sched, L, H, D, B,
				   grid[0], grid[1], grid[2], 0, "gpu" };
		dsgap_context *ctx;
		if (dsgap_context_create(&c, &ctx))
			continue;
		int fails = 0;
		for (int s = 0; s < 2; s++)
			for (int l = 0; l < L; l++)
				for (int b = 0; b < B; b++)
					fails += dsgap_attend(ctx, s, l, b, &t[0].td, &t[1].td, &t[2].td, &t[3].td,
							      DSGAP_BF16, n, NULL) != 0;
		dsgap_context_destroy(ctx);
		ok += i >= 0 && !fails;
	}
	device_used(&drv1, &pool1);
	CHECKF(ok == 100 && drv1 <= drv0 + (2u << 20) && pool1 == pool0,
	       "100 gpu contexts of %d kinds made, attended and destroyed (%d ok): device memory in use %.1f -> "
	       "%.1f MiB, the pool's %.1f -> %.1f MiB", nk, ok, drv0 / 1048576.0, drv1 / 1048576.0,
	       pool0 / 1048576.0, pool1 / 1048576.0);
	for (int i = 0; i < 4; i++)
		tens_free(&t[i]);
}

int main(void)
{
	if (!dg_backend_gpu_available()) {
		printf("gpu_api: no CUDA device, skipped\n");
		return 77;
	}
	const int grid[3] = { 4, 16, 16 }; /* 1024 tokens */
	struct { const char *spec, *sched; } cases[] = {
		{ "dense", "warmup=1" },
		{ "oracle-tile", "warmup=1" },
		{ "mc-sparse", "warmup=2" },
		{ "mc-sparse", "warmup=1,anchors=0;2,dense_layers=1" },
		{ "mc-sparse/budget=topp:0.9", "warmup=2" },
		{ "svg2", "warmup=1" },
		{ "pisa", "warmup=1" },
		{ "ditfastattn", "warmup=1" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		run_case(cases[i].spec, cases[i].sched, 0.2, grid, DSGAP_BF16);
	run_case("mc-sparse", "warmup=2", 0.2, grid, DSGAP_FP16);
	run_case("mc-sparse", "warmup=2", 1.0, grid, DSGAP_BF16); /* density 1: dense */
	D = 64;
	run_case("mc-sparse", "warmup=2", 0.2, grid, DSGAP_BF16);
	D = 128;
	T = 77; /* joint attention: one short text group */
	run_case("mc-sparse", "warmup=2", 0.2, grid, DSGAP_BF16);
	run_case("oracle-tile", "warmup=1", 0.2, grid, DSGAP_BF16);
	run_case("pisa", "warmup=1", 0.2, grid, DSGAP_BF16);
	run_case("ditfastattn", "warmup=1", 0.2, grid, DSGAP_BF16);
	T = 0;

	/* fp32 is the CPU's only */
	double rho = 0.2;
	dsgap_config c = { DSGAP_ABI_VERSION, "mc-sparse", &rho, 1, "", L, H, D, B, 1, 8, 16, 0, "gpu" };
	dsgap_context *ctx;
	if (!dsgap_context_create(&c, &ctx)) {
		tens x;
		tens_new(&x, 0, 128);
		int rc = dsgap_attend(ctx, 0, 0, 0, &x.td, &x.td, &x.td, &x.td, DSGAP_FP32, 128, NULL);
		CHECKF(rc == DSGAP_E_DTYPE, "fp32 on the gpu: DSGAP_E_DTYPE, \"%s\"", dsgap_last_error(ctx));
		tens_free(&x);
		dsgap_context_destroy(ctx);
	}
	contexts(grid);
	return test_report();
}

/*
 * gpu_cache.c: the GPU backend's cache storage (issue 21, docs/spec.md §3.1 residual_dtype, keys)
 * against its CPU twin, src/policy/cache_store.c, which is the specification:
 *   - codecs: kernels/cache_store.cu's residual encoding (bf16, fp8 e4m3 with power-of-two row
 *     scales) gives the bytes of dg_residual_encode, bit for bit, on values built to hit every case
 *     (ties, subnormals, saturation, NaN, infinities, zero rows, rows over 60 binades), and decodes
 *     them to dg_residual_decode's values; key bitmaps are dg_bitmap_encode's words and decode to the
 *     ascending lists they came from;
 *   - selections: a GPU selection compacted to bitmaps (be->compact) decodes to the list it was,
 *     ascending; the GPU's mc-sparse lists equal the CPU's but for near-ties (<= 0.2% of keys);
 *   - policy runs (dg_policy_run on both backends, anchor then two reuse steps, n = 1000 d = 64 and
 *     n = 2100 d = 128): mc-sparse with residual_dtype=bf16|fp8, keys=bitmap and both combined:
 *     outputs within the GPU-vs-CPU tolerance (rel_l2 <= 1e-3, tests/replay/gpu_replay.sh) through both
 *     GPU paths (with metrics: the residual decoded; without: the sparse kernel's epilogue reading
 *     the stored dtype); the stored residual's bytes equal dg_residual_encode of the GPU's own fp32
 *     residual (the same selection, bit-exact rounding) and have the CPU's size; keys=bitmap outputs
 *     and residuals bit-identical to keys=list's on the GPU; with --cache-offload's park/fetch
 *     between units (fetched ahead, or on use) outputs and residuals bit-identical to the run without;
 *     host memory pinned ahead (pin_ahead) serves every parked copy where it holds them (freed
 *     handles' slices reused), and park pins its own beyond it;
 *   - the closed loop (dsgap generate's run, the bundled model at 4x32x32, CFG, 5 steps) with
 *     --cache-offload: final latents bit-identical to the run without, the traffic counted, every
 *     parked copy in the memory plan's pinned-ahead host memory.
 * Exits 77 (skipped) without a CUDA device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "backend/backend.h"
#include "backend/policy_run.h"
#include "loop/generate.h"
#include "dsgap_kernels.h"
#include "policy/cache_store.h"
#include "testhelp.h"
#include "util/util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (rng >> 11) * 0x1p-53;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

static void *dev_copy(const void *h, size_t bytes)
{
	void *d;
	if (cudaMalloc(&d, bytes ? bytes : 16) != cudaSuccess)
		return NULL;
	if (h)
		cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
	return d;
}

static bool same_float(float a, float b)
{
	uint32_t x, y;
	memcpy(&x, &a, 4), memcpy(&y, &b, 4);
	return x == y || (isnan(a) && isnan(b));
}

/* ---- codecs ---------------------------------------------------------------------------------- */

static void test_codecs(void)
{
	enum { n = 67, d = 64 };
	static float r[n * d];
	for (int i = 0; i < n; i++)
		for (int j = 0; j < d; j++) {
			double x = nrand() * ldexp(1.0, (i % 61) - 30);
			r[i * d + j] = (float)x;
		}
	/* specials: bf16 ties (low half 0x8000) both ways, e4m3 ties, subnormals, saturation, NaN, inf */
	for (int j = 0; j < d; j++) {
		uint32_t u = 0x3f800000u + ((uint32_t)j << 16) + 0x8000u;
		memcpy(&r[1 * d + j], &u, 4);
		r[2 * d + j] = (float)((j - 32) * 0x1p-10 + 0x1p-11); /* halfway at e4m3 steps after scaling */
		r[3 * d + j] = (float)(j * 0x1p-140);                  /* fp32 subnormals */
		r[4 * d + j] = 0;                                      /* a zero row */
		r[5 * d + j] = (float)((j % 9) * 56.0 + 0.5 * (j % 2)) * (j % 3 ? 1 : -1);
		r[6 * d + j] = (float)(1.0 + j / 16.0);               /* exact e4m3 and its ties */
	}
	r[7 * d + 3] = NAN, r[8 * d + 5] = INFINITY, r[9 * d + 7] = -INFINITY, r[10 * d + 1] = -0.0f;
	r[11 * d + 0] = 3e38f;
	void *dr = dev_copy(r, sizeof r);
	for (int t = DG_RESDTYPE_BF16; t <= DG_RESDTYPE_FP8; t++) {
		int code = t == DG_RESDTYPE_BF16 ? DG_RES_BF16 : DG_RES_FP8;
		size_t bytes = dg_residual_bytes(t, n, d);
		CHECKF(bytes == dg_res_bytes(code, n, d), "%s: the kernels' size %zu = the CPU's", dg_resdtype_name(t), bytes);
		unsigned char *want = calloc(bytes, 1), *got = calloc(bytes, 1);
		dg_residual_encode(t, r, n, d, want);
		void *ds = dev_copy(NULL, bytes);
		cudaMemset(ds, 0, bytes);
		int rc = dg_residual_encode_dev(dr, n, d, code, ds, NULL);
		cudaMemcpy(got, ds, bytes, cudaMemcpyDeviceToHost);
		size_t bad = 0;
		for (size_t b = 0; b < bytes; b++)
			bad += got[b] != want[b];
		CHECKF(rc == 0 && bad == 0, "%s: device encoding = dg_residual_encode bit for bit (%zu bytes differ)",
		       dg_resdtype_name(t), bad);
		static float back[n * d], hback[n * d];
		float *db = dev_copy(NULL, sizeof back);
		rc = dg_residual_decode_dev(ds, n, d, code, db, NULL);
		cudaMemcpy(back, db, sizeof back, cudaMemcpyDeviceToHost);
		dg_residual_decode(t, want, n, d, hback);
		bad = 0;
		for (int e = 0; e < n * d; e++)
			bad += !same_float(back[e], hback[e]);
		CHECKF(rc == 0 && bad == 0, "%s: device decoding = dg_residual_decode (%zu values differ)", dg_resdtype_name(t),
		       bad);
		cudaFree(ds), cudaFree(db), free(want), free(got);
	}
	cudaFree(dr);

	/* key bitmaps */
	enum { G = 37, N = 1000 };
	dg_selection s = { G, malloc((G + 1) * sizeof(int64_t)), malloc((size_t)G * N * sizeof(int)) };
	s.off[0] = 0;
	for (int g = 0; g < G; g++) {
		double p = g == 0 ? 0 : g == 1 ? 1 : urand();
		int64_t e = s.off[g];
		for (int j = 0; j < N; j++)
			if (urand() < p)
				s.idx[e++] = j;
		s.off[g + 1] = e;
	}
	int64_t W = dg_bitmap_words(N), total = s.off[G];
	uint32_t *want = calloc((size_t)(G * W), 4), *got = calloc((size_t)(G * W), 4);
	dg_bitmap_encode(&s, N, want);
	int64_t *doff = dev_copy(s.off, (G + 1) * 8);
	int32_t *didx = dev_copy(s.idx, (size_t)total * 4), *dback = dev_copy(NULL, (size_t)total * 4);
	uint32_t *dbits = dev_copy(NULL, (size_t)(G * W) * 4);
	int rc = dg_keys_to_bitmap(doff, didx, G, N, dbits, NULL);
	cudaMemcpy(got, dbits, (size_t)(G * W) * 4, cudaMemcpyDeviceToHost);
	CHECK("bitmaps: device = dg_bitmap_encode", rc == 0 && !memcmp(got, want, (size_t)(G * W) * 4));
	rc = dg_bitmap_to_keys(dbits, doff, G, N, dback, NULL);
	int *back = malloc((size_t)total * 4);
	cudaMemcpy(back, dback, (size_t)total * 4, cudaMemcpyDeviceToHost);
	CHECKF(rc == 0 && !memcmp(back, s.idx, (size_t)total * 4), "bitmaps decode to the ascending lists (%lld keys, "
	       "empty and full groups)", (long long)total);
	cudaFree(doff), cudaFree(didx), cudaFree(dback), cudaFree(dbits);
	free(want), free(got), free(back), dg_selection_free(&s);
}

/* ---- policy runs ------------------------------------------------------------------------------ */

static int GRID[3];

static void fill(float *x, size_t count, double drift, const float *from)
{
	for (size_t i = 0; i < count; i++)
		x[i] = dg_round_bf16((float)((from ? from[i] : 0) + drift * nrand())); /* bf16 values: both see them */
}

static double rel_l2(const float *a, const float *b, size_t count)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < count; i++)
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
	return sqrt(num / (den > 0 ? den : 1));
}

typedef struct {
	float *out[3];       /* outputs at steps 0..2 */
	unsigned char *res;  /* the stored residual after the anchor */
	size_t res_bytes;
	float *res32;        /* fp32 storage: its values */
} run_out;

/* --cache-offload at the backend (park, fetch): 0 none; 1 parked after every unit and fetched ahead
 * before the next; 2 parked after every unit, fetched when a primitive needs it (the residual's
 * bytes read while parked too) */
static int OFFLOAD;

static void park(dg_backend *be, dg_policy_run *r, bool up)
{
	dg_bvec *vec;
	dg_bsel *sel;
	dg_policy_run_caches(r, &vec, &sel);
	(up ? be->fetch : be->park)(be, 1, &vec, &sel);
}

/* policy spec on be over the three units: anchor at step 0, reuse at 1 and 2 */
static void run(dg_backend *be, const char *spec, float *const *q, float *const *k, float *const *v, bool metrics,
		run_out *ro)
{
	size_t nd = (size_t)be->n * be->d;
	dg_policy p;
	dg_schedule sc;
	CHECKF(dg_policy_parse(spec, &p) == 0, "%s: parsed", spec);
	dg_schedule_parse("warmup=1", &sc);
	dg_policy_run r, *rp = &r;
	dg_policy_run_init(&r, &p, 0.15);
	for (int s = 0; s < 3; s++) {
		dg_policy_run_plan(&r, &sc, s, 1);
		if (OFFLOAD == 1)
			park(be, &r, true);
		be->load(be, q[s], k[s], v[s]);
		be->dense(be);
		CHECKF(dg_policy_run_metadata(be, &rp, 1, GRID, 0) == 0, "%s: metadata at step %d", spec, s);
		ro->out[s] = malloc(nd * 4);
		dg_metrics m;
		dg_policy_run_apply(be, &r, s, metrics ? &m : NULL, ro->out[s], false);
		if (OFFLOAD)
			park(be, &r, false);
		if (s == 0 && r.residual) {
			ro->res_bytes = be->vec_bytes(be, r.residual, NULL);
			ro->res = malloc(ro->res_bytes);
			be->vec_bytes(be, r.residual, ro->res);
		}
	}
	dg_policy_run_clear(be, &r);
}

static void run_free(run_out *ro)
{
	for (int s = 0; s < 3; s++)
		free(ro->out[s]);
	free(ro->res);
	memset(ro, 0, sizeof *ro);
}

static void test_selection(dg_backend *gpu, dg_backend *cpu)
{
	dg_budget b = { DG_KV_TOKEN, DG_BUDGET_TOPK, 0.15, 0, 0, 0 };
	dg_selection lists[2], packed;
	for (int i = 0; i < 2; i++) {
		dg_backend *be = i ? cpu : gpu;
		dg_bgroups *g = be->groups(be, DG_GROUP_PCA, GRID, 0);
		dg_bscores *sc;
		be->exact(be, &g, &sc, 1, NULL, NULL, 0);
		dg_bsel *sel = be->select(be, g, sc, &b);
		be->sel_lists(be, sel, &lists[i]);
		if (!i) {
			be->compact(be, sel);
			be->sel_lists(be, sel, &packed);
		}
		be->scores_free(be, sc);
		be->sel_free(be, sel);
		be->groups_free(be, g);
	}
	int64_t total = lists[0].off[lists[0].ngroups];
	bool ascending = true;
	for (int g = 0; g < lists[0].ngroups; g++)
		for (int64_t e = lists[0].off[g] + 1; e < lists[0].off[g + 1]; e++)
			ascending &= lists[0].idx[e - 1] < lists[0].idx[e];
	CHECKF(ascending && packed.ngroups == lists[0].ngroups &&
	       !memcmp(packed.off, lists[0].off, (size_t)(packed.ngroups + 1) * 8) &&
	       !memcmp(packed.idx, lists[0].idx, (size_t)total * 4),
	       "n=%d: a GPU selection compacted to bitmaps decodes to its ascending lists (%lld keys)", gpu->n,
	       (long long)total);
	int64_t diff = 0;
	bool same_off = lists[1].ngroups == lists[0].ngroups && !memcmp(lists[1].off, lists[0].off,
									 (size_t)(lists[0].ngroups + 1) * 8);
	for (int g = 0; same_off && g < lists[0].ngroups; g++)
		for (int64_t e = lists[0].off[g]; e < lists[0].off[g + 1]; e++) {
			bool found = false;
			for (int64_t f = lists[1].off[g]; f < lists[1].off[g + 1] && !found; f++)
				found = lists[1].idx[f] == lists[0].idx[e];
			diff += !found;
		}
	CHECKF(same_off && diff <= total / 500, "n=%d: GPU lists = CPU lists but near-ties (%lld of %lld keys differ)",
	       gpu->n, (long long)diff, (long long)total);
	dg_selection_free(&lists[0]), dg_selection_free(&lists[1]), dg_selection_free(&packed);
}

static void test_runs(int n, int d, int grid0, int grid1, int grid2)
{
	GRID[0] = grid0, GRID[1] = grid1, GRID[2] = grid2;
	size_t nd = (size_t)n * d;
	float *q[3], *k[3], *v[3];
	for (int s = 0; s < 3; s++) {
		q[s] = malloc(nd * 4), k[s] = malloc(nd * 4), v[s] = malloc(nd * 4);
		fill(q[s], nd, s ? 0.1 : 1, s ? q[s - 1] : NULL);
		fill(k[s], nd, s ? 0.1 : 1, s ? k[s - 1] : NULL);
		fill(v[s], nd, s ? 0.1 : 1, s ? v[s - 1] : NULL);
	}
	dg_backend *gpu = dg_backend_gpu(n, d), *cpu = dg_backend_cpu(n, d);
	gpu->precise = true; /* the replay's mode: fp32-level outputs, as the CPU's */
	/* host memory pinned ahead (pin_ahead): at n=1000 less than one residual (every park pins its
	 * own, as without a pool), else enough for a run's caches (a freed handle's slice serves the
	 * next: park never pins its own) */
	const bool pool_fits = n > 1000;
	gpu->pin_ahead(gpu, pool_fits ? 2.0 * nd * 4 : 4096);
	gpu->load(gpu, q[0], k[0], v[0]), gpu->dense(gpu);
	cpu->load(cpu, q[0], k[0], v[0]), cpu->dense(cpu);
	test_selection(gpu, cpu);

	run_out ref32, reflist[3];
	run(gpu, "mc-sparse", q, k, v, true, &ref32); /* fp32 lists: the GPU's own R in fp32 */
	reflist[0] = ref32;                            /* keys=bitmap fp32 compares with it */
	static const char *const dts[3] = { "", "/residual_dtype=bf16", "/residual_dtype=fp8" };
	static const dg_resdtype dtt[3] = { DG_RESDTYPE_FP32, DG_RESDTYPE_BF16, DG_RESDTYPE_FP8 };
	for (int keys = 0; keys < 2; keys++)
		for (int t = 0; t < 3; t++) {
			if (!keys && !t)
				continue;
			char spec[128];
			snprintf(spec, sizeof spec, "mc-sparse%s%s", keys ? "/keys=bitmap" : "", dts[t]);
			run_out c, gm, gf;
			run(cpu, spec, q, k, v, true, &c);
			run(gpu, spec, q, k, v, true, &gm);  /* attend with metrics: the residual decoded */
			run(gpu, spec, q, k, v, false, &gf); /* without: the kernel's epilogue reads the stored dtype */
			for (OFFLOAD = 1; OFFLOAD <= 2; OFFLOAD++) { /* parked in host memory between units */
				run_out om, of;
				run(gpu, spec, q, k, v, true, &om);
				run(gpu, spec, q, k, v, false, &of);
				bool same = om.res_bytes == gm.res_bytes && !memcmp(om.res, gm.res, gm.res_bytes) &&
					    of.res_bytes == gf.res_bytes && !memcmp(of.res, gf.res, gf.res_bytes);
				for (int s = 0; s < 3; s++)
					same &= !memcmp(om.out[s], gm.out[s], nd * 4) && !memcmp(of.out[s], gf.out[s], nd * 4);
				CHECKF(same, "n=%d %s: parked in host memory (%s): outputs and residual bit-identical", n, spec,
				       OFFLOAD == 1 ? "fetched ahead" : "fetched on use");
				run_free(&om), run_free(&of);
			}
			OFFLOAD = 0;
			double worst = 0, worst_f = 0;
			for (int s = 0; s < 3; s++) {
				double e = rel_l2(gm.out[s], c.out[s], nd), f = rel_l2(gf.out[s], c.out[s], nd);
				worst = e > worst ? e : worst, worst_f = f > worst_f ? f : worst_f;
			}
			CHECKF(worst <= 1e-3 && worst_f <= 1e-3, "n=%d d=%d %s: GPU outputs within 1e-3 of the CPU's (rel_l2 "
			       "%.2e decoded, %.2e in the epilogue)", n, d, spec, worst, worst_f);
			CHECKF(gm.res_bytes == c.res_bytes && gf.res_bytes == c.res_bytes && c.res_bytes ==
			       dg_residual_bytes(dtt[t], n, d), "n=%d %s: stored residual %zu bytes, the CPU's", n, spec,
			       gm.res_bytes);
			/* bit-exact rounding: the GPU's stored bytes = the CPU codec on the GPU's own fp32 R */
			unsigned char *want = malloc(c.res_bytes);
			dg_residual_encode(dtt[t], (const float *)ref32.res, n, d, want);
			size_t bad = 0, cpu_bad = 0;
			for (size_t b = 0; b < c.res_bytes; b++)
				bad += gm.res[b] != want[b] || gf.res[b] != want[b], cpu_bad += gm.res[b] != c.res[b];
			CHECKF(bad == 0, "n=%d %s: stored bytes = dg_residual_encode of the GPU's fp32 R (%zu differ)", n, spec,
			       bad);
			printf("# n=%d %s: %zu stored bytes differ from the CPU run's (its R differs at fp32 level)\n", n, spec,
			       cpu_bad);
			free(want);
			if (keys) { /* bitmaps decode to the very lists: the same bits as keys=list on the GPU */
				bool same = !memcmp(gm.res, reflist[t].res, gm.res_bytes);
				for (int s = 0; s < 3; s++)
					same &= !memcmp(gm.out[s], reflist[t].out[s], nd * 4);
				CHECKF(same, "n=%d %s: outputs and residual bit-identical to keys=list's on the GPU", n, spec);
				if (t)
					run_free(&reflist[t]);
			} else {
				reflist[t] = gm;
				gm = (run_out){ 0 };
			}
			run_free(&c), run_free(&gm), run_free(&gf);
		}
	run_free(&ref32);
	dg_offload_stats os;
	gpu->offload_stats(gpu, &os);
	CHECKF(os.up_bytes > 0 && os.down_bytes > 0 && os.copy_s > 0 && os.wait_s >= 0,
	       "n=%d: offload traffic counted (%.1f MB up, %.1f MB written back, copy %.2f ms, waits %.2f ms)", n,
	       os.up_bytes / 1e6, os.down_bytes / 1e6, os.copy_s * 1e3, os.wait_s * 1e3);
	CHECKF(os.pin_ahead_bytes > 0 && (pool_fits ? os.pin_own_bytes == 0 : os.pin_own_bytes > 0),
	       "n=%d: %.2f MB pinned ahead (in %.1f ms), %.2f MB pinned by park itself (%s)", n, os.pin_ahead_bytes / 1e6,
	       os.pin_ahead_s * 1e3, os.pin_own_bytes / 1e6,
	       pool_fits ? "none: the pool's slices reused" : "every residual: larger than the pool's chunk");
	gpu->destroy(gpu), cpu->destroy(cpu);
	for (int s = 0; s < 3; s++)
		free(q[s]), free(k[s]), free(v[s]);
}

/* ---- the closed loop with --cache-offload ------------------------------------------------------ */

/* dsgap generate's run (generate.h) on the bundled model (data/model: 8 blocks of 2 heads of 128),
 * CFG, warm-up 2, layer 0 dense: the final latents with the caches parked in host memory between
 * sites (each layer's fetched while the one before runs) are those of the run without */
static void test_generate(void)
{
	const char *src = getenv("DSGAP_SOURCE");
	char model[2048], text[2200], neg[2200];
	snprintf(model, sizeof model, "%s/data/model", src && *src ? src : ".");
	snprintf(text, sizeof text, "%s/conds.safetensors:cockatoo", model);
	snprintf(neg, sizeof neg, "%s/conds.safetensors:null", model);
	dg_dit_input_opts io = { .model = model, .text = text, .negative = neg, .device = "gpu", .guidance = 5,
				 .latent = { 4, 32, 32 } };
	dg_dit_inputs di;
	if (dg_dit_inputs_load(&io, &di)) {
		CHECK("the bundled model loads on the GPU", false);
		return;
	}
	dg_dit_sample_opts so = { .model = di.model, .noise = di.noise, .steps = 5, .shift = 5, .guidance = 5,
				  .sampler = DG_SAMPLER_UNIPC, .cond = di.cond, .uncond = di.uncond };
	memcpy(so.latent, di.latent, sizeof so.latent);
	size_t nl = (size_t)di.model->cfg.out_dim * di.latent[0] * di.latent[1] * di.latent[2];
	dg_schedule sc;
	dg_schedule_parse("warmup=2,dense_layers=0", &sc);
	static const char *const specs[] = { "mc-sparse", "mc-sparse/keys=bitmap/residual_dtype=bf16",
					     "mc-sparse/keys=bitmap/residual_dtype=bf16/cfg_meta=shared",
					     "mc-sparse/residual_dtype=fp8" };
	for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
		dg_policy p;
		dg_policy_parse(specs[i], &p);
		float *x[3];
		dg_generate_stats st[3];
		bool ok = true;
		for (int r = 0; r < 3; r++) { /* without, with, without again (the engine's own repeatability) */
			x[r] = malloc(nl * 4);
			ok &= dg_generate_run(&so, di.grid, &p, 0.3, &sc, r == 1, true, x[r], &st[r]) == 0;
		}
		const dg_offload_stats *o = &st[1].as.offload;
		bool same = ok && !memcmp(x[0], x[1], nl * 4), repeat = ok && !memcmp(x[0], x[2], nl * 4);
		CHECKF(same, "generate %s: --cache-offload's final latents bit-identical to the run without (the run "
		       "without repeats itself: %s)", specs[i], repeat ? "yes" : "NO");
		CHECKF(o->up_bytes > 0 && o->down_bytes > 0 && st[0].as.offload.up_bytes == 0,
		       "generate %s: %.1f MB fetched, %.1f MB written back, copy %.1f ms, exposed wait %.1f ms, pinning %.1f ms",
		       specs[i], o->up_bytes / 1e6, o->down_bytes / 1e6, o->copy_s * 1e3, o->wait_s * 1e3, o->pin_s * 1e3);
		CHECKF(o->pin_ahead_bytes > 0 && o->pin_own_bytes == 0,
		       "generate %s: the memory plan's %.2f MB pinned ahead held every parked copy (%.2f MB pinned by park)",
		       specs[i], o->pin_ahead_bytes / 1e6, o->pin_own_bytes / 1e6);
		for (int r = 0; r < 3; r++)
			free(x[r]);
	}
	dg_dit_inputs_free(&di);
}

int main(void)
{
	if (!dg_backend_gpu_available()) {
		printf("gpu_cache: no CUDA device: skipped\n");
		return 77;
	}
	test_codecs();
	test_runs(1000, 64, 1, 25, 40);
	test_runs(2100, 128, 3, 20, 35);
	test_generate();
	return test_report();
}

/*
 * gpu_kernels.cu: checks dsgap's CUDA attention kernels (kernels/flash_fwd.cu, kernels/sparse_fwd.cu,
 * kernels/window_fwd.cu),
 * the promoted launchers in both P.V modes, against an fp64 CPU reference with the FlashAttention-3
 * rule (docs/spec.md §9):
 *   max|out - ref64| <= 2 max|naive - ref64| + 2 floor,
 * naive = the straightforward low-precision computation of the mode, bf16 inputs, fp32 scores and
 * sums, and P.V with
 *   fast mode:    P rounded to bf16 (as a bf16 kernel does), summed key by key in fp32;
 *   precise mode: P split into hi = bf16(P) and lo = bf16(P - hi), summed as one tensor-core GEMM
 *                 of P.V would (16 keys per step, exact products, the fp32 accumulator truncated
 *                 after each step: its error then grows with n/16 roundings toward zero, which a
 *                 round-to-nearest sequential sum, whose errors cancel, does not model).
 * The precise bound is P's 2^-16 representation error plus fp32 accumulation: ~100x under the fast
 * one. floor = max|fl32(fl32(ref + 0.3) - 0.3) - ref|.
 * Inputs are fresh random bf16 with varied row scales (peaked and flat softmax rows), N not a multiple
 * of 128, d = 64 and 128; sparse: random query permutations, groups of 1..200 queries, random sorted
 * key lists of varying lengths (empty and full included), block-run lists, per-query groups, residual
 * and retained mass; window attention (its key sets per row) with text prefixes, narrow, zero and
 * past-n half-widths, residuals in fp32 and bf16. Outputs are poisoned (NaN) before each run and every
 * element must be written.
 * Also: sparse attention with every key of every group equals dense attention bit for bit; the DiT's
 * launchers (dg_flash_fwd_kv, dg_sparse_fwd_heads) equal the per-head outputs bit for bit.
 *   gpu_kernels [--quick]     (--quick: small sizes, for compute-sanitizer)
 *   env: DG_SEED=<printed seed> reproduces a run's inputs; DG_WATCHDOG_S (default 60) bounds one launch
 * Exits 77 (skipped) when there is no CUDA device, or the device is not sm_90 (the kernels' target).
 * The earlier kernel versions' test, dev/kernels/gpu_kernels_dev.cu, includes this file with
 * DG_GPU_KERNELS_NO_MAIN and runs the same checks on each of them (g_kernels).
 */
#include "dsgap_kernels.h"
#include "host_common.h"
#include "testhelp.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <string>
#include <vector>

/* ------------------------------------------------------------------------------------------------ */
static uint16_t f2bf(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffff) > 0x7f800000)
		return 0x7fc0;
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}
static float rbf(float f) { return bf2f(f2bf(f)); }
/* x rounded to fp32 toward zero (the tensor cores' fp32 accumulation truncates: Fasi et al. 2021,
 * "Numerical behavior of NVIDIA tensor cores"; Khattak and Mikaitis 2025 for H100) */
static float f32_rz(double x)
{
	float r = (float)x;
	if (fabs((double)r) > fabs(x))
		r = nextafterf(r, 0.f);
	return r;
}

/* (heads, n, d) bf16 with per-row scales exp(U(lo, hi)) and an optional per-tensor offset */
static std::vector<uint16_t> gen_tensor(int heads, int n, int d, double lo, double hi, double offset)
{
	std::vector<uint16_t> t((size_t)heads * n * d);
	for (size_t r = 0; r < (size_t)heads * n; r++) {
		const double sc = exp(lo + (hi - lo) * rng_uniform());
		for (int c = 0; c < d; c++)
			t[r * d + c] = f2bf((float)(sc * rng_normal() + offset));
	}
	return t;
}

/* ------------------------------------------------------------------------------------------------ */
/* References for one query row against a key list (keys == NULL: all n keys).                      */

struct RowRef {
	std::vector<double> o64;
	std::vector<float> on, onp; /* naive: fast mode (P in bf16), precise mode (P = bf16 hi + lo) */
	double lse64;
	float lsen;
	double mass64;
	float massn;
};

static void row_ref(const uint16_t *q, const uint16_t *k, const uint16_t *v, int n, int d, const int *keys,
		    int nk, double lse_ref, RowRef &r)
{
	const double scale = 1.0 / sqrt((double)d);
	const float sl2 = (float)(1.4426950408889634 / sqrt((double)d));
	if (!keys)
		nk = n;
	r.o64.assign(d, 0.0);
	r.on.assign(d, 0.f);
	r.onp.assign(d, 0.f);
	if (nk == 0) {
		r.lse64 = -INFINITY;
		r.lsen = -INFINITY;
		r.mass64 = 0;
		r.massn = 0;
		return;
	}
	std::vector<double> s64(nk);
	std::vector<float> s32(nk);
	std::vector<float> qf(d);
	for (int c = 0; c < d; c++)
		qf[c] = bf2f(q[c]);
	double m = -INFINITY;
	float m32 = -INFINITY;
	for (int j = 0; j < nk; j++) {
		const uint16_t *kr = k + (size_t)(keys ? keys[j] : j) * d;
		double a = 0;
		float b = 0;
		for (int c = 0; c < d; c++) {
			const float kv = bf2f(kr[c]);
			a += (double)qf[c] * kv;
			b += qf[c] * kv;
		}
		s64[j] = a * scale;
		s32[j] = b;
		m = std::max(m, s64[j]);
		m32 = std::max(m32, b);
	}
	const float m2 = m32 * sl2;
	double l = 0;
	float l32 = 0;
	std::vector<float> p32(nk);
	for (int j = 0; j < nk; j++) {
		const double e = exp(s64[j] - m);
		l += e;
		p32[j] = exp2f(s32[j] * sl2 - m2);
		l32 += p32[j];
		const uint16_t *vr = v + (size_t)(keys ? keys[j] : j) * d;
		const float pb = rbf(p32[j]);
		for (int c = 0; c < d; c++) {
			const float vv = bf2f(vr[c]);
			r.o64[c] += e * vv;
			r.on[c] += pb * vv;
		}
	}
	/* precise naive: P.V as a tensor-core GEMM computes it, 16 keys per step: the step's hi products,
	 * then its lo products, summed exactly and added to one fp32 accumulator that is truncated */
	std::vector<float> ph(nk), pl(nk);
	for (int j = 0; j < nk; j++) {
		ph[j] = rbf(p32[j]);
		pl[j] = rbf(p32[j] - ph[j]);
	}
	for (int j0 = 0; j0 < nk; j0 += 16)
		for (const std::vector<float> *part : {&ph, &pl})
			for (int c = 0; c < d; c++) {
				double x = r.onp[c];
				for (int j = j0; j < std::min(nk, j0 + 16); j++)
					x += (double)(*part)[j] * bf2f(v[(size_t)(keys ? keys[j] : j) * d + c]);
				r.onp[c] = f32_rz(x);
			}
	for (int c = 0; c < d; c++) {
		r.o64[c] /= l;
		r.on[c] /= l32;
		r.onp[c] /= l32;
	}
	r.lse64 = m + log(l);
	r.lsen = (m2 + log2f(l32)) * 0.6931471805599453f;
	r.mass64 = exp(m + log(l) - lse_ref);
	r.massn = l32 * exp2f(m2 - (float)lse_ref * 1.4426950408889634f);
}

/* Accumulates max errors of one check under the FA3 rule. fn: the relative error allowed for the
 * kernels' approximate transcendentals where no low-precision rounding hides them (the LSE and the
 * retained mass, fp32 throughout: ex2.approx and lg2.approx are within 2^-22 relative, PTX ISA;
 * fn = 2^-20 allows four such roundings of the row's largest term), times the check's largest
 * |ref|; the naive computation uses the accurate exp2f and log2f, so at small n its own error can be
 * below theirs (a row of 77 keys: naive 9.1e-7, the kernel's LSE 3.2e-6 off, 3.4 ulps of 8). */
struct Err {
	double err = 0, nerr = 0, floor = 0, sumsq = 0, refsq = 0, refmax = 0, fn = 0;
	long bad = 0; /* NaN / unwritten */
	explicit Err(double fn_rel = 0) : fn(fn_rel) {}
	void add(double out, double ref, double naive)
	{
		const double e = fabs(out - ref);
		if (!(e == e) || !(fabs(out) < INFINITY && fabs(ref) < INFINITY)) {
			if (!(out == ref)) /* -inf == -inf is fine (empty list LSE) */
				bad++;
			return;
		}
		err = std::max(err, e);
		nerr = std::max(nerr, fabs(naive - ref));
		const float r = (float)ref, f = (r + 0.3f) - 0.3f;
		floor = std::max(floor, fabs((double)f - ref));
		refmax = std::max(refmax, fabs(ref));
		sumsq += e * e;
		refsq += ref * ref;
	}
	double tol() const { return 2 * nerr + 2 * floor + fn * refmax; }
	bool ok() const { return bad == 0 && err <= tol(); }
};

static void report(const char *what, const Err &e)
{
	CHECKF(e.ok(), "%-46s err %.3e  tol %.3e (naive %.3e floor %.1e)  rel_l2 %.2e%s", what, e.err, e.tol(), e.nerr,
	       e.floor, sqrt(e.sumsq / (e.refsq + 1e-300)), e.bad ? "  NaN/unwritten!" : "");
}

static long count_nonfinite_f32(const float *x, size_t n)
{
	long c = 0;
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			c++;
	return c;
}

/* cudaDeviceSynchronize with a watchdog: a kernel that deadlocks (a pipeline barrier bug) ends the
 * test with a clear line instead of hanging it */
static cudaError_t sync_watchdog(const char *what)
{
	const time_t t0 = time(NULL);
	const long limit = getenv("DG_WATCHDOG_S") ? atol(getenv("DG_WATCHDOG_S")) : 60;
	cudaError_t e;
	while ((e = cudaStreamQuery(0)) == cudaErrorNotReady) {
		if (time(NULL) - t0 > limit) {
			printf("FAIL HANG %s: kernel still running after %ld s (DG_WATCHDOG_S)\n", what, limit);
			fflush(stdout);
			_exit(3);
		}
	}
	return e == cudaSuccess ? cudaDeviceSynchronize() : e;
}

/* a launch returned rc and, synchronised under the watchdog, ran without a CUDA error (else the run
 * ends: the device is unusable after one) */
static void check_launch(const char *what, int rc)
{
	const cudaError_t ce = sync_watchdog(what);
	CHECKF(rc == 0 && ce == cudaSuccess, "%s launch (%s)", what, cudaGetErrorString(ce));
	if (ce != cudaSuccess)
		exit(1);
}

template <typename T> static T *dev_upload(const std::vector<T> &h)
{
	T *d = NULL;
	CUDA_CHECK(cudaMalloc(&d, std::max<size_t>(h.size(), 1) * sizeof(T)));
	if (!h.empty())
		CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
	return d;
}

/* x (heads, n, d) onto the device token-major: head h's row r at r * ld + h * d, the columns between
 * rows poisoned (a NaN) */
static uint16_t *token_major(const std::vector<uint16_t> &x, int heads, int n, int d, int ld)
{
	std::vector<uint16_t> t((size_t)n * ld, 0x7fc1);
	for (int h = 0; h < heads; h++)
		for (int r = 0; r < n; r++)
			memcpy(&t[(size_t)r * ld + (size_t)h * d], &x[((size_t)h * n + r) * d], (size_t)d * 2);
	return dev_upload(t);
}

/* The launchers the checks below run, each under its name in the check lines: main's are the promoted
 * ones; dev/kernels/gpu_kernels_dev.cu lists the numbered versions. */
typedef int (*flash_fn)(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
			float *o_f32, uint16_t *o_bf16, float *lse, int precise, dg_stream stream);
typedef int (*sparse_fn)(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
			 const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff,
			 const int32_t *sidx, const float *residual, const float *lse_ref, float *o, float *mass,
			 int precise, dg_stream stream);
typedef int (*sparse_heads_fn)(const uint16_t *q, const uint16_t *k, const uint16_t *v, int ldi, int heads, int n, int d,
			       const dg_sparse_head *tab, int ngroups, uint16_t *o16, int ldo, int precise,
			       dg_stream stream);
struct Kernels {
	const char *name;
	flash_fn flash;   /* or NULL: no dense kernel of this name */
	sparse_fn sparse; /* or NULL: no sparse kernel */
	sparse_heads_fn heads; /* or NULL: the same sparse kernel through a table of heads (DiT layouts) */
};
static std::vector<Kernels> g_kernels;
static bool g_promoted = true; /* also check the launchers of the promoted kernels alone (DiT layouts) */

/* ------------------------------------------------------------------------------------------------ */
static void test_dense(int heads, int n, int d)
{
	printf("# dense heads=%d n=%d d=%d\n", heads, n, d);
	std::vector<uint16_t> q = gen_tensor(heads, n, d, -1.0, 1.0, 0.0);
	std::vector<uint16_t> k = gen_tensor(heads, n, d, -0.5, 0.5, 0.0);
	std::vector<uint16_t> v = gen_tensor(heads, n, d, -0.3, 0.3, 0.2);
	/* rows checked against the reference: all for small n, else a stride plus the tail block */
	std::vector<int> rows;
	for (int i = 0; i < n; i++)
		if (n <= 1100 || i % 7 == 0 || i >= n - 130)
			rows.push_back(i);
	std::vector<RowRef> ref((size_t)heads * rows.size());
	for (int h = 0; h < heads; h++)
		for (size_t ri = 0; ri < rows.size(); ri++) {
			const size_t off = (size_t)h * n * d;
			row_ref(&q[off + (size_t)rows[ri] * d], &k[off], &v[off], n, d, NULL, n, 0.0, ref[h * rows.size() + ri]);
		}
	uint16_t *dq = dev_upload(q), *dk = dev_upload(k), *dv = dev_upload(v);
	const size_t no = (size_t)heads * n * d, nl = (size_t)heads * n;
	float *dof, *dlse;
	uint16_t *dob;
	CUDA_CHECK(cudaMalloc(&dof, no * 4));
	CUDA_CHECK(cudaMalloc(&dob, no * 2));
	CUDA_CHECK(cudaMalloc(&dlse, nl * 4));
	std::vector<float> of(no), lse(nl);
	std::vector<uint16_t> ob(no);
	for (int run = 0; run < 2 * (int)g_kernels.size(); run++) { /* each kernel fast, then precise */
		const int pm = run / (int)g_kernels.size();
		const Kernels &K = g_kernels[run % g_kernels.size()];
		if (!K.flash)
			continue;
		const char *mode = pm ? " precise" : "", *kn = K.name;
		char what[128];
		/* fp32 output + LSE */
		CUDA_CHECK(cudaMemset(dof, 0xff, no * 4));
		CUDA_CHECK(cudaMemset(dlse, 0xff, nl * 4));
		int rc = K.flash(dq, dk, dv, heads, n, d, dof, NULL, dlse, pm, NULL);
		snprintf(what, sizeof what, "flash %s%s n=%d d=%d", kn, mode, n, d);
		check_launch(what, rc);
		CUDA_CHECK(cudaMemcpy(of.data(), dof, no * 4, cudaMemcpyDeviceToHost));
		CUDA_CHECK(cudaMemcpy(lse.data(), dlse, nl * 4, cudaMemcpyDeviceToHost));
		Err eo, el(0x1p-20);
		for (int h = 0; h < heads; h++)
			for (size_t ri = 0; ri < rows.size(); ri++) {
				const RowRef &r = ref[h * rows.size() + ri];
				const size_t base = ((size_t)h * n + rows[ri]);
				for (int c = 0; c < d; c++)
					eo.add(of[base * d + c], r.o64[c], pm ? r.onp[c] : r.on[c]);
				el.add(lse[base], r.lse64, r.lsen);
			}
		const long nf = count_nonfinite_f32(of.data(), no) + count_nonfinite_f32(lse.data(), nl);
		snprintf(what, sizeof what, "flash %s%s n=%d d=%d O fp32", kn, mode, n, d);
		report(what, eo);
		snprintf(what, sizeof what, "flash %s%s n=%d d=%d LSE", kn, mode, n, d);
		report(what, el);
		CHECKF(nf == 0, "flash %s%s n=%d d=%d every output written (%ld NaN)", kn, mode, n, d, nf);
		/* bf16 output, no LSE */
		CUDA_CHECK(cudaMemset(dob, 0xff, no * 2));
		rc = K.flash(dq, dk, dv, heads, n, d, NULL, dob, NULL, pm, NULL);
		CUDA_CHECK(cudaDeviceSynchronize());
		CUDA_CHECK(cudaMemcpy(ob.data(), dob, no * 2, cudaMemcpyDeviceToHost));
		Err eb;
		long nfb = 0;
		for (size_t i = 0; i < no; i++)
			if (!isfinite(bf2f(ob[i])))
				nfb++;
		for (int h = 0; h < heads; h++)
			for (size_t ri = 0; ri < rows.size(); ri++) {
				const RowRef &r = ref[h * rows.size() + ri];
				const size_t base = ((size_t)h * n + rows[ri]) * d;
				for (int c = 0; c < d; c++)
					eb.add(bf2f(ob[base + c]), r.o64[c], rbf(pm ? r.onp[c] : r.on[c]));
			}
		snprintf(what, sizeof what, "flash %s%s n=%d d=%d O bf16", kn, mode, n, d);
		CHECKF(rc == 0 && nfb == 0, "%s launch, every output written (%ld NaN)", what, nfb);
		report(what, eb);
	}
	if (g_promoted) { /* the DiT's launcher: the promoted kernel's bf16 values with the heads merged */
		uint16_t *dm;
		CUDA_CHECK(cudaMalloc(&dm, no * 2));
		CUDA_CHECK(cudaMemset(dob, 0xff, no * 2));
		CUDA_CHECK(cudaMemset(dm, 0xff, no * 2));
		int rc = dg_flash_fwd(dq, dk, dv, heads, n, d, NULL, dob, NULL, 0, NULL);
		rc |= dg_flash_fwd_kv(dq, dk, dv, heads, n, n, d, NULL, dm, NULL, NULL);
		std::vector<uint16_t> om(no);
		CUDA_CHECK(cudaDeviceSynchronize());
		CUDA_CHECK(cudaMemcpy(ob.data(), dob, no * 2, cudaMemcpyDeviceToHost));
		CUDA_CHECK(cudaMemcpy(om.data(), dm, no * 2, cudaMemcpyDeviceToHost));
		long differ = 0;
		for (int h = 0; h < heads; h++)
			for (int r = 0; r < n; r++)
				differ += memcmp(&om[((size_t)r * heads + h) * d], &ob[((size_t)h * n + r) * d], (size_t)d * 2) != 0;
		CHECKF(rc == 0 && differ == 0,
		       "flash_fwd_kv n=%d d=%d: the heads-merged bf16 output = the per-head one, bit for bit (%ld rows differ)",
		       n, d, differ);
		cudaFree(dm);
	}
	cudaFree(dq);
	cudaFree(dk);
	cudaFree(dv);
	cudaFree(dof);
	cudaFree(dob);
	cudaFree(dlse);
}

/* ------------------------------------------------------------------------------------------------ */
enum { LISTS_MIXED, LISTS_BLOCKS, LISTS_QUERY };

static std::vector<int> random_sorted_subset(int n, int count)
{
	std::vector<int> out;
	out.reserve(count);
	int need = count;
	for (int j = 0; j < n && need > 0; j++)
		if (rng_uniform() * (n - j) < need) {
			out.push_back(j);
			need--;
		}
	return out;
}
static std::vector<int> block_list(int n, int nblocks_sel)
{
	const int nb = (n + 127) / 128;
	std::vector<int> blocks = random_sorted_subset(nb, std::min(nb, nblocks_sel));
	std::vector<int> out;
	for (int b : blocks)
		for (int j = b * 128; j < std::min(n, b * 128 + 128); j++)
			out.push_back(j);
	return out;
}

/*
 * kind LISTS_MIXED: random permutation, groups of mixed sizes (1..200), mixed lists (random sorted
 * subsets of many lengths incl. 0, 1, n; block runs); LISTS_BLOCKS: raster groups of 128 with block
 * lists at ~15% density (first block always kept, a sink); LISTS_QUERY: one query per group.
 */
/* a heads launcher's bf16 output o16 (n rows of stride ldo, head h in columns h*d..) against the bf16
 * of the per-head fp32 output out (heads, n, d): values that differ, and padding columns (past
 * heads*d, poisoned 0xffff before the launch) written */
static void merged_diff(const std::vector<uint16_t> &o16, const std::vector<float> &out, int n, int heads, int d,
			int ldo, long *differ, long *pad)
{
	*differ = *pad = 0;
	for (int r = 0; r < n; r++) {
		for (int h = 0; h < heads; h++)
			for (int c = 0; c < d; c++)
				*differ += o16[(size_t)r * ldo + h * d + c] != f2bf(out[((size_t)h * n + r) * d + c]);
		for (int c = heads * d; c < ldo; c++)
			*pad += o16[(size_t)r * ldo + c] != 0xffff;
	}
}

static void test_sparse(int heads, int n, int d, int kind, bool with_residual, bool with_mass)
{
	static const char *kn[] = {"mixed", "blocks", "per-query"};
	printf("# sparse %s heads=%d n=%d d=%d residual=%d mass=%d\n", kn[kind], heads, n, d, with_residual, with_mass);
	std::vector<uint16_t> q = gen_tensor(heads, n, d, -1.0, 1.0, 0.0);
	std::vector<uint16_t> k = gen_tensor(heads, n, d, -0.5, 0.5, 0.0);
	std::vector<uint16_t> v = gen_tensor(heads, n, d, -0.3, 0.3, 0.2);
	/* groups: the same count per head (the interface), sizes differ per head */
	int ngroups;
	std::vector<std::vector<int>> sizes(heads);
	if (kind == LISTS_QUERY) {
		ngroups = n;
		for (int h = 0; h < heads; h++)
			sizes[h].assign(n, 1);
	} else if (kind == LISTS_BLOCKS) {
		ngroups = (n + 127) / 128;
		for (int h = 0; h < heads; h++)
			for (int g = 0; g < ngroups; g++)
				sizes[h].push_back(std::min(128, n - g * 128));
	} else {
		/* 200, 129, 700: groups of 2 and 6 chunks, spread over the persistent kernel's CTAs */
		static const int pick[] = {128, 128, 128, 200, 37, 5, 1, 8, 9, 64, 127, 129, 3, 128, 700};
		std::vector<int> base;
		int tot = 0;
		while (tot < n) {
			int s = std::min(pick[rng_int(15)], n - tot);
			base.push_back(s);
			tot += s;
		}
		ngroups = (int)base.size();
		for (int h = 0; h < heads; h++) { /* same sizes, another order in odd heads */
			sizes[h] = base;
			if (h % 2)
				std::reverse(sizes[h].begin(), sizes[h].end());
		}
	}
	std::vector<int32_t> perm((size_t)heads * n), goff((size_t)heads * (ngroups + 1)), sidx;
	std::vector<int64_t> soff((size_t)heads * (ngroups + 1));
	for (int h = 0; h < heads; h++) {
		int32_t *ph = &perm[(size_t)h * n];
		for (int i = 0; i < n; i++)
			ph[i] = i;
		if (kind != LISTS_BLOCKS)
			for (int i = n - 1; i > 0; i--)
				std::swap(ph[i], ph[rng_int(i + 1)]);
		int pos = 0;
		for (int g = 0; g < ngroups; g++) {
			goff[(size_t)h * (ngroups + 1) + g] = pos;
			pos += sizes[h][g];
			soff[(size_t)h * (ngroups + 1) + g] = (int64_t)sidx.size();
			std::vector<int> L;
			if (kind == LISTS_BLOCKS) {
				L = block_list(n, (int)ceil(0.15 * ((n + 127) / 128)));
				if (L.empty() || L[0] != 0) { /* sink block 0 */
					std::vector<int> s0;
					for (int j = 0; j < std::min(n, 128); j++)
						s0.push_back(j);
					for (int j : L)
						if (j >= 128)
							s0.push_back(j);
					L = s0;
				}
			} else if (kind == LISTS_QUERY) {
				const int len = rng_int(8) == 0 ? rng_int(3) : (int)(0.15 * n) + rng_int(40);
				L = random_sorted_subset(n, std::min(n, len));
			} else {
				static const int lens[] = {0, 1, 100, 128, 129, 300, -1, -2, -2, -2, -3};
				const int t = lens[rng_int(11)];
				if (t == -1)
					L = random_sorted_subset(n, n);
				else if (t == -2)
					L = random_sorted_subset(n, 1 + rng_int(n));
				else if (t == -3)
					L = block_list(n, 1 + rng_int((n + 127) / 128));
				else
					L = random_sorted_subset(n, std::min(n, t));
			}
			sidx.insert(sidx.end(), L.begin(), L.end());
		}
		goff[(size_t)h * (ngroups + 1) + ngroups] = pos;
		soff[(size_t)h * (ngroups + 1) + ngroups] = (int64_t)sidx.size();
	}
	const size_t no = (size_t)heads * n * d, nl = (size_t)heads * n;
	std::vector<float> res(with_residual ? no : 0);
	for (auto &x : res)
		x = (float)rng_normal();
	/* dense LSE (fp64, rounded to fp32) as lse_ref */
	std::vector<float> lse_ref(nl);
	std::vector<double> lse_ref64(nl);
	{
		RowRef r;
		for (int h = 0; h < heads; h++)
			for (int i = 0; i < n; i++) {
				const size_t off = (size_t)h * n * d;
				row_ref(&q[off + (size_t)i * d], &k[off], &v[off], n, d, NULL, n, 0.0, r);
				lse_ref[(size_t)h * n + i] = (float)r.lse64;
			}
	}
	/* reference per query (all queries; sizes are small) */
	std::vector<RowRef> ref(nl);
	for (int h = 0; h < heads; h++) {
		const size_t off = (size_t)h * n * d;
		for (int g = 0; g < ngroups; g++) {
			const size_t gb = (size_t)h * (ngroups + 1);
			const int64_t s0 = soff[gb + g], s1 = soff[gb + g + 1];
			for (int pq = goff[gb + g]; pq < goff[gb + g + 1]; pq++) {
				const int qi = perm[(size_t)h * n + pq];
				row_ref(&q[off + (size_t)qi * d], &k[off], &v[off], n, d, sidx.data() + s0, (int)(s1 - s0),
					(double)lse_ref[(size_t)h * n + qi], ref[(size_t)h * n + qi]);
			}
		}
	}
	uint16_t *dq = dev_upload(q), *dk = dev_upload(k), *dv = dev_upload(v);
	int32_t *dperm = dev_upload(perm), *dgoff = dev_upload(goff), *dsidx = dev_upload(sidx);
	int64_t *dsoff = dev_upload(soff);
	float *dres = with_residual ? dev_upload(res) : NULL;
	float *dlref = dev_upload(lse_ref);
	float *dout, *dmass;
	CUDA_CHECK(cudaMalloc(&dout, no * 4));
	CUDA_CHECK(cudaMalloc(&dmass, nl * 4));
	std::vector<float> out(no), mass(nl);
	for (int run = 0; run < 2 * (int)g_kernels.size(); run++) { /* each kernel fast, then precise */
		const int pm = run / (int)g_kernels.size();
		const Kernels &K = g_kernels[run % g_kernels.size()];
		if (!K.sparse)
			continue;
		const char *mode = pm ? " precise" : "", *ver = K.name;
		char what[160];
		CUDA_CHECK(cudaMemset(dout, 0xff, no * 4));
		CUDA_CHECK(cudaMemset(dmass, 0xff, nl * 4));
		const int rc = K.sparse(dq, dk, dv, heads, n, d, dperm, dgoff, ngroups, dsoff, dsidx, dres,
					with_mass ? dlref : NULL, dout, with_mass ? dmass : NULL, pm, NULL);
		snprintf(what, sizeof what, "sparse %s%s %s n=%d d=%d", ver, mode, kn[kind], n, d);
		check_launch(what, rc);
		CUDA_CHECK(cudaMemcpy(out.data(), dout, no * 4, cudaMemcpyDeviceToHost));
		CUDA_CHECK(cudaMemcpy(mass.data(), dmass, nl * 4, cudaMemcpyDeviceToHost));
		Err eo, em(0x1p-20);
		for (size_t r = 0; r < nl; r++) {
			for (int c = 0; c < d; c++) {
				const double rv = with_residual ? res[r * d + c] : 0.0;
				const float naive = pm ? ref[r].onp[c] : ref[r].on[c];
				eo.add(out[r * d + c], ref[r].o64[c] + rv, (double)(naive + (float)rv));
			}
			if (with_mass)
				em.add(mass[r], ref[r].mass64, ref[r].massn);
		}
		snprintf(what, sizeof what, "sparse %s%s %s n=%d d=%d O%s", ver, mode, kn[kind], n, d,
			 with_residual ? "+R" : "");
		report(what, eo);
		if (with_mass) {
			snprintf(what, sizeof what, "sparse %s%s %s n=%d d=%d mass", ver, mode, kn[kind], n, d);
			report(what, em);
		}
	}
	/* each kernel with a heads launcher: one launch over heads whose metadata and residuals live apart,
	 * output bf16 merged (with 8 columns of padding, which stay untouched): its fp32 output rounded */
	for (const Kernels &K : g_kernels) {
		if (!K.sparse || !K.heads)
			continue;
		const int ldo = heads * d + 8;
		std::vector<dg_sparse_head> tab(heads);
		std::vector<void *> owned;
		for (int h = 0; h < heads; h++) {
			const size_t gb = (size_t)h * (ngroups + 1);
			std::vector<int32_t> ph(perm.begin() + (size_t)h * n, perm.begin() + (size_t)(h + 1) * n);
			std::vector<int32_t> gh(goff.begin() + gb, goff.begin() + gb + ngroups + 1);
			std::vector<int64_t> sh(ngroups + 1);
			for (int g = 0; g <= ngroups; g++)
				sh[g] = soff[gb + g] - soff[gb];
			std::vector<int32_t> ih(sidx.begin() + soff[gb], sidx.begin() + soff[gb + ngroups]);
			std::vector<float> rh;
			if (with_residual)
				rh.assign(res.begin() + (size_t)h * n * d, res.begin() + (size_t)(h + 1) * n * d);
			tab[h] = { dev_upload(ph), dev_upload(gh), dev_upload(sh), dev_upload(ih),
				   with_residual ? dev_upload(rh) : NULL, DG_RES_F32 };
			owned.insert(owned.end(), { (void *)tab[h].perm, (void *)tab[h].goff, (void *)tab[h].soff,
						    (void *)tab[h].sidx, (void *)tab[h].residual });
		}
		uint16_t *d16;
		const size_t n16 = (size_t)n * ldo;
		CUDA_CHECK(cudaMalloc(&d16, n16 * 2));
		std::vector<uint16_t> o16(n16);
		for (int pm = 0; pm < 2; pm++) {
			CUDA_CHECK(cudaMemset(dout, 0xff, no * 4));
			CUDA_CHECK(cudaMemset(d16, 0xff, n16 * 2));
			int rc = K.sparse(dq, dk, dv, heads, n, d, dperm, dgoff, ngroups, dsoff, dsidx, dres, NULL, dout, NULL,
					  pm, NULL);
			rc |= K.heads(dq, dk, dv, 0, heads, n, d, tab.data(), ngroups, d16, ldo, pm, NULL);
			CUDA_CHECK(cudaDeviceSynchronize());
			CUDA_CHECK(cudaMemcpy(out.data(), dout, no * 4, cudaMemcpyDeviceToHost));
			CUDA_CHECK(cudaMemcpy(o16.data(), d16, n16 * 2, cudaMemcpyDeviceToHost));
			long differ, pad;
			merged_diff(o16, out, n, heads, d, ldo, &differ, &pad);
			CHECKF(rc == 0 && differ == 0 && pad == 0,
			       "sparse_fwd_heads %s%s %s n=%d d=%d%s: bf16 of the per-head output, heads merged, bit for bit "
			       "(%ld values differ, %ld padding values written)",
			       K.name, pm ? " precise" : "", kn[kind], n, d, with_residual ? " +R" : "", differ, pad);
			if (K.name != std::string("promoted"))
				continue;
			/* the same from token-major inputs (as a caller keeps them: row stride ldi, 8 columns of
			 * padding between rows): the same bits */
			const int ldi = heads * d + 8;
			uint16_t *tq = token_major(q, heads, n, d, ldi), *tk = token_major(k, heads, n, d, ldi),
				 *tv = token_major(v, heads, n, d, ldi);
			std::vector<uint16_t> o16t(n16);
			CUDA_CHECK(cudaMemset(d16, 0xff, n16 * 2));
			rc = K.heads(tq, tk, tv, ldi, heads, n, d, tab.data(), ngroups, d16, ldo, pm, NULL);
			CUDA_CHECK(cudaDeviceSynchronize());
			CUDA_CHECK(cudaMemcpy(o16t.data(), d16, n16 * 2, cudaMemcpyDeviceToHost));
			CHECKF(rc == 0 && o16t == o16, "sparse_fwd_heads %s%s %s n=%d d=%d%s: token-major inputs (row stride "
			       "%d) give the head-major inputs' output bit for bit", K.name, pm ? " precise" : "", kn[kind], n, d,
			       with_residual ? " +R" : "", ldi);
			cudaFree(tq), cudaFree(tk), cudaFree(tv);
		}
		for (void *p : owned)
			cudaFree(p);
		cudaFree(d16);
	}
	cudaFree(dq);
	cudaFree(dk);
	cudaFree(dv);
	cudaFree(dperm);
	cudaFree(dgoff);
	cudaFree(dsidx);
	cudaFree(dsoff);
	cudaFree(dres);
	cudaFree(dlref);
	cudaFree(dout);
	cudaFree(dmass);
}

/* rho = 1 equals dense: raster groups of 128, every list = all keys, sparse (fp32) vs dense (fp32) of
 * the same name, in each P.V mode */
static void test_sparse_equals_dense(int heads, int n, int d)
{
	std::vector<uint16_t> q = gen_tensor(heads, n, d, -1.0, 1.0, 0.0);
	std::vector<uint16_t> k = gen_tensor(heads, n, d, -0.5, 0.5, 0.0);
	std::vector<uint16_t> v = gen_tensor(heads, n, d, -0.3, 0.3, 0.2);
	const int ng = (n + 127) / 128;
	std::vector<int32_t> perm((size_t)heads * n), goff((size_t)heads * (ng + 1)), sidx((size_t)heads * ng * n);
	std::vector<int64_t> soff((size_t)heads * (ng + 1));
	for (int h = 0; h < heads; h++) {
		for (int i = 0; i < n; i++)
			perm[(size_t)h * n + i] = i;
		for (int g = 0; g <= ng; g++) {
			goff[(size_t)h * (ng + 1) + g] = std::min(n, g * 128);
			soff[(size_t)h * (ng + 1) + g] = ((int64_t)h * ng + g) * n;
		}
	}
	for (size_t i = 0; i < sidx.size(); i++)
		sidx[i] = (int32_t)(i % n);
	const size_t no = (size_t)heads * n * d;
	uint16_t *dq = dev_upload(q), *dk = dev_upload(k), *dv = dev_upload(v);
	int32_t *dperm = dev_upload(perm), *dgoff = dev_upload(goff), *dsidx = dev_upload(sidx);
	int64_t *dsoff = dev_upload(soff);
	float *a, *b;
	CUDA_CHECK(cudaMalloc(&a, no * 4));
	CUDA_CHECK(cudaMalloc(&b, no * 4));
	std::vector<float> ha(no), hb(no);
	for (int run = 0; run < 2 * (int)g_kernels.size(); run++) {
		const int pm = run / (int)g_kernels.size();
		const Kernels &K = g_kernels[run % g_kernels.size()];
		if (!K.flash || !K.sparse)
			continue;
		CUDA_CHECK(cudaMemset(a, 0xff, no * 4));
		CUDA_CHECK(cudaMemset(b, 0xff, no * 4));
		int rc = K.flash(dq, dk, dv, heads, n, d, a, NULL, NULL, pm, NULL);
		rc |= K.sparse(dq, dk, dv, heads, n, d, dperm, dgoff, ng, dsoff, dsidx, NULL, NULL, b, NULL, pm, NULL);
		CUDA_CHECK(cudaDeviceSynchronize());
		CUDA_CHECK(cudaMemcpy(ha.data(), a, no * 4, cudaMemcpyDeviceToHost));
		CUDA_CHECK(cudaMemcpy(hb.data(), b, no * 4, cudaMemcpyDeviceToHost));
		double mx = 0;
		for (size_t i = 0; i < no; i++) {
			const double e = fabs((double)ha[i] - hb[i]);
			mx = (e == e && mx == mx) ? std::max(mx, e) : NAN;
		}
		CHECKF(rc == 0 && mx == 0.0, "%s%s rho=1 sparse equals dense bitwise, n=%d d=%d (max diff %.3e)", K.name,
		       pm ? " precise" : "", n, d, mx);
	}
	cudaFree(dq);
	cudaFree(dk);
	cudaFree(dv);
	cudaFree(dperm);
	cudaFree(dgoff);
	cudaFree(dsidx);
	cudaFree(dsoff);
	cudaFree(a);
	cudaFree(b);
}

/* window attention (dg_window_fwd): query i attends key j iff i < text, j < text or |i - j| <= w; each
 * row against the fp64 reference of its key set, O (+ a residual stored in fp32 or bf16) and the
 * retained mass, both modes; outputs poisoned. Windows narrower than a tile (a row's window inside
 * one tile), w = 0 (the diagonal alone), w past n (dense), text rows in the first CTAs. */
static void test_window(int heads, int n, int d, int text, int w, int res_dtype)
{
	printf("# window heads=%d n=%d d=%d text=%d w=%d residual=%s\n", heads, n, d, text, w,
	       res_dtype < 0 ? "none" : res_dtype == DG_RES_BF16 ? "bf16" : "fp32");
	std::vector<uint16_t> q = gen_tensor(heads, n, d, -1.0, 1.0, 0.0);
	std::vector<uint16_t> k = gen_tensor(heads, n, d, -0.5, 0.5, 0.0);
	std::vector<uint16_t> v = gen_tensor(heads, n, d, -0.3, 0.3, 0.2);
	const size_t no = (size_t)heads * n * d, nl = (size_t)heads * n;
	/* the residual's values as the kernel reads them (fp32, or bf16 words) */
	std::vector<float> res(res_dtype < 0 ? 0 : no);
	std::vector<uint16_t> res16(res_dtype == DG_RES_BF16 ? no : 0);
	for (size_t e = 0; e < res.size(); e++) {
		res[e] = (float)rng_normal();
		if (res_dtype == DG_RES_BF16) {
			res16[e] = f2bf(res[e]);
			res[e] = bf2f(res16[e]);
		}
	}
	std::vector<float> lse_ref(nl);
	std::vector<RowRef> ref(nl);
	std::vector<int> keys;
	RowRef r;
	for (int h = 0; h < heads; h++) {
		const size_t off = (size_t)h * n * d;
		for (int i = 0; i < n; i++) {
			row_ref(&q[off + (size_t)i * d], &k[off], &v[off], n, d, NULL, n, 0.0, r);
			lse_ref[(size_t)h * n + i] = (float)r.lse64;
			keys.clear();
			for (int j = 0; j < n; j++)
				if (i < text || j < text || abs(i - j) <= w)
					keys.push_back(j);
			row_ref(&q[off + (size_t)i * d], &k[off], &v[off], n, d, keys.data(), (int)keys.size(),
				(double)lse_ref[(size_t)h * n + i], ref[(size_t)h * n + i]);
		}
	}
	uint16_t *dq = dev_upload(q), *dk = dev_upload(k), *dv = dev_upload(v);
	void *dres = res_dtype == DG_RES_BF16 ? (void *)dev_upload(res16) : res_dtype == DG_RES_F32 ? (void *)dev_upload(res)
											   : NULL;
	float *dlref = dev_upload(lse_ref), *dout, *dmass;
	CUDA_CHECK(cudaMalloc(&dout, no * 4));
	CUDA_CHECK(cudaMalloc(&dmass, nl * 4));
	std::vector<float> out(no), mass(nl);
	for (int pm = 0; pm < 2; pm++) {
		char what[160];
		CUDA_CHECK(cudaMemset(dout, 0xff, no * 4));
		CUDA_CHECK(cudaMemset(dmass, 0xff, nl * 4));
		const int rc = dg_window_fwd(dq, dk, dv, heads, n, d, text, w, dres, res_dtype < 0 ? DG_RES_F32 : res_dtype,
					     dlref, dout, dmass, pm, NULL);
		snprintf(what, sizeof what, "window%s n=%d d=%d text=%d w=%d", pm ? " precise" : "", n, d, text, w);
		check_launch(what, rc);
		CUDA_CHECK(cudaMemcpy(out.data(), dout, no * 4, cudaMemcpyDeviceToHost));
		CUDA_CHECK(cudaMemcpy(mass.data(), dmass, nl * 4, cudaMemcpyDeviceToHost));
		/* O too allows the transcendentals' 2^-20: at w = 0 a row has one key and the naive error is 0
		 * (its P exactly 1), while the kernel's P = ex2.approx(fma residual of s sl2 - m) is within
		 * 2^-22 of 1: rounded to bf16 in P.V (fast mode), but not in the row sum (seed
		 * 7029929120286145716: err 1.2e-6, 2.4e-7 of max|ref|) */
		Err eo(0x1p-20), em(0x1p-20);
		for (size_t e = 0; e < nl; e++) {
			for (int c = 0; c < d; c++) {
				const double rv = res.empty() ? 0.0 : res[e * d + c];
				const float naive = pm ? ref[e].onp[c] : ref[e].on[c];
				eo.add(out[e * d + c], ref[e].o64[c] + rv, (double)(naive + (float)rv));
			}
			em.add(mass[e], ref[e].mass64, ref[e].massn);
		}
		snprintf(what, sizeof what, "window%s n=%d d=%d text=%d w=%d O%s", pm ? " precise" : "", n, d, text, w,
			 res.empty() ? "" : "+R");
		report(what, eo);
		snprintf(what, sizeof what, "window%s n=%d d=%d text=%d w=%d mass", pm ? " precise" : "", n, d, text, w);
		report(what, em);
		if (heads < 2)
			continue;
		/* the heads launcher (each head's residual apart, bf16 merged output with 8 columns of padding
		 * that stay untouched): the fp32 output above rounded, bit for bit */
		const int ldo = heads * d + 8;
		const size_t n16 = (size_t)n * ldo, rb = (size_t)n * d * (res_dtype == DG_RES_BF16 ? 2 : 4);
		std::vector<const void *> rh(heads);
		for (int h = 0; h < heads; h++)
			rh[h] = dres ? (const char *)dres + h * rb : NULL;
		uint16_t *d16;
		CUDA_CHECK(cudaMalloc(&d16, n16 * 2));
		CUDA_CHECK(cudaMemset(d16, 0xff, n16 * 2));
		const int rch = dg_window_fwd_heads(dq, dk, dv, heads, n, d, text, w, dres ? rh.data() : NULL,
						    res_dtype < 0 ? DG_RES_F32 : res_dtype, d16, ldo, pm, NULL);
		CUDA_CHECK(cudaDeviceSynchronize());
		std::vector<uint16_t> o16(n16);
		CUDA_CHECK(cudaMemcpy(o16.data(), d16, n16 * 2, cudaMemcpyDeviceToHost));
		long differ, pad;
		merged_diff(o16, out, n, heads, d, ldo, &differ, &pad);
		CHECKF(rch == 0 && differ == 0 && pad == 0,
		       "window_fwd_heads%s n=%d d=%d text=%d w=%d%s: bf16 of the per-head output, heads merged, bit for bit "
		       "(%ld values differ, %ld padding values written)", pm ? " precise" : "", n, d, text, w,
		       res.empty() ? "" : " +R", differ, pad);
		cudaFree(d16);
	}
	cudaFree(dq);
	cudaFree(dk);
	cudaFree(dv);
	cudaFree(dres);
	cudaFree(dlref);
	cudaFree(dout);
	cudaFree(dmass);
}

static void test_bad_args(void)
{
	uint16_t *x = NULL;
	CUDA_CHECK(cudaMalloc(&x, 1 << 20));
	float *o = (float *)x;
	CHECK("flash rejects head_dim 96", dg_flash_fwd(x, x, x, 1, 16, 96, o, NULL, NULL, 0, NULL) == -1);
	CHECK("flash rejects no output", dg_flash_fwd(x, x, x, 1, 16, 64, NULL, NULL, NULL, 0, NULL) == -1);
	CHECK("flash rejects misaligned q", dg_flash_fwd(x + 1, x, x, 1, 16, 64, o, NULL, NULL, 0, NULL) == -1);
	CHECK("sparse rejects mass without lse_ref",
	      dg_sparse_fwd(x, x, x, 1, 16, 64, (int32_t *)x, (int32_t *)x, 1, (int64_t *)x, (int32_t *)x, NULL, NULL,
			    o, o, 0, NULL) == -1);
	dg_sparse_head t = { (int32_t *)x, (int32_t *)x, (int64_t *)x, (int32_t *)x, NULL, DG_RES_F32 };
	CHECK("sparse_fwd_heads rejects a row stride below heads x d",
	      dg_sparse_fwd_heads(x, x, x, 0, 1, 16, 64, &t, 1, x, 32, 0, NULL) == -1);
	CHECK("sparse_fwd_heads rejects more than DG_SPARSE_HEADS_MAX heads",
	      dg_sparse_fwd_heads(x, x, x, 0, DG_SPARSE_HEADS_MAX + 1, 16, 64, &t, 1, x, 64 * 64, 0, NULL) == -1);
	CHECK("sparse_fwd_heads rejects an input row stride below heads x d",
	      dg_sparse_fwd_heads(x, x, x, 32, 1, 16, 64, &t, 1, x, 64, 0, NULL) == -1);
	CHECK("sparse_fwd_heads rejects an input row stride of rows not 16-byte aligned",
	      dg_sparse_fwd_heads(x, x, x, 68, 1, 16, 64, &t, 1, x, 64, 0, NULL) == -1);
	t.sidx = NULL;
	CHECK("sparse_fwd_heads rejects a head without key lists", dg_sparse_fwd_heads(x, x, x, 0, 1, 16, 64, &t, 1, x, 64, 0,
										      NULL) == -1);
	CHECK("window rejects a text prefix past n", dg_window_fwd(x, x, x, 1, 16, 64, 17, 4, NULL, DG_RES_F32, NULL, o, NULL,
								 0, NULL) == -1);
	CHECK("window rejects a negative half-width", dg_window_fwd(x, x, x, 1, 16, 64, 0, -1, NULL, DG_RES_F32, NULL, o,
								     NULL, 0, NULL) == -1);
	CHECK("window_fwd_heads rejects a row stride below heads x d",
	      dg_window_fwd_heads(x, x, x, 2, 16, 64, 0, 4, NULL, DG_RES_F32, x, 64, 0, NULL) == -1);
	CHECK("window rejects mass without lse_ref", dg_window_fwd(x, x, x, 1, 16, 64, 0, 4, NULL, DG_RES_F32, NULL, o, o,
								    0, NULL) == -1);
	cudaFree(x);
}

/* the run's header line and inputs' seed; 77 (skipped) without a CUDA device */
static int start(const char *prog, bool quick, cudaDeviceProp &prop)
{
	if (gpu_device_or_skip(&prop))
		return 77;
	char date[32];
	time_t now = time(NULL);
	strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	const char *commit = getenv("DG_COMMIT") ? getenv("DG_COMMIT") : DG_GIT_COMMIT;
	printf("# %s: device %s (sm_%d%d, %d SMs), date %s, commit %s%s\n", prog, prop.name, prop.major, prop.minor,
	       prop.multiProcessorCount, date, commit, quick ? ", quick" : "");
	rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)now * 0x2545F4914F6CDD1Dull; /* fresh inputs every run */
	if (getenv("DG_SEED")) /* reproduce a run: the seed it printed */
		rng_state = strtoull(getenv("DG_SEED"), NULL, 10);
	printf("# seed %llu (DG_SEED=%llu reproduces these inputs)\n", (unsigned long long)rng_state,
	       (unsigned long long)rng_state);
	return 0;
}

/* every check of g_kernels (--quick: small sizes) */
static void run_checks(bool quick)
{
	if (quick) {
		test_dense(1, 200, 128);
		test_dense(1, 130, 64);
		test_sparse(1, 300, 128, LISTS_MIXED, true, true);
		test_sparse(1, 150, 64, LISTS_MIXED, false, true);
		if (g_promoted)
			test_window(1, 300, 128, 30, 50, DG_RES_F32);
	} else {
		test_dense(2, 1000, 128);
		test_dense(2, 1000, 64);
		test_dense(2, 4100, 128);
		test_dense(1, 4100, 64);
		test_dense(1, 77, 128);
		test_sparse(2, 1000, 128, LISTS_MIXED, true, true);
		test_sparse(2, 1000, 64, LISTS_MIXED, true, false);
		test_sparse(1, 2100, 128, LISTS_BLOCKS, false, true);
		test_sparse(1, 2100, 64, LISTS_BLOCKS, true, true);
		/* groups of one: 1000 of them go to the small-group kernel, 2 x 200 (at most
		 * DG_SPARSE_SMALL_PROMOTE) to the tensor-core kernel */
		test_sparse(1, 1000, 128, LISTS_QUERY, true, true);
		test_sparse(2, 200, 64, LISTS_QUERY, false, true);
		test_sparse_equals_dense(2, 1000, 128);
		test_sparse_equals_dense(1, 700, 64);
		if (g_promoted) {
			test_window(1, 1000, 128, 0, 100, -1);
			test_window(2, 1000, 64, 77, 300, DG_RES_F32);
			test_window(2, 2100, 128, 200, 20, DG_RES_BF16);
			test_window(3, 700, 64, 0, 0, -1);
			test_window(1, 600, 128, 50, 5000, -1);
			test_window(1, 4100, 128, 0, 700, DG_RES_F32);
		}
	}
}

#ifndef DG_GPU_KERNELS_NO_MAIN
int main(int argc, char **argv)
{
	bool quick = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			quick = true;
		else {
			fprintf(stderr, "usage: gpu_kernels [--quick]\n");
			return 2;
		}
	}
	cudaDeviceProp prop;
	if (start("gpu_kernels", quick, prop))
		return 77;
	if (prop.major != 9) {
		printf("skipped: the kernels are built for sm_90a, the device is sm_%d%d\n", prop.major, prop.minor);
		return 77;
	}
	g_kernels = {{"promoted", dg_flash_fwd, dg_sparse_fwd, dg_sparse_fwd_heads}};
	test_bad_args();
	run_checks(quick);
	return test_report();
}
#endif

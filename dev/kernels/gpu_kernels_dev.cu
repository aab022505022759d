/*
 * gpu_kernels_dev.cu: tests/kernels/gpu_kernels.cu's checks (fp64 reference, FA3 tolerance rule, every output
 * written, sparse with all keys = dense bit for bit) on every numbered version of the dense and sparse
 * attention kernels (dsgap_kernels_dev.h), in both P.V modes; the versions' own argument checks.
 * Every sparse version through the DiT's table of heads (dg_sparse_fwd_heads_v) equals its own
 * per-head output rounded to bf16, bit for bit; dg_flash_fwd_kv is tests/kernels/gpu_kernels.cu's alone.
 *   gpu_kernels_dev [--quick] [--version V]   (V: that version alone)
 *   env: DG_SEED, DG_WATCHDOG_S as gpu_kernels
 * Exits 77 (skipped) when there is no CUDA device. On a device other than sm_90 only version 1 is run.
 */
#define DG_GPU_KERNELS_NO_MAIN
#include "gpu_kernels.cu"

#include "dsgap_kernels_dev.h"

#define MAXV 18 /* the versions this test lists (checked against the names) */

template <int V>
static int flash_v(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d, float *o_f32,
		   uint16_t *o_bf16, float *lse, int precise, dg_stream stream)
{
	return dg_flash_fwd_v(V, q, k, v, heads, n, d, o_f32, o_bf16, lse, precise, stream);
}
template <int V>
static int sparse_v(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
		    const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff, const int32_t *sidx,
		    const float *residual, const float *lse_ref, float *o, float *mass, int precise, dg_stream stream)
{
	return dg_sparse_fwd_v(V, q, k, v, heads, n, d, perm, goff, ngroups, soff, sidx, residual, lse_ref, o, mass,
			       precise, stream);
}
template <int V>
static int heads_v(const uint16_t *q, const uint16_t *k, const uint16_t *v, int ldi, int heads, int n, int d,
		   const dg_sparse_head *tab, int ngroups, uint16_t *o16, int ldo, int precise, dg_stream stream)
{
	if (ldi) /* the numbered versions read head-major inputs */
		return -1;
	return dg_sparse_fwd_heads_v(V, q, k, v, heads, n, d, tab, ngroups, o16, ldo, precise, stream);
}
static const flash_fn flash_versions[MAXV + 1] = {NULL,	     flash_v<1>, flash_v<2>, flash_v<3>, flash_v<4>,
						  flash_v<5>, flash_v<6>, flash_v<7>, flash_v<8>, flash_v<9>, flash_v<10>,
						  flash_v<11>, flash_v<12>, flash_v<13>, flash_v<14>, flash_v<15>, flash_v<16>, flash_v<17>, flash_v<18>};
static const sparse_fn sparse_versions[MAXV + 1] = {NULL,	sparse_v<1>, sparse_v<2>, sparse_v<3>, sparse_v<4>,
						    sparse_v<5>, sparse_v<6>, sparse_v<7>, sparse_v<8>, sparse_v<9>, sparse_v<10>,
						    sparse_v<11>, sparse_v<12>, sparse_v<13>, sparse_v<14>, sparse_v<15>, sparse_v<16>, sparse_v<17>, sparse_v<18>};
static const sparse_heads_fn heads_versions[MAXV + 1] = {NULL,	  heads_v<1>, heads_v<2>, heads_v<3>, heads_v<4>,
							 heads_v<5>, heads_v<6>, heads_v<7>, heads_v<8>, heads_v<9>, heads_v<10>,
							 heads_v<11>, heads_v<12>, heads_v<13>, heads_v<14>, heads_v<15>, heads_v<16>, heads_v<17>, heads_v<18>};
static const char *const version_names[MAXV + 1] = {"", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18"};

static void test_versions_args(void)
{
	uint16_t *x = NULL;
	CUDA_CHECK(cudaMalloc(&x, 1 << 20));
	float *o = (float *)x;
	int32_t *i32 = (int32_t *)x;
	CHECK("every version is listed", dg_flash_fwd_name(MAXV + 1) == NULL && dg_sparse_fwd_name(MAXV + 1) == NULL);
	CHECK("version 0 is the promoted one", dg_flash_fwd_name(0) == dg_flash_fwd_name(DG_FLASH_FWD_PROMOTED) &&
						       dg_sparse_fwd_name(0) == dg_sparse_fwd_name(DG_SPARSE_FWD_PROMOTED));
	CHECK("flash rejects version 99", dg_flash_fwd_v(99, x, x, x, 1, 16, 64, o, NULL, NULL, 1, NULL) == -1);
	CHECK("sparse rejects version 99", dg_sparse_fwd_v(99, x, x, x, 1, 16, 64, i32, i32, 1, (int64_t *)x, i32, NULL,
							   NULL, o, NULL, 0, NULL) == -1);
	CHECK("flash v1 rejects head_dim 96", dg_flash_fwd_v(1, x, x, x, 1, 16, 96, o, NULL, NULL, 0, NULL) == -1);
	cudaFree(x);
}

int main(int argc, char **argv)
{
	bool quick = false;
	int only = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			quick = true;
		else if (!strcmp(argv[i], "--version") && i + 1 < argc)
			only = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: gpu_kernels_dev [--quick] [--version V]\n");
			return 2;
		}
	}
	cudaDeviceProp prop;
	if (start("gpu_kernels_dev", quick, prop))
		return 77;
	for (int v = 1; v <= MAXV; v++) {
		if (dg_flash_fwd_name(v))
			printf("# flash  %s\n", dg_flash_fwd_name(v));
		if (dg_sparse_fwd_name(v))
			printf("# sparse %s\n", dg_sparse_fwd_name(v));
	}
	if (prop.major != 9) {
		printf("# device is not sm_90: only version 1 is checked\n");
		only = 1;
	}
	for (int v = 1; v <= MAXV; v++) {
		const bool f = dg_flash_fwd_name(v) != NULL, s = dg_sparse_fwd_name(v) != NULL;
		if ((only && v != only) || !(f || s))
			continue;
		g_kernels.push_back({version_names[v], f ? flash_versions[v] : NULL, s ? sparse_versions[v] : NULL,
				     s ? heads_versions[v] : NULL});
	}
	g_promoted = false;
	test_bad_args();
	test_versions_args();
	run_checks(quick);
	return test_report();
}

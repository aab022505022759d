/*
 * gemm_probe.cu (dev): how far the DiT engine's cuBLASLt GEMMs are from the best cuBLASLt has, and what
 * the gated residual in the GEMM's epilogue would save (issue 21: the shared parts of a 720p step).
 * For each Wan GEMM shape (src/dit/wan_ops_gpu.c's get_plan: y (m, out) = x (m, in) W^T + b, bf16
 * operands, compute 32F, fp32 or bf16 output), times the heuristic's first algorithm (what the engine
 * runs) against each of the first NALGO it returns, and reports the fastest, with its id, tile, stages,
 * split-K and reduction scheme, and how far its output is from the first's (relative max). Then the
 * fused form of x += gate * (h W^T + b): alpha a device vector (the gate), beta 1, C = D = x, bias
 * gate * b, against the plain GEMM into a scratch (the engine's add then reads both again).
 *   nvcc -O2 -arch=sm_90a dev/profile/gemm_probe.cu -lcublasLt -o gemm_probe && ./gemm_probe [NALGO]
 */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
#define BK(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s:%d cublas %d\n", __FILE__, __LINE__, (int)s_); exit(1); } } while (0)

static __global__ void fill_bf16(__nv_bfloat16 *p, size_t n, uint32_t seed, float amp)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		uint32_t h = (uint32_t)i * 2654435761u ^ seed;
		h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
		p[i] = __float2bfloat16(amp * ((h & 0xffffff) / 16777216.0f - 0.5f));
	}
}

static __global__ void fill_f32(float *p, size_t n, uint32_t seed, float amp)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		uint32_t h = (uint32_t)i * 2654435761u ^ seed;
		h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
		p[i] = amp * ((h & 0xffffff) / 16777216.0f - 0.5f);
	}
}

/* the engine's add: x += r * gate, rows of n */
static __global__ void add_gated(float *x, const float *r, const float *g, size_t total, int n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total / 4; i += (size_t)gridDim.x * blockDim.x) {
		float4 a = ((float4 *)x)[i], b = ((const float4 *)r)[i], c = ((const float4 *)g)[(i * 4 % n) / 4];
		a.x += b.x * c.x, a.y += b.y * c.y, a.z += b.z * c.z, a.w += b.w * c.w;
		((float4 *)x)[i] = a;
	}
}

static cublasLtHandle_t lt;
static void *ws;
#define WS (32u << 20)

typedef struct { cublasLtMatmulDesc_t op; cublasLtMatrixLayout_t a, b, c; } desc;

static desc make(int m, int out, int in, cublasLtEpilogue_t ep, cudaDataType_t dt, cublasLtPointerMode_t pm)
{
	desc d;
	BK(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
	BK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
	BK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
	BK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
	BK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm));
	if (dt == CUDA_R_32F && (ep == CUBLASLT_EPILOGUE_BIAS || ep == CUBLASLT_EPILOGUE_GELU_BIAS)) {
		cudaDataType_t bt = CUDA_R_32F;
		BK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
	}
	BK(cublasLtMatrixLayoutCreate(&d.a, CUDA_R_16BF, in, out, in));
	BK(cublasLtMatrixLayoutCreate(&d.b, CUDA_R_16BF, in, m, in));
	BK(cublasLtMatrixLayoutCreate(&d.c, dt, out, m, out));
	return d;
}

static int algos(desc *d, cublasLtMatmulHeuristicResult_t *r, int want)
{
	cublasLtMatmulPreference_t pref;
	BK(cublasLtMatmulPreferenceCreate(&pref));
	uint64_t w = WS;
	BK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &w, sizeof w));
	int n = 0;
	cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, d->op, d->a, d->b, d->c, d->c, pref, want, r, &n);
	cublasLtMatmulPreferenceDestroy(pref);
	return s == CUBLAS_STATUS_SUCCESS ? n : 0;
}

static float time_ms(desc *d, const cublasLtMatmulAlgo_t *al, const void *alpha, const void *w, const void *x,
		     float beta, const void *c, void *y, int reps)
{
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
	for (int i = 0; i < 2; i++)
		if (cublasLtMatmul(lt, d->op, alpha, w, d->a, x, d->b, &beta, c, d->c, y, d->c, al, ws, WS, 0))
			return -1;
	CK(cudaEventRecord(a));
	for (int i = 0; i < reps; i++)
		BK(cublasLtMatmul(lt, d->op, alpha, w, d->a, x, d->b, &beta, c, d->c, y, d->c, al, ws, WS, 0));
	CK(cudaEventRecord(b));
	CK(cudaEventSynchronize(b));
	float ms;
	CK(cudaEventElapsedTime(&ms, a, b));
	cudaEventDestroy(a), cudaEventDestroy(b);
	return ms / reps;
}

static void algo_desc(const cublasLtMatmulAlgo_t *al, char *s, size_t n)
{
	int id = 0, tile = 0, stages = 0, splitk = 0, red = 0, cl = 0;
	size_t w;
	cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
	cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
	cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
	cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w);
	cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red, &w);
	cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof cl, &w);
	snprintf(s, n, "id%d/tile%d/st%d/splitk%d/red%d/cl%d", id, tile, stages, splitk, red, cl);
}

static double rel_diff(const void *a, const void *b, size_t n, cudaDataType_t dt)
{
	size_t bytes = n * (dt == CUDA_R_32F ? 4 : 2);
	char *ha = (char *)malloc(bytes), *hb = (char *)malloc(bytes);
	CK(cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(hb, b, bytes, cudaMemcpyDeviceToHost));
	double mx = 0, md = 0;
	for (size_t i = 0; i < n; i++) {
		float x, y;
		if (dt == CUDA_R_32F)
			x = ((float *)ha)[i], y = ((float *)hb)[i];
		else {
			uint32_t u = (uint32_t)((uint16_t *)ha)[i] << 16, v = (uint32_t)((uint16_t *)hb)[i] << 16;
			memcpy(&x, &u, 4), memcpy(&y, &v, 4);
		}
		mx = fmax(mx, fabs(x)), md = fmax(md, fabs(x - y));
	}
	free(ha), free(hb);
	return mx > 0 ? md / mx : md;
}

int main(int argc, char **argv)
{
	int NALGO = argc > 1 ? atoi(argv[1]) : 16;
	BK(cublasLtCreate(&lt));
	CK(cudaMalloc(&ws, WS));
	cudaDeviceProp pr;
	CK(cudaGetDeviceProperties(&pr, 0));
	printf("device %s, cuBLASLt %zu\n", pr.name, cublasLtGetVersion());
	struct { const char *name; int m, out, in; cublasLtEpilogue_t ep; cudaDataType_t dt; float beta; } S[] = {
		{ "1.3b-480p qkvo", 32760, 1536, 1536, CUBLASLT_EPILOGUE_BIAS, CUDA_R_32F, 0 },
		{ "1.3b-480p ffn1", 32760, 8960, 1536, CUBLASLT_EPILOGUE_GELU_BIAS, CUDA_R_16BF, 0 },
		{ "1.3b-480p ffn2", 32760, 1536, 8960, CUBLASLT_EPILOGUE_BIAS, CUDA_R_32F, 0 },
		{ "1.3b-720p qkvo", 75600, 1536, 1536, CUBLASLT_EPILOGUE_BIAS, CUDA_R_32F, 0 },
		{ "1.3b-720p co(add)", 75600, 1536, 1536, CUBLASLT_EPILOGUE_BIAS, CUDA_R_32F, 1 },
		{ "1.3b-720p ffn1", 75600, 8960, 1536, CUBLASLT_EPILOGUE_GELU_BIAS, CUDA_R_16BF, 0 },
		{ "1.3b-720p ffn2", 75600, 1536, 8960, CUBLASLT_EPILOGUE_BIAS, CUDA_R_32F, 0 },
		{ "14b-720p qkvo", 75600, 5120, 5120, CUBLASLT_EPILOGUE_BIAS, CUDA_R_32F, 0 },
		{ "14b-720p ffn1", 75600, 13824, 5120, CUBLASLT_EPILOGUE_GELU_BIAS, CUDA_R_16BF, 0 },
		{ "14b-720p ffn2", 75600, 5120, 13824, CUBLASLT_EPILOGUE_BIAS, CUDA_R_32F, 0 },
	};
	size_t maxw = 0, maxx = 0, maxy = 0;
	for (size_t i = 0; i < sizeof S / sizeof *S; i++) {
		size_t w = (size_t)S[i].out * S[i].in, x = (size_t)S[i].m * S[i].in, y = (size_t)S[i].m * S[i].out;
		maxw = w > maxw ? w : maxw, maxx = x > maxx ? x : maxx, maxy = y > maxy ? y : maxy;
	}
	__nv_bfloat16 *W, *X;
	float *Y0, *Y1, *B, *G, *R;
	CK(cudaMalloc(&W, maxw * 2)); CK(cudaMalloc(&X, maxx * 2));
	CK(cudaMalloc(&Y0, maxy * 4)); CK(cudaMalloc(&Y1, maxy * 4)); CK(cudaMalloc(&R, maxy * 4));
	CK(cudaMalloc(&B, 16384 * 4)); CK(cudaMalloc(&G, 16384 * 4));
	fill_bf16<<<1024, 256>>>(W, maxw, 1, 0.05f);
	fill_bf16<<<1024, 256>>>(X, maxx, 2, 2.0f);
	fill_f32<<<64, 256>>>(B, 16384, 3, 0.2f);
	fill_f32<<<64, 256>>>(G, 16384, 4, 1.0f);
	CK(cudaDeviceSynchronize());
	printf("shape,m,out,in,tflop,n_algos,first_ms,first_tflops,best_ms,best_tflops,best_index,best_algo,best_rel_diff\n");
	cublasLtMatmulHeuristicResult_t *r = (cublasLtMatmulHeuristicResult_t *)calloc(NALGO, sizeof *r);
	const float one = 1.0f;
	for (size_t i = 0; i < sizeof S / sizeof *S; i++) {
		desc d = make(S[i].m, S[i].out, S[i].in, S[i].ep, S[i].dt, CUBLASLT_POINTER_MODE_HOST);
		BK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &B, sizeof B));
		int n = algos(&d, r, NALGO);
		double tf = 2.0 * S[i].m * S[i].out * S[i].in / 1e12;
		size_t ny = (size_t)S[i].m * S[i].out;
		float t0 = time_ms(&d, &r[0].algo, &one, W, X, S[i].beta, Y0, Y0, 10), best = t0;
		int bi = 0;
		for (int k = 1; k < n; k++) {
			float t = time_ms(&d, &r[k].algo, &one, W, X, S[i].beta, Y1, Y1, 10);
			if (t > 0 && t < best)
				best = t, bi = k;
		}
		/* the outputs of the first and the best from the same C (beta 1: both from zero) */
		CK(cudaMemset(Y0, 0, ny * 4)); CK(cudaMemset(Y1, 0, ny * 4));
		BK(cublasLtMatmul(lt, d.op, &one, W, d.a, X, d.b, &S[i].beta, Y0, d.c, Y0, d.c, &r[0].algo, ws, WS, 0));
		BK(cublasLtMatmul(lt, d.op, &one, W, d.a, X, d.b, &S[i].beta, Y1, d.c, Y1, d.c, &r[bi].algo, ws, WS, 0));
		char s[128];
		algo_desc(&r[bi].algo, s, sizeof s);
		printf("%s,%d,%d,%d,%.3f,%d,%.4f,%.1f,%.4f,%.1f,%d,%s,%.3g\n", S[i].name, S[i].m, S[i].out, S[i].in, tf, n, t0,
		       tf / t0 * 1e3, best, tf / best * 1e3, bi, s, rel_diff(Y0, Y1, ny, S[i].dt));
		fflush(stdout);
	}
	/* the gated residual: x += gate * (h W^T + b) in the epilogue, against GEMM to R + add_gated */
	printf("fused,m,out,in,n_algos,plain_gemm_ms,add_ms,plain_total_ms,fused_ms,fused_rel_diff\n");
	for (size_t i = 0; i < sizeof S / sizeof *S; i++) {
		if (S[i].dt != CUDA_R_32F || S[i].beta != 0)
			continue;
		int m = S[i].m, out = S[i].out, in = S[i].in;
		size_t ny = (size_t)m * out;
		desc p = make(m, out, in, CUBLASLT_EPILOGUE_BIAS, CUDA_R_32F, CUBLASLT_POINTER_MODE_HOST);
		BK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &B, sizeof B));
		int n = algos(&p, r, 1);
		float tp = time_ms(&p, &r[0].algo, &one, W, X, 0.0f, R, R, 10);
		cudaEvent_t a, b;
		CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
		fill_f32<<<1024, 256>>>(Y0, ny, 5, 1.0f);
		CK(cudaEventRecord(a));
		for (int k = 0; k < 10; k++)
			add_gated<<<2048, 256>>>(Y0, R, G, ny, out);
		CK(cudaEventRecord(b));
		CK(cudaEventSynchronize(b));
		float ta;
		CK(cudaEventElapsedTime(&ta, a, b));
		ta /= 10;
		/* fused: bias gb = gate * b (a separate vector), alpha = gate, beta 1, C = D = Y1 */
		desc f = make(m, out, in, CUBLASLT_EPILOGUE_BIAS, CUDA_R_32F, CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST);
		float *GB;
		CK(cudaMalloc(&GB, out * 4));
		{
			float *hb = (float *)malloc(out * 4), *hg = (float *)malloc(out * 4);
			CK(cudaMemcpy(hb, B, out * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(hg, G, out * 4, cudaMemcpyDeviceToHost));
			for (int j = 0; j < out; j++)
				hb[j] *= hg[j];
			CK(cudaMemcpy(GB, hb, out * 4, cudaMemcpyHostToDevice));
			free(hb), free(hg);
		}
		BK(cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &GB, sizeof GB));
		int nf = algos(&f, r, 1);
		float tfz = -1;
		double rd = -1;
		if (nf > 0) {
			fill_f32<<<1024, 256>>>(Y1, ny, 5, 1.0f);
			tfz = time_ms(&f, &r[0].algo, G, W, X, 1.0f, Y1, Y1, 10);
			/* check: one fused step from x0 against GEMM + add_gated from x0 */
			fill_f32<<<1024, 256>>>(Y0, ny, 5, 1.0f);
			fill_f32<<<1024, 256>>>(Y1, ny, 5, 1.0f);
			add_gated<<<2048, 256>>>(Y0, R, G, ny, out);
			float bone = 1.0f;
			BK(cublasLtMatmul(lt, f.op, G, W, f.a, X, f.b, &bone, Y1, f.c, Y1, f.c, &r[0].algo, ws, WS, 0));
			CK(cudaDeviceSynchronize());
			rd = rel_diff(Y0, Y1, ny, CUDA_R_32F);
		}
		printf("%s,%d,%d,%d,%d,%.4f,%.4f,%.4f,%.4f,%.3g\n", S[i].name, m, out, in, nf, tp, ta, tp + ta, tfz, rd);
		fflush(stdout);
		(void)n;
		cudaFree(GB);
	}
	return 0;
}

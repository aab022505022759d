/*
 * bench_versions.cu: dsgap-bench-kernels-dev, dsgap-bench-kernels (kernels/bench_attn.cu, included: the
 * same inputs, timing and promoted lines) plus the numbered versions of the attention kernels
 * (dsgap_kernels_dev.h), against the promoted dense time:
 *   dense_tflops_v<i>, dense_precise_over_fast_v<i>                   (bf16 output + LSE)
 *   sparse_over_dense_v<i>@0.15, sparse_precise_over_fast_v<i>@0.15   (groups of 128, token lists)
 *   dsgap-bench-kernels-dev [--n 32760] [--heads 12] [--d 128] [--reps 30] [--csv FILE] [--quick]
 * The promoted version's number runs the promoted launcher: its lines repeat the promoted ones (a
 * view of the run-to-run spread).
 */
#define DG_BENCH_ATTN_NO_MAIN
#include "bench_attn.cu"

#include "dsgap_kernels_dev.h"

int main(int argc, char **argv)
{
	Bench B;
	const int rc = bench_setup(argc, argv, "dsgap-bench-kernels-dev", B);
	if (rc)
		return rc;
	bench_promoted(B);
	const int n = B.n, heads = B.heads, d = B.d;
	const double dense_flop = 4.0 * n * (double)n * d * heads;
	char name[64];
	for (int ver = 1; dg_flash_fwd_name(ver); ver++) {
		auto run = [&](int precise) {
			return time_ms([&] {
				return dg_flash_fwd_v(ver, B.q, B.k, B.v, heads, n, d, NULL, B.ob, B.lse, precise, NULL);
			});
		};
		const double t = run(0), tp = run(1);
		snprintf(name, sizeof name, "dense_tflops_v%d", ver);
		emit(name, dense_flop / t * 1e-9, "TFLOP/s");
		snprintf(name, sizeof name, "dense_precise_over_fast_v%d", ver);
		emit(name, tp / t, "x");
	}
	Groups G = token_groups(B, 0.15);
	for (int ver = 1; dg_sparse_fwd_name(ver); ver++) {
		auto run = [&](int precise) {
			return time_ms([&] {
				return dg_sparse_fwd_v(ver, B.q, B.k, B.v, heads, n, d, G.perm, G.goff, G.ngroups, G.soff, G.sidx,
						       B.res, B.lse, B.o, NULL, precise, NULL);
			});
		};
		const double t = run(0), tp = run(1);
		snprintf(name, sizeof name, "sparse_over_dense_v%d@0.15", ver);
		emit(name, B.t_dense / t, "x");
		snprintf(name, sizeof name, "sparse_precise_over_fast_v%d@0.15", ver);
		emit(name, tp / t, "x");
	}
	G.free_all();
	bench_free(B);
	return 0;
}

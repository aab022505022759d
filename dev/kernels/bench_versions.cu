/*
 * bench_versions.cu: dsgap-bench-kernels-dev, dsgap-bench-kernels (bench/bench_attn.cu, included: the
 * same inputs, timing and promoted lines) plus the numbered versions of the attention kernels
 * (dsgap_kernels_dev.h), against the promoted dense time:
 *   dense_tflops_v<i>, dense_precise_over_fast_v<i>                   (bf16 output + LSE)
 *   sparse_over_dense_v<i>@0.15, sparse_precise_over_fast_v<i>@0.15   (groups of 128, token lists)
 *   sparse_heads_over_dense_v<i>@0.15  (the same groups and lists through dg_sparse_fwd_heads_v: the DiT's
 *                                       call, a table of heads and bf16 token-major output; fast mode)
 *   probe_v<i>_<warpgroup>_<phase>@0.15  (v11, v16, v18: the share of each phase in that warpgroup's clocks,
 *                                         fast mode; warpgroup producer or consumers, the two summed)
 *   dsgap-bench-kernels-dev [--n 32760] [--heads 12] [--d 128] [--reps 30] [--csv FILE] [--quick] [--dense]
 * --dense: the dense versions only, after the promoted lines of --quick.
 * The promoted version's number runs the promoted launcher: its lines repeat the promoted ones (a
 * view of the run-to-run spread).
 */
#define DG_BENCH_ATTN_NO_MAIN
#include "bench_attn.cu"

#include "dsgap_kernels_dev.h"

int main(int argc, char **argv)
{
	Bench B;
	bool dense_only = false;
	int na = 0;
	for (int i = 0; i < argc; i++) /* --dense is this program's own; the rest go to bench_setup */
		if (!strcmp(argv[i], "--dense"))
			dense_only = true;
		else
			argv[na++] = argv[i];
	const int rc = bench_setup(na, argv, "dsgap-bench-kernels-dev", B);
	if (rc)
		return rc;
	B.quick |= dense_only;
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
	if (dense_only) {
		bench_free(B);
		return 0;
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
	{ /* the DiT's call: head h's arrays from G at h, its residual, output (n, heads * d) bf16 */
		const int ng = G.ngroups;
		std::vector<dg_sparse_head> tab(heads);
		for (int h = 0; h < heads; h++) {
			tab[h] = dg_sparse_head{};
			tab[h].perm = G.perm + (size_t)h * n;
			tab[h].goff = G.goff + (size_t)h * (ng + 1);
			tab[h].soff = G.soff + (size_t)h * (ng + 1);
			tab[h].sidx = G.sidx;
			tab[h].residual = B.res + (size_t)h * n * d;
			tab[h].residual_dtype = DG_RES_F32;
		}
		for (int ver = 1; dg_sparse_fwd_name(ver); ver++) {
			const double t = time_ms([&] {
				return dg_sparse_fwd_heads_v(ver, B.q, B.k, B.v, heads, n, d, tab.data(), ng, B.ob, heads * d, 0,
							     NULL);
			});
			snprintf(name, sizeof name, "sparse_heads_over_dense_v%d@0.15", ver);
			emit(name, B.t_dense / t, "x");
		}
	}
	for (int ver : {11, 16, 18}) {
		unsigned long long c[3 * DG_SPARSE_PROBE_PHASES];
		if (dg_sparse_probe_read(c)) /* zeroes the counters */
			return 1;
		time_ms([&] {
			return dg_sparse_fwd_v(ver, B.q, B.k, B.v, heads, n, d, G.perm, G.goff, G.ngroups, G.soff, G.sidx, B.res,
					       B.lse, B.o, NULL, 0, NULL);
		});
		if (dg_sparse_probe_read(c))
			return 1;
		double tot[2] = {0, 0};
		for (int k = 0; k < DG_SPARSE_PROBE_PHASES; k++) {
			tot[0] += (double)c[k];
			tot[1] += (double)c[DG_SPARSE_PROBE_PHASES + k] + (double)c[2 * DG_SPARSE_PROBE_PHASES + k];
		}
		for (int w = 0; w < 2; w++)
			for (int k = 0; k < DG_SPARSE_PROBE_PHASES; k++) {
				const double v = w == 0 ? (double)c[k]
							: (double)c[DG_SPARSE_PROBE_PHASES + k] + (double)c[2 * DG_SPARSE_PROBE_PHASES + k];
				if (v == 0)
					continue; /* a phase this warpgroup has no lap for */
				snprintf(name, sizeof name, "probe_v%d_%s_%s@0.15", ver, w ? "consumers" : "producer",
					 dg_sparse_probe_phase(k));
				emit(name, tot[w] > 0 ? v / tot[w] : 0, "share");
			}
	}
	G.free_all();
	bench_free(B);
	return 0;
}

/*
 * generate.c: one closed-loop run under a policy and its fidelity summary (generate.h).
 *   used by dsgap generate (cmd_generate.c) and dsgap run's closed-loop cells (batch_closed.c)
 */
#include "loop/generate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dit/fidelity.h"
#include "dit/memplan.h"
#include "util/util.h"

int dg_generate_run(dg_dit_sample_opts *so, const int grid[3], const dg_policy *p, double rho,
		    const dg_schedule *sched, bool offload, bool quiet, float *out, dg_generate_stats *st)
{
	const dg_wan_config *cf = &so->model->cfg;
	/* the memory plan first: printed, and a run that cannot fit the device refused up front */
	bool gpu = !strcmp(so->model->ops->name, "gpu");
	int passes = so->guidance != 1 ? 2 : 1;
	dg_memplan plan;
	dg_memplan_make(&plan, cf, grid, p, rho, sched, passes, gpu, offload);
	if (!quiet)
		dg_memplan_print(&plan, stderr);
	if (dg_memplan_check(&plan, cf, grid, sched, dg_memplan_limit(gpu), dg_memplan_host_limit()))
		return -1;
	dg_dit_attn *attn = dg_dit_attn_new(so->model->ops, p, rho, sched, grid, cf->num_layers,
					    cf->num_heads, dg_wan_head_dim(cf), passes);
	if (!attn)
		return -1;
	dg_dit_attn_set_offload(attn, offload, !quiet, plan.host_pinned);
	char label[200];
	snprintf(label, sizeof label, p->dense ? "generate %s" : "generate %s@%g", p->name, rho);
	so->attn = attn;
	so->label = quiet ? NULL : label;
	int rc = dg_dit_sample(so, out, &st->ss);
	dg_dit_attn_get_stats(attn, &st->as);
	dg_dit_attn_free(attn);
	const dg_offload_stats *os = &st->as.offload;
	if (!quiet && os->up_bytes + os->down_bytes > 0)
		fprintf(stderr, "cache offload, %s: %.2f GB up, %.2f GB written back, copy %.2f s, exposed wait %.3f s "
			"(%.1f%% of the copy time hidden), pinning %.2f s exposed (%.1f GB pinned ahead in %.1f s beside "
			"the loop)\n", label, os->up_bytes / 1e9, os->down_bytes / 1e9, os->copy_s, os->wait_s,
			os->copy_s > 0 ? 100 * (1 - os->wait_s / os->copy_s) : 100.0, os->pin_s, os->pin_ahead_bytes / 1e9,
			os->pin_ahead_s);
	so->attn = NULL;
	so->label = NULL;
	st->density = st->as.full_pairs > 0 ? st->as.pairs / st->as.full_pairs : 1;
	return rc;
}

void dg_fidelity_summarise(const float *ref, const float *x, int C, int F, int H, int W,
			   dg_fidelity_summary *s)
{
	double *ps = dg_malloc((size_t)F * sizeof(double)), *ss = dg_malloc((size_t)F * sizeof(double));
	dg_frames_fidelity(ref, x, C, F, H, W, ps, ss);
	s->psnr = s->ssim = 0;
	s->psnr_min = s->ssim_min = INFINITY;
	for (int f = 0; f < F; f++) {
		s->psnr += ps[f] / F;
		s->ssim += ss[f] / F;
		s->psnr_min = fmin(s->psnr_min, ps[f]);
		s->ssim_min = fmin(s->ssim_min, ss[f]);
	}
	free(ps);
	free(ss);
}

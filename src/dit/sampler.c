/*
 * sampler.c: flow-matching Euler and UniPC (bh2, order 2) over fp32 latents, scalars in fp64
 * (sampler.h; the UniPC algebra follows FlowUniPCMultistepScheduler: predict_x0, solver_type bh2,
 * lower_order_final, final sigma 0).
 */
#include "dit/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static const char *names[DG_SAMPLER_COUNT] = { "unipc", "euler" };

const char *dg_sampler_name(dg_sampler_kind k)
{
	DG_ASSERT(k >= 0 && k < DG_SAMPLER_COUNT);
	return names[k];
}

int dg_sampler_parse(const char *s, dg_sampler_kind *k)
{
	for (int i = 0; i < DG_SAMPLER_COUNT; i++)
		if (!strcmp(s, names[i])) {
			*k = (dg_sampler_kind)i;
			return 0;
		}
	return -1;
}

void dg_flow_schedule(int steps, double shift, double *sigmas, double *timesteps)
{
	const double smax = (double)0.999f; /* float32 in the original, then .item() */
	double step = (0.0 - smax) / steps;  /* numpy linspace(smax, 0, steps + 1)[:-1] */
	for (int i = 0; i < steps; i++) {
		double s = i * step + smax;
		double sig = shift * s / (1 + (shift - 1) * s);
		timesteps[i] = (double)(long long)(sig * 1000); /* int64: truncation */
		sigmas[i] = (double)(float)sig;                 /* the scheduler keeps float32 sigmas */
	}
	sigmas[steps] = 0;
}

struct dg_sampler {
	dg_sampler_kind kind;
	int steps;
	size_t n;
	double *sigma, *t;
	float *m_prev, *m_cur; /* x0 predictions of the previous and the current step */
	float *last;           /* the sample before the last predictor */
	int last_order, lower_order_nums;
};

dg_sampler *dg_sampler_new(dg_sampler_kind kind, int steps, double shift, size_t n)
{
	DG_ASSERT(steps >= 1 && shift > 0);
	dg_sampler *s = dg_calloc(1, sizeof *s);
	s->kind = kind;
	s->steps = steps;
	s->n = n;
	s->sigma = dg_malloc((size_t)(steps + 1) * sizeof(double));
	s->t = dg_malloc((size_t)steps * sizeof(double));
	dg_flow_schedule(steps, shift, s->sigma, s->t);
	if (kind == DG_SAMPLER_UNIPC) {
		s->m_prev = dg_malloc(n * sizeof(float));
		s->m_cur = dg_malloc(n * sizeof(float));
		s->last = dg_malloc(n * sizeof(float));
	}
	return s;
}

void dg_sampler_free(dg_sampler *s)
{
	if (!s)
		return;
	free(s->sigma), free(s->t), free(s->m_prev), free(s->m_cur), free(s->last);
	free(s);
}

int dg_sampler_steps(const dg_sampler *s) { return s->steps; }

double dg_sampler_sigma(const dg_sampler *s, int i)
{
	DG_ASSERT(i >= 0 && i <= s->steps);
	return s->sigma[i];
}

double dg_sampler_timestep(const dg_sampler *s, int i)
{
	DG_ASSERT(i >= 0 && i < s->steps);
	return s->t[i];
}

static double lambda(double sigma) { return log(1 - sigma) - log(sigma); }

/* UniC: correct x (the predictor's result for step i) with this step's x0 prediction m. */
static void corrector(dg_sampler *s, int i, const float *m, float *x)
{
	double st = s->sigma[i], s0 = s->sigma[i - 1], at = 1 - st;
	double h = lambda(st) - lambda(s0), hh = -h, hphi1 = expm1(hh), Bh = expm1(hh);
	const float *m0 = s->m_cur, *m1 = s->m_prev; /* m_{i-1}, m_{i-2} */
	double a = st / s0, b = -at * hphi1, r0 = 0, r1 = 0.5, rk = 1;
	if (s->last_order == 2) {
		rk = (lambda(s->sigma[i - 2]) - lambda(s0)) / h;
		double hk = hphi1 / hh - 1, b0 = hk / Bh;
		hk = hk / hh - 0.5;
		double b1 = hk * 2 / Bh;
		r0 = (b0 - b1) / (1 - rk); /* R = [[1, 1], [rk, 1]], R rho = b */
		r1 = b0 - r0;
	}
	double c0 = -at * Bh * r0 / rk, c1 = -at * Bh * r1;
	for (size_t e = 0; e < s->n; e++) {
		double d1 = s->last_order == 2 ? (double)m1[e] - m0[e] : 0;
		x[e] = (float)(a * s->last[e] + b * m0[e] + c0 * d1 + c1 * ((double)m[e] - m0[e]));
	}
}

/* UniP: x (n) at step i -> step i+1, with m_cur = m_i and m_prev = m_{i-1} */
static void predictor(dg_sampler *s, int i, int order, float *x)
{
	double st = s->sigma[i + 1], s0 = s->sigma[i];
	const float *m0 = s->m_cur, *m1 = s->m_prev;
	if (st == 0) { /* the last step: lambda = inf, h_phi_1 = -1: x0 itself */
		memcpy(x, m0, s->n * sizeof(float));
		return;
	}
	double at = 1 - st, h = lambda(st) - lambda(s0), hh = -h, hphi1 = expm1(hh), Bh = expm1(hh);
	double a = st / s0, b = -at * hphi1, c = 0;
	if (order == 2) {
		double rk = (lambda(s->sigma[i - 1]) - lambda(s0)) / h;
		c = -at * Bh * 0.5 / rk; /* rho_p = 0.5, D1 = (m_{i-1} - m_i) / rk */
	}
	for (size_t e = 0; e < s->n; e++)
		x[e] = (float)(a * x[e] + b * m0[e] + (order == 2 ? c * ((double)m1[e] - m0[e]) : 0));
}

void dg_sampler_step(dg_sampler *s, int i, const float *v, float *x)
{
	DG_ASSERT(i >= 0 && i < s->steps);
	if (s->kind == DG_SAMPLER_EULER) {
		float dt = (float)(s->sigma[i + 1] - s->sigma[i]);
		for (size_t e = 0; e < s->n; e++)
			x[e] += dt * v[e];
		return;
	}
	float sig = (float)s->sigma[i];
	float *m = dg_malloc(s->n * sizeof(float));
	for (size_t e = 0; e < s->n; e++)
		m[e] = x[e] - sig * v[e];
	if (i > 0)
		corrector(s, i, m, x);
	float *t = s->m_prev; /* history: m_{i-1} <- m_i's slot */
	s->m_prev = s->m_cur;
	s->m_cur = t;
	memcpy(s->m_cur, m, s->n * sizeof(float));
	free(m);
	int order = s->steps - i < 2 ? s->steps - i : 2;
	if (order > s->lower_order_nums + 1)
		order = s->lower_order_nums + 1;
	memcpy(s->last, x, s->n * sizeof(float));
	predictor(s, i, order, x);
	s->last_order = order;
	if (s->lower_order_nums < 2)
		s->lower_order_nums++;
}

void dg_cfg_combine(float *cond, const float *uncond, double g, size_t n)
{
	float gf = (float)g;
	for (size_t e = 0; e < n; e++)
		cond[e] = uncond[e] + gf * (cond[e] - uncond[e]);
}

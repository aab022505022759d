/*
 * memplan.c: the memory plan of a closed-loop run (memplan.h).
 */
#include "dit/memplan.h"

#include <stdlib.h>
#include <string.h>

#include "policy/cache_store.h"
#include "policy/peers.h"
#include "policy/select.h"
#include "util/util.h"

#ifdef DG_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define GB 1e9

double dg_memplan_params(const dg_wan_config *c, bool gpu, double *bytes)
{
	double D = c->dim, F = c->ffn_dim, P = (double)c->patch[0] * c->patch[1] * c->patch[2];
	double lin = 0, vec = 0, head = 0; /* bf16 linear weights; fp32 vectors; the fp32 head */
	lin += D * c->in_dim * P, vec += D;                    /* patch embedding */
	lin += c->text_dim * D + D * D, vec += 2 * D;          /* text embedding */
	lin += c->freq_dim * D + D * D, vec += 2 * D;          /* time embedding */
	lin += D * 6 * D, vec += 6 * D;                        /* time projection */
	double block_lin = 8 * D * D + 2 * D * F;              /* self q k v o, cross q k v o, FFN */
	double block_vec = 6 * D + 8 * D + F + D + (c->qk_norm ? 4 * D : 0) + (c->cross_attn_norm ? 2 * D : 0);
	lin += c->num_layers * block_lin, vec += c->num_layers * block_vec;
	head = c->out_dim * P * D + c->out_dim * P, vec += 2 * D;
	if (bytes)
		*bytes = gpu ? 2 * lin + 4 * (vec + head) : 4 * (lin + vec + head);
	return lin + vec + head;
}

int dg_memplan_arch(const char *name, dg_wan_config *c)
{
	dg_wan_config_default(c);
	if (!strcmp(name, "wan2.1-1.3b")) {
		c->dim = 1536, c->ffn_dim = 8960, c->num_heads = 12, c->num_layers = 30;
	} else if (!strcmp(name, "wan2.1-14b")) {
		c->dim = 5120, c->ffn_dim = 13824, c->num_heads = 40, c->num_layers = 40;
	} else
		return -1;
	c->freq_dim = 256, c->text_dim = 4096, c->in_dim = 16, c->out_dim = 16, c->text_len = 512;
	c->patch[0] = 1, c->patch[1] = 2, c->patch[2] = 2;
	c->qk_norm = true, c->cross_attn_norm = true;
	return 0;
}

void dg_memplan_make(dg_memplan *m, const dg_wan_config *c, const int grid[3], const dg_policy *p,
		     double rho, const dg_schedule *s, int passes, bool gpu, bool offload)
{
	memset(m, 0, sizeof *m);
	int n = grid[0] * grid[1] * grid[2], d = c->dim / c->num_heads;
	m->n = n, m->d = d, m->heads = c->num_heads, m->layers = c->num_layers, m->passes = passes;
	m->gpu = gpu, m->rho = rho;
	m->offload = offload && gpu; /* the CPU's caches are host memory already */
	m->policy = *p;
	dg_memplan_params(c, gpu, &m->weights);
	int text = c->text_len > 0 ? c->text_len : 512;
	m->activations = (double)n * (40.0 * c->dim + 2.0 * c->ffn_dim) +
			 (double)passes * c->num_layers * text * c->dim * 2 * 2;
	m->context = gpu ? 0.6 * GB : 0;
	if (p->dense)
		goto sum;
	m->cached_layers = c->num_layers;
	for (int l = 0; s && l < c->num_layers; l++)
		m->cached_layers -= dg_schedule_dense_layer(s, l);
	const bool window = p->mask == DG_MASK_WINDOW; /* DiTFastAttn: a list per query */
	m->ngroups = p->group == DG_GROUP_QUERY || window ? n : (n + 127) / 128;
	bool bounded = p->budget == DG_BUDGET_TOPK && p->mask == DG_MASK_NONE;
	int k = bounded ? dg_topk_count(rho, n) : n;
	if (p->sink_hi > p->sink_lo)
		k += p->sink_hi - p->sink_lo;
	m->keys_per_group = k < n ? k : n;
	if (p->residual == DG_RESIDUAL_CACHED)
		m->residual_unit = (double)dg_residual_bytes(p->residual_dtype, n, d);
	double offsets = (m->ngroups + 1.0) * 8;
	if (window) { /* its lists exactly (self-attention: no text prefix); the GPU's: one copy for all */
		const dg_budget b = { .rho = rho };
		const int64_t keys = dg_peer_window_keys(n, 0, dg_peer_window_width(p, &b, n, 0));
		m->keys_per_group = (int)((keys + n - 1) / n);
		m->keys_unit = (double)keys * 4 + offsets;
		m->keys_shared = gpu;
	} else if (p->keys == DG_KEYS_BITMAP) {
		m->keys_unit = (double)m->ngroups * dg_bitmap_words(n) * 4 + offsets;
	} else {
		m->keys_unit = (double)m->ngroups * m->keys_per_group * 4 + offsets;
	}
	m->groups_unit = (double)n * 4 + (m->ngroups + 1.0) * 4;
	double units = (double)passes * m->cached_layers * m->heads;
	double meta_units = p->cfg_meta == DG_CFG_META_SHARED ? units / passes : units;
	m->residual = units * m->residual_unit;
	m->keys = m->keys_shared ? m->keys_unit : meta_units * m->keys_unit;
	m->groups = meta_units * m->groups_unit;
	m->caches = m->residual + m->keys + m->groups;
	/* O, LSE, exact scores (not the window's); keys=bitmap: a site's lists decoded (one slot per head, the GPU's batched
	 * launch); a residual stored other than fp32: on the GPU its fp32 R before encoding (the same
	 * bytes as the CPU's, backend_gpu.c and kernels/cache_store.cu) */
	m->scratch = 3.0 * n * d * 4 + 2.0 * n * 4 + (window ? 0 : (double)m->ngroups * n * 4) + /* no scores */
		     (p->keys == DG_KEYS_BITMAP ? (double)m->heads * m->ngroups * m->keys_per_group * 4 : 0) +
		     (gpu && p->residual == DG_RESIDUAL_CACHED && p->residual_dtype != DG_RESDTYPE_FP32 ? (double)n * d * 4
												     : 0);
	if (m->offload) {
		m->host_pinned = m->residual + (m->keys_shared ? 0 : m->keys); /* shared lists stay */
		m->device_caches = m->groups + (m->keys_shared ? m->keys : 0) +
				   (m->cached_layers ? 2 * m->host_pinned / m->cached_layers : 0);
		m->copy_per_step = m->host_pinned; /* each layer's caches up once a step */
	} else {
		m->device_caches = m->caches;
	}
sum:
	m->total = m->weights + m->activations + m->scratch + m->context + (p->dense ? 0 : m->device_caches);
}

void dg_memplan_print(const dg_memplan *m, FILE *f)
{
	const dg_policy *p = &m->policy;
	fprintf(f, "memory plan: %s%s at rho %g, %d tokens, %d layers x %d heads of %d, %d pass%s, %s%s\n",
		p->dense ? "dense" : p->name, "", m->rho, m->n, m->layers, m->heads, m->d, m->passes,
		m->passes > 1 ? "es (CFG)" : "", m->gpu ? "GPU" : "CPU", m->offload ? ", caches offloaded" : "");
	fprintf(f, "  %-34s %10s  %s\n", "item", "GB", "detail");
	fprintf(f, "  %-34s %10.2f  %s\n", "weights", m->weights / GB, m->gpu ? "bf16 (head, norms fp32)" : "fp32");
	fprintf(f, "  %-34s %10.2f  %s\n", "activations (estimate)", m->activations / GB,
		"40 dim + 2 ffn bytes a token; cross-attention K/V");
	fprintf(f, "  %-34s %10.2f  %s\n", "CUDA context, cuBLASLt", m->context / GB, "");
	if (!p->dense) {
		char unit[160];
		fprintf(f, "  %-34s %10.2f  %s\n", "policy scratch (one unit/site)", m->scratch / GB,
			p->keys == DG_KEYS_BITMAP ? "O, LSE, exact scores; a site's lists decoded" : "O, LSE, exact scores");
		snprintf(unit, sizeof unit, "%.2f MB x %d passes x %d layers x %d heads",
			 m->residual_unit / 1e6, m->passes, m->cached_layers, m->heads);
		fprintf(f, "  %-34s %10.2f  %s\n", m->residual_unit ? (p->residual_dtype == DG_RESDTYPE_FP32 ? "residuals fp32" :
			p->residual_dtype == DG_RESDTYPE_BF16 ? "residuals bf16" : "residuals fp8 e4m3 + row scales") :
			"residuals (none)", m->residual / GB, m->residual_unit ? unit : "");
		int sh = p->cfg_meta == DG_CFG_META_SHARED ? 1 : m->passes;
		if (m->keys_shared)
			snprintf(unit, sizeof unit, "%.2f MB once: one list per query, shared by every pass, layer "
				 "and head", m->keys_unit / 1e6);
		else
			snprintf(unit, sizeof unit, "%.2f MB x %d pass%s x %d layers x %d heads; %d groups x %s",
				 m->keys_unit / 1e6, sh, sh > 1 ? "es" : "", m->cached_layers, m->heads, m->ngroups,
				 p->keys == DG_KEYS_BITMAP ? "bitmap" : "K int32");
		char kl[64];
		if (p->mask == DG_MASK_WINDOW)
			snprintf(kl, sizeof kl, "key lists int32 (window, K ~ %d)", m->keys_per_group);
		else if (p->keys == DG_KEYS_BITMAP)
			snprintf(kl, sizeof kl, "key lists bitmap");
		else
			snprintf(kl, sizeof kl, "key lists int32 (K = %d)", m->keys_per_group);
		fprintf(f, "  %-34s %10.2f  %s\n", kl, m->keys / GB, unit);
		fprintf(f, "  %-34s %10.2f  %s\n", "groupings", m->groups / GB,
			p->cfg_meta == DG_CFG_META_SHARED ? "shared by the CFG passes" : "permutation + offsets");
		if (m->offload)
			fprintf(f, "  %-34s %10.2f  pinned host %.2f GB; %.2f GB up a step (%.2f s at 50 GB/s)\n",
				"offload: caches on the device", m->device_caches / GB, m->host_pinned / GB,
				m->copy_per_step / GB, m->copy_per_step / 50e9);
	}
	fprintf(f, "  %-34s %10.2f  (%.2f GiB)\n", "total on the device", m->total / GB, m->total / 1073741824.0);
}

int dg_memplan_check(const dg_memplan *m, const dg_wan_config *c, const int grid[3], const dg_schedule *s,
		     double limit, double host_limit)
{
	char need[32], has[32], alone[32];
	if (m->offload && host_limit > 0 && m->host_pinned > host_limit)
		return dg_error("memory plan: %s at rho %g with --cache-offload needs %s of pinned host memory, "
				"and the host has %s available", m->policy.name, m->rho,
				dg_bytes_str(m->host_pinned, need, sizeof need), dg_bytes_str(host_limit, has, sizeof has));
	if (!(limit > 0) || m->total <= limit)
		return 0;
	/* the switches in order of what they cost in fidelity: none (bitmap), then the residual's
	 * precision, the shared metadata, fp8, and last the copies of offloading */
	static const char *const steps[] = { "keys=bitmap", "residual_dtype=bf16", "cfg_meta=shared",
					     "residual_dtype=fp8", NULL };
	dg_policy p = m->policy;
	char spec[DG_POLICY_NAME_MAX * 2], found[DG_POLICY_NAME_MAX * 3];
	snprintf(spec, sizeof spec, "%s", p.name);
	const char *fits = NULL;
	dg_memplan t;
	for (int i = 0; !p.dense && i <= 5 && !fits; i++) {
		bool offload = m->offload || i == 5;
		if (i < 4) {
			bool applies = i == 0 ? p.kv == DG_KV_TOKEN && !dg_policy_is_peer(&p) && p.group != DG_GROUP_QUERY &&
						  p.keys != DG_KEYS_BITMAP
				     : i == 1 ? p.residual == DG_RESIDUAL_CACHED && p.residual_dtype == DG_RESDTYPE_FP32
				     : i == 2 ? p.refresh == DG_REFRESH_ANCHOR && m->passes > 1 &&
							p.cfg_meta != DG_CFG_META_SHARED && !dg_policy_is_peer(&p)
						  : p.residual == DG_RESIDUAL_CACHED && p.residual_dtype != DG_RESDTYPE_FP8;
			if (!applies)
				continue;
			size_t len = strlen(spec);
			snprintf(spec + len, sizeof spec - len, "/%s", steps[i]);
			p.keys = i == 0 ? DG_KEYS_BITMAP : p.keys;
			p.residual_dtype = i == 1 ? DG_RESDTYPE_BF16 : i == 3 ? DG_RESDTYPE_FP8 : p.residual_dtype;
			p.cfg_meta = i == 2 ? DG_CFG_META_SHARED : p.cfg_meta;
		}
		snprintf(p.name, sizeof p.name, "%.*s", (int)sizeof p.name - 1, spec);
		dg_memplan_make(&t, c, grid, &p, m->rho, s, m->passes, m->gpu, offload);
		if (t.total <= limit) {
			snprintf(found, sizeof found, "%s%s", spec, offload ? " with --cache-offload" : "");
			fits = found;
		}
	}
	dg_bytes_str(m->total, need, sizeof need);
	dg_bytes_str(limit, has, sizeof has);
	if (fits)
		return dg_error("memory plan: %s at rho %g needs %s on the device, which has %s: it would fit as %s "
				"(%s)", m->policy.name, m->rho, need, has, fits,
				dg_bytes_str(t.total, alone, sizeof alone));
	return dg_error("memory plan: %s at rho %g needs %s on the device, which has %s, and no storage switch "
			"makes it fit (weights and activations alone: %s)", m->policy.name, m->rho, need, has,
			dg_bytes_str(m->weights + m->activations + m->context, alone, sizeof alone));
}

double dg_memplan_limit(bool gpu)
{
	const char *lim = getenv("DSGAP_MEM_LIMIT_GIB");
	return lim && *lim ? atof(lim) * 1073741824.0 : gpu ? dg_memplan_device_bytes() : 0;
}

double dg_memplan_host_limit(void)
{
	const char *lim = getenv("DSGAP_HOST_LIMIT_GIB");
	if (lim && *lim)
		return atof(lim) * 1073741824.0;
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	double kb = 0;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

double dg_memplan_device_bytes(void)
{
#ifdef DG_HAVE_CUDA
	size_t fr = 0, total = 0;
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1 || cudaMemGetInfo(&fr, &total) != cudaSuccess)
		return 0;
	return (double)total;
#else
	return 0;
#endif
}

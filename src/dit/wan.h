/*
 * wan.h: the Wan2.1 text-to-video transformer (../shared/reference/dit-architectures.md §1, §5):
 * configuration, weights loaded from safetensors (both key layouts), prompt contexts and one forward.
 *
 *   dg_wan_model *m;
 *   dg_wan_load(&m, "path/to/model_dir_or_file", "cpu");
 *   dg_wan_context *c;  dg_wan_context_new(m, text, tokens, &c);      text (tokens, text_dim)
 *   dg_wan_forward(m, x, latent, c, &call, v);   x (in_dim, F, H, W) -> v (out_dim, F, H, W)
 *
 * Files (one concern each): wan_config.c (config.json, inference from shapes, checks),
 * wan_load.c (checkpoint layouts and loading), wan_forward.c (context + forward), wan_ops*.{h,c}
 * (the op table: where the arithmetic happens), dit_attn.{h,c} (the self-attention entry point).
 * Precision on the CPU: fp32 weights (converted from F32/BF16/F16 at load) and activations; the
 * sinusoid and the RoPE tables in fp64, then fp32. On the GPU (wan_ops_gpu.c): bf16 weights and
 * GEMM/attention operands, fp32 accumulation, norms, modulation and residual stream.
 */
#ifndef DG_WAN_H
#define DG_WAN_H

#include <stdbool.h>
#include <stddef.h>

#include "dit/wan_ops.h"

struct dg_dit_attn;

/* ---------------------------------------------------------------------------------------------- */
/* configuration                                                                                   */

typedef struct {
	int dim, ffn_dim, freq_dim, text_dim, in_dim, out_dim, num_heads, num_layers;
	int text_len;        /* context rows the text is zero-padded to (Wan: 512); 0 = no padding */
	int patch[3];        /* (t, h, w) */
	double eps;          /* every LayerNorm and RMSNorm */
	bool qk_norm;        /* RMSNorm over the full width on q and k */
	bool cross_attn_norm;/* affine LayerNorm before cross-attention (original norm3) */
	double rope_theta;   /* 10000 */
	int rope_max;        /* positions per axis (1024) */
} dg_wan_config;

/* The Wan2.1 defaults (1.3B sizes); loaders overwrite what the checkpoint says. */
void dg_wan_config_default(dg_wan_config *c);
/* Sanity of a config (positive sizes, dim = heads * head_dim, even head_dim >= 6, ...). */
int dg_wan_config_check(const dg_wan_config *c, const char *label);
int dg_wan_head_dim(const dg_wan_config *c);
/* RoPE dimensions per axis for head_dim d: t = d - 4 (d/6), h = w = 2 (d/6) (sum d; pairs are half). */
void dg_wan_rope_dims(int d, int dims[3]);
/* The config as a JSON object string (new string; for trace and run metadata). */
char *dg_wan_config_json(const dg_wan_config *c);
/*
 * Overlay the fields of a config.json (original WanModel keys or diffusers WanTransformer3DModel
 * keys) onto c. Reports unsupported settings (i2v, windowed attention, per-head qk norm).
 * Returns 0, or -1 after one line naming the file.
 */
int dg_wan_config_read_json(dg_wan_config *c, const char *path);

/* ---------------------------------------------------------------------------------------------- */
/* weights                                                                                         */

typedef enum { DG_WAN_LAYOUT_ORIGINAL, DG_WAN_LAYOUT_DIFFUSERS, DG_WAN_LAYOUT_COUNT } dg_wan_layout;
const char *dg_wan_layout_name(dg_wan_layout l); /* "original", "diffusers" */

struct dg_wan_linear {
	float *w;  /* (out, in) row-major, fp32, host; NULL once a device_weights backend has its copy */
	float *b;  /* (out) or NULL */
	int out, in;
	bool fp32; /* computed in fp32 where the original disables autocast (the head): the GPU keeps fp32
		    * weights and runs an fp32 GEMM on the fp32 input instead of bf16 operands */
	void *dev; /* the backend's own copy (ops->prepare), NULL on the CPU */
};

typedef struct {
	float *modulation;        /* (6, dim): shift, scale, gate of self-attn; shift, scale, gate of FFN */
	dg_wan_linear q, k, v, o; /* self-attention */
	float *norm_q, *norm_k;   /* (dim) RMSNorm weights, NULL without qk_norm; the norm vectors live
	                           * where the ops compute (device buffers of a device_weights backend) */
	float *norm3_w, *norm3_b; /* (dim) cross-attention pre-norm (diffusers norm2), NULL without it */
	dg_wan_linear cq, ck, cv, co;
	float *cnorm_q, *cnorm_k;
	dg_wan_linear ffn1, ffn2; /* (ffn_dim, dim), (dim, ffn_dim) */
} dg_wan_block;

typedef struct dg_wan_workspace dg_wan_workspace;

typedef struct {
	dg_wan_config cfg;
	dg_wan_layout layout;
	char *weights_path; /* the .safetensors file or index that was loaded */
	char *config_path;  /* config.json used, or NULL (inferred from shapes) */
	char *name;         /* short description, e.g. "wan2.1 dim 1536 x 30 layers" */
	long long params;
	int files;          /* safetensors files read (the shards of an index) */
	double load_s;      /* seconds dg_wan_load took (files, conversion, upload) */
	double load_bytes;  /* checkpoint bytes read */
	int bf16_direct;    /* linears whose bf16 weights went to the backend as stored (prepare_bf16) */
	dg_wan_linear patch;        /* (dim, in_dim*pt*ph*pw): the Conv3d as a GEMM, input (c, kt, kh, kw) */
	dg_wan_linear text1, text2; /* text_dim -> dim, GELU(tanh), dim -> dim */
	dg_wan_linear time1, time2; /* freq_dim -> dim, SiLU, dim -> dim */
	dg_wan_linear time_proj;    /* SiLU, dim -> 6 dim */
	dg_wan_block *blocks;       /* (num_layers) */
	float *head_mod;            /* (2, dim): shift, scale (plus e, the time embedding) */
	dg_wan_linear head;         /* (out_dim*pt*ph*pw, dim), output (kt, kh, kw, c) with c fastest */
	dg_wan_ops *ops;
	bool vecs_on_backend;       /* the blocks' norm vectors are buffers of ops (device_weights) */
	dg_wan_workspace *ws;       /* buffers of the last token count */
} dg_wan_model;

/*
 * Load a model from PATH: a directory (config.json + diffusion_pytorch_model.safetensors or its
 * .index.json; a diffusers pipeline directory's transformer/ is used), a .safetensors file or an
 * index. Original and diffusers key names, with or without a "model.diffusion_model." prefix; the
 * config from config.json next to the weights, else inferred from shapes (num_heads = dim/128).
 * Missing, unexpected or misshapen tensors: one line naming the tensor and file. device: "cpu" or
 * "gpu" (the op table of wan_ops_gpu.c; no device or a head_dim other than 64/128: one line).
 */
int dg_wan_load(dg_wan_model **out, const char *path, const char *device);
/* The same with the op table given (the model owns it, also on failure): tests pass a checked
 * stand-in for a device table (tests/dit/wan_ops_checked.c). */
int dg_wan_load_ops(dg_wan_model **out, const char *path, dg_wan_ops *ops);
/* Whether PATH would load: its files, tensor names and shapes and its config, checked as
 * dg_wan_load checks them (the same messages), without reading the weights. 0 or -1. */
int dg_wan_check(const char *path);
/* The same, and *cfg the config it would load with. */
int dg_wan_check_config(const char *path, dg_wan_config *cfg);
void dg_wan_free(dg_wan_model *m);

/* ---------------------------------------------------------------------------------------------- */
/* forward                                                                                         */

/* One prompt, cached: the text MLP output and every block's cross-attention K and V. */
typedef struct {
	int tokens;  /* rows after padding */
	float **k, **v; /* per block (heads, tokens, head_dim), backend buffers */
} dg_wan_context;

/* text (tokens, text_dim), zero-padded to cfg.text_len rows (tokens > text_len is an error). */
int dg_wan_context_new(dg_wan_model *m, const float *text, int tokens, dg_wan_context **out);
void dg_wan_context_free(dg_wan_model *m, dg_wan_context *c);

typedef struct {
	int step;       /* denoising step (for the attention site) */
	int pass;       /* 0 conditional, 1 unconditional */
	double sigma;   /* for the attention site */
	struct dg_dit_attn *attn; /* the self-attention entry point; NULL: dense */
	/* CFG: the passes of a step read the same x and t, and the first block's self-attention half
	 * (patch embedding, norm1, q/k/v, attention, output projection, gated add) reads nothing else,
	 * so it is the same in both wherever the entry point gives its site the same output in both
	 * passes (dg_dit_attn_passes_agree): keep_first keeps x after it in the workspace, and
	 * reuse_first, in the next forward (same x and t), starts from there instead of computing it
	 * (the first block's attention site is then not called). The same bits either way. */
	bool keep_first, reuse_first;
	/* after each block: progress (layer), and for tests the residual stream x (tokens, dim) on the host */
	void (*progress)(void *user, int layer);
	void (*hidden)(void *user, int layer, const float *x);
	void *user;
} dg_wan_call;

/*
 * One transformer forward: x (in_dim, F, H, W) latents at timestep t (the model's own scale,
 * 0..1000) -> out (out_dim, F, H, W), the flow velocity. latent = (F, H, W), each a multiple of the
 * patch. Returns 0, or -1 (reported; e.g. an attention hook failed).
 */
int dg_wan_forward(dg_wan_model *m, const float *x, const int latent[3], double t,
		   const dg_wan_context *ctx, const dg_wan_call *call, float *out);

/* Token grid (F/pt, H/ph, W/pw) of a latent size; -1 (reported) when not divisible or too large. */
int dg_wan_grid(const dg_wan_model *m, const int latent[3], int grid[3]);

#endif

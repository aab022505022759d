/*
 * switches.h: the values of a policy's switches (docs/spec.md §3), types only. Their names and the
 * parsing of specs are policy.h's; the named points of this space are presets.h's table. Both
 * include this header, and policy.h includes presets.h: switches <- presets <- policy, no cycle.
 * Every enum's first value is the default a preset row leaves out.
 */
#ifndef DG_SWITCHES_H
#define DG_SWITCHES_H

typedef enum { DG_GROUP_RASTER, DG_GROUP_TILE3D, DG_GROUP_PCA, DG_GROUP_QUERY, DG_GROUP_KMEANS,
	       DG_GROUP_VOXEL, DG_GROUP_COUNT } dg_group_kind;
typedef enum { DG_KV_TOKEN, DG_KV_BLOCK, DG_KV_COUNT } dg_kv_kind;
typedef enum { DG_SCORE_EXACT, DG_SCORE_POOLED, DG_SCORE_ANTIDIAG, DG_SCORE_SPARGE, DG_SCORE_CENTROID,
	       DG_SCORE_RUNMAX,
	       DG_SCORE_COUNT } dg_score_kind;
typedef enum { DG_MASK_NONE, DG_MASK_RADIAL, DG_MASK_STA, DG_MASK_WINDOW, DG_MASK_COUNT } dg_mask_kind;
typedef enum { DG_APPROX_NONE, DG_APPROX_PISA, DG_APPROX_COUNT } dg_approx_kind;
typedef enum { DG_BUDGET_TOPK, DG_BUDGET_TOPP, DG_BUDGET_COUNT } dg_budget_kind;
typedef enum { DG_RESIDUAL_NONE, DG_RESIDUAL_CACHED, DG_RESIDUAL_COUNT } dg_residual_kind;
typedef enum { DG_REFRESH_ANCHOR, DG_REFRESH_STEP, DG_REFRESH_COUNT } dg_refresh_kind;
typedef enum { DG_RESDTYPE_FP32, DG_RESDTYPE_BF16, DG_RESDTYPE_FP8, DG_RESDTYPE_COUNT } dg_resdtype;
typedef enum { DG_KEYS_LIST, DG_KEYS_BITMAP, DG_KEYS_COUNT } dg_keys_kind;
typedef enum { DG_CFG_META_OWN, DG_CFG_META_SHARED, DG_CFG_META_COUNT } dg_cfg_meta;

#endif

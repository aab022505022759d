/*
 * backend_gpu.h: what the GPU backend's files share (backend/ only, CUDA builds): the handles, the
 * backend's state and the functions one file calls in another (prefix gb_). By role:
 *   backend_gpu.c          device memory, phases, loads, the dense and sparse attention, outputs,
 *                          frees and the vtable (dg_backend_gpu; the design: its opening comment)
 *   backend_gpu_select.c   groupings (the PCA ahead on the side stream), scores, selections
 *   backend_gpu_peers.c    the peers' metadata (block peers, window, svg2, static masks), PISA's term
 *   backend_gpu_offload.c  --cache-offload: handles parked in pinned host memory and fetched back
 */
#ifndef DG_BACKEND_GPU_H
#define DG_BACKEND_GPU_H

#ifdef DG_HAVE_CUDA

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "dsgap_kernels.h"
#include "policy/attention.h"
#include "policy/cache_store.h"
#include "policy/groups.h"
#include "util/cuda_check.h"
#include "util/util.h"

/*
 * Handles live on the device. Groupings keep their host offsets too (group sizes count the
 * computed pairs), selections their host offsets once known; everything the kernels read is on the
 * device. ids (unique per backend) key the kept sparse output.
 */
/* --cache-offload (park, fetch): where a cached handle's bytes are */
typedef struct {
	void *host;   /* pinned copy (a slice of the pin pool, or cudaHostAlloc), or NULL: never parked */
	size_t bytes; /* of host */
	size_t cap;   /* of the slice at host (>= bytes); 0: host is its own cudaHostAlloc */
	bool dirty;   /* the device copy changed after host was written */
	bool parked;  /* no device copy: host is the one */
	long seq;     /* the fetch batch that brings the device copy (backend's off.seq numbering) */
} parking;

struct dg_bgroups {
	dg_groups g;         /* host: perm and off (perm only where built on the host) */
	int32_t *perm, *off; /* device */
	int text_groups;     /* joint attention: its first groups are the text queries' (text_groups_of) */
	long id;
};
struct dg_bscores {
	int rows, cols;
	float *s;                /* device (rows, cols) */
	struct dg_bscores *blocks; /* exact token scores: their block sums, made in the same pass */
	int owned;
};
struct dg_bsel {
	int ngroups;
	bool hoff_known; /* hoff filled (else read from off when first needed) */
	int64_t *hoff;   /* host (ngroups+1) */
	int64_t *off;    /* device (ngroups+1) */
	int32_t *idx;    /* device; NULL once compact (keys=bitmap) */
	uint32_t *bits;  /* keys=bitmap: device (ngroups, dg_bitmap_words(n)) after compact, else NULL */
	bool compact;    /* bits is the storage (idx and bits are both NULL while parked) */
	int n;           /* keys the bitmaps cover */
	long id;
	parking pk;      /* of idx or bits */
	struct shared_lists *shared; /* off and idx are its (never parked, compacted or freed here), or NULL */
	long made;       /* > 0: made on side as selection `made` of made_ahead (gb_sel_ready), else on stream */
};
struct dg_bvec {
	void *x;         /* device: dg_res_bytes(t, n, d), stored as t says (cache_store.h); NULL parked */
	dg_resdtype t;
	parking pk;
};

/*
 * --cache-offload's host memory pinned ahead (backend.pin_ahead): chunks of PIN_CHUNK bytes, each
 * malloc'd, its pages touched and registered with CUDA (cudaHostRegister) by PIN_THREADS threads of
 * its own while the caller's dense steps run; park carves its copies out of them in order (slices
 * of freed handles are reused first), waiting for a chunk that is not pinned yet. Under mu.
 */
#define PIN_CHUNK ((size_t)1 << 30)
#define PIN_THREADS 4
typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int device;
	int n;              /* chunks planned (0: no pool) */
	size_t chunk;       /* bytes a chunk */
	char **at;          /* n: chunk i, or NULL while pending or failed */
	signed char *state; /* n: 0 pending, 1 pinned, -1 failed (park pins on its own) */
	int next;           /* the next chunk a thread takes */
	int cur;            /* the chunk park carves from */
	size_t used;        /* of cur */
	bool stop;
	pthread_t th[PIN_THREADS];
	int nth;
	double t0, done_s;  /* start; seconds until the last chunk was pinned */
	size_t pinned;      /* bytes pinned so far */
	void **free_at;     /* slices of freed handles, with their capacities */
	size_t *free_cap;
	int nfree, free_max;
} pin_pool;

#define BATCH_LATER 256 /* frees held back while a batch waits (more: the batch goes first) */
#define OFF_RING 8    /* fetch batches whose events are kept (a later one implies an earlier) */
#define OFF_PAIRS 1024 /* timed event pairs between two reads of the offload's times (~3 a site) */

#define PHASE_MAX 64 /* event pairs recorded between two reads of the phase times */
#define MADE_RING 16 /* selections made on side whose events are kept (a later one implies an earlier) */
#define MASKS_KEPT 4 /* static masks kept on the device (gpu_peer_static) */

/* a static mask's metadata on the device (radial, sta: dg_peer_static_key) */
typedef struct {
	dg_peer_mask_key key;
	dg_groups g;          /* host perm and off */
	int64_t *hoff;        /* host list offsets (ngroups + 1) */
	int32_t *perm, *off;  /* device groups */
	int64_t *soff;        /* device list offsets (ngroups + 1) */
	int32_t *idx;         /* device keys */
} static_mask;

/* DiTFastAttn's window lists on the device (gpu_peer_window): a function of (n, text, w) alone, so
 * one copy serves every selection made from them; freed when the last one is (refs) */
typedef struct shared_lists {
	int n, text, w, refs;
	int64_t *off;         /* device list offsets (n + 1) */
	int32_t *idx;         /* device keys */
	struct shared_lists *next;
} shared_lists;

typedef struct {
	const float *q, *k, *v;  /* host unit (caller's buffers), for the host twins */
	uint16_t *hq;            /* pinned bf16 staging (3, n, d) */
	uint16_t *bq, *bk, *bv;  /* device bf16 (n, d): the unit as loaded by load or load_device */
	const uint16_t *dq, *dk, *dv; /* the loaded unit: bq.. or the caller's bf16 (load_device_bf16) */
	const uint16_t *sq, *sk, *sv; /* or (dq.. NULL) token-major rows ldi apart (load_device_bf16's ldi) */
	int ldi;
	float *o_ref, *lse, *out, *o_sp, *mass; /* device */
	uint16_t *o16;           /* load_device_bf16's output (row stride ldo), or NULL */
	int ldo;
	long batched;            /* the unit whose sparse output waits in the batch */
	struct {                 /* sparse attends of consecutive heads waiting for one launch (flush) */
		int count, ngroups;
		bool precise;
		const uint16_t *q, *k, *v; /* the first head's; head i's are i (n, d) further (ldi: i d) */
		int ldi;                   /* 0, or the token-major inputs' row stride */
		uint16_t *o16;             /* the first head's; head i's columns are i d further */
		int ldo;
		int rcode;                 /* the heads' residual storage (DG_RES_*), -1: no residual */
		const shared_lists *win;   /* DiTFastAttn's window of every head (dg_window_fwd_heads), or NULL */
		dg_sparse_head tab[DG_SPARSE_HEADS_MAX]; /* a window's: the residual alone */
		void *later[BATCH_LATER]; /* device memory freed while the batch waits: after its launch */
		int nlater;
	} batch;
	double *dmet;            /* device (6) */
	float *res_old, *res_new; /* device (n, d) fp32, made when first needed: a stored residual other
				   * than fp32 decoded, and a new one before its encoding */
	int32_t *dec[DG_SPARSE_HEADS_MAX]; /* keys=bitmap: lists decoded for a launch (batch slot i: dec[i]) */
	size_t dec_cap[DG_SPARSE_HEADS_MAX];
	float *h_lse;            /* host copy, for the host twin of the per-query top-p */
	int text;                /* the loaded unit's text prefix (joint attention), from groups or peer */
	bool dense_current;      /* o_ref and lse are the loaded unit's (its dense pass ran) */
	cudaStream_t stream;
	cudaEvent_t ev[2];
	cudaStream_t side;       /* high priority: the PCA groupings ahead */
	cudaEvent_t ev_legacy;   /* recorded on the default stream (the DiT op table's) to order against it */
	cudaEvent_t ev_out;      /* an output_device copy done (stream) */
	cudaEvent_t ev_ahead;    /* the groupings ahead done (side) */
	cudaEvent_t ev_join;     /* svg2's k-means of K done (side): the stream waits before its counts */
	struct {                 /* selections made on side (gpu_peer_blocks): the stream waits at first use */
		cudaEvent_t fork;          /* the stream's work so far (the scores), which side waits for */
		cudaEvent_t ev[MADE_RING]; /* selection seq done: ev[seq % MADE_RING] */
		long seq, waited;          /* the last made; the last the stream waited for */
	} made;
	long unit, next_id;      /* loads so far (every load of Q/K/V bumps it); the next handle id */
	struct {                 /* PCA groupings made ahead on side (prefetch_groups) */
		int count;       /* bg[i] is for the unit loaded from the Q buffer q[i], until loaded */
		const float **q;
		dg_bgroups **bg;
		dg_bgroups *cur; /* the loaded unit's, not yet taken by groups() */
		size_t cap;      /* units the staging below holds */
		uint16_t *hq;    /* pinned (cap, n, d): host Q converted to bf16 */
		uint16_t *dq;    /* device (cap, n, d) bf16 */
	} ahead;
	struct {                 /* o_sp and mass hold the sparse output of (groups, sel) on unit */
		long unit, groups, sel;
		bool timed;
		double seconds;
	} kept;
	bool profiling;          /* phases: events around each primitive */
	int nph;                 /* event pairs pending */
	cudaEvent_t pev[2 * PHASE_MAX];
	dg_phase pph[PHASE_MAX];
	double pacc[DG_PHASE_COUNT];
	static_mask masks[MASKS_KEPT]; /* the last static masks made (first in, first out) */
	int nmasks, next_mask;
	shared_lists *windows;   /* DiTFastAttn's window lists held by selections */
	struct {                 /* --cache-offload (park, fetch), set up by the first call */
		bool on;
		cudaStream_t copy;
		cudaEvent_t main;            /* the compute stream's work so far (park's write-backs wait) */
		cudaEvent_t batch[OFF_RING]; /* fetch batch seq done: batch[seq % OFF_RING] */
		long seq, waited;            /* the last fetch batch; the last one the compute stream waited for */
		int np;                      /* timed pairs pending: copy-stream busy or compute-stream wait */
		cudaEvent_t pev[2 * OFF_PAIRS];
		bool pwait[OFF_PAIRS];
		dg_offload_stats st;
		pin_pool pool;
	} off;
} gpu;

/* backend_gpu.c */
void *gb_dmalloc_on(cudaStream_t st, size_t bytes);
void *gb_dmalloc(gpu *g, size_t bytes);
void gb_dfree(gpu *g, void *p);
void gb_dfree_later(dg_backend *be, void *p);
void gb_phase_begin_on(gpu *g, cudaStream_t st);
void gb_phase_begin(gpu *g);
void gb_phase_end_on(gpu *g, cudaStream_t st, dg_phase ph);
void gb_phase_end(gpu *g, dg_phase ph);
void gb_flush(dg_backend *be);
int gb_res_code(dg_resdtype t);
const int32_t *gb_sel_keys(dg_backend *be, const dg_bsel *csel, int slot);
void gb_ahead_free(dg_backend *be, dg_bgroups *bg);
void gb_out_metrics(dg_backend *be, dg_metrics *m);
void gb_sel_free(dg_backend *be, dg_bsel *s);

/* backend_gpu_select.c */
void gb_groups_upload(gpu *g, dg_bgroups *bg);
void gb_prefetch_groups(dg_backend *be, dg_group_kind kind, int count, const float *const *q,
		const uint16_t *const *q16, bool device);
dg_bgroups *gb_groups(dg_backend *be, dg_group_kind kind, const int grid[3], int text);
dg_bsel *gb_sel_new(gpu *g, int ngroups);
void gb_sel_ready(gpu *g, const dg_bsel *s);
const int64_t *gb_sel_hoff(gpu *g, dg_bsel *s);
void gb_exact(dg_backend *be, dg_bgroups *const *groups, dg_bscores **scores, int nacc,
		const dg_budget *const *qb_in, dg_bsel **qsel, int nq);
dg_bscores *gb_pooled(dg_backend *be, dg_bgroups *bg, dg_kv_kind kv);
dg_bscores *gb_to_blocks(dg_backend *be, const dg_bscores *t);
dg_bscores *gb_vote(dg_backend *be, const dg_bgroups *to, const dg_bgroups *from,
		const dg_bsel *sel, dg_kv_kind kv);
dg_bsel *gb_select(dg_backend *be, const dg_bgroups *bg, const dg_bscores *sc, const dg_budget *b_in);
void gb_sel_lists(dg_backend *be, const dg_bsel *csel, dg_selection *out);

/* backend_gpu_peers.c */
void gb_shared_release(gpu *g, shared_lists *sh);
void gb_static_mask_free(gpu *g, static_mask *m);
int gb_peer(dg_backend *be, const dg_policy *p, const dg_budget *b, const int grid[3], int text,
		dg_peer_state **state, dg_bgroups **groups, dg_bsel **sel);
void gb_approx(dg_backend *be, const dg_bgroups *bg, const dg_bsel *sel, int block, dg_metrics *m);

/* backend_gpu_offload.c */
void gb_off_collect(gpu *g);
void gb_settle(gpu *g, parking *pk);
void gb_unpin(gpu *g, parking *pk);
void gb_fetch(dg_backend *be, int count, dg_bvec *const *vecs, dg_bsel *const *sels);
void gb_vec_resident(dg_backend *be, dg_bvec *v);
void gb_sel_resident(dg_backend *be, dg_bsel *s);
void gb_park(dg_backend *be, int count, dg_bvec *const *vecs, dg_bsel *const *sels);
void gb_offload_stats(dg_backend *be, dg_offload_stats *st);
void gb_pin_ahead(dg_backend *be, double bytes);
void gb_pool_free(gpu *g);

#endif
#endif

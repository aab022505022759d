/*
 * replay_dense.c: the replay's dense attention (the CPU backend's `dense`, what `dsgap replay
 * --policies dense` computes per unit) over every unit of a trace, written as raw float32
 * (steps, layers, heads, tokens, head_dim) to OUT, for tests/py/test_families.py to compare with
 * the model's own attention output.
 *   replay_dense T.h5 OUT.f32
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "policy/attention.h"
#include "trace/trace.h"
#include "util/util.h"

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: replay_dense T.h5 OUT.f32\n");
		return 2;
	}
	dg_attn_init_threads();
	dg_trace t;
	if (dg_trace_open(&t, argv[1]))
		return 1;
	const dg_trace_meta *m = &t.meta;
	size_t n = (size_t)m->tokens * m->head_dim;
	float *q = dg_malloc(n * sizeof(float)), *k = dg_malloc(n * sizeof(float));
	float *v = dg_malloc(n * sizeof(float)), *o = dg_malloc(n * sizeof(float));
	FILE *f = fopen(argv[2], "wb");
	if (!f) {
		perror(argv[2]);
		return 1;
	}
	dg_backend *be = dg_backend_cpu(m->tokens, m->head_dim);
	int rc = 0;
	for (int s = 0; s < m->steps && !rc; s++)
		for (int l = 0; l < m->layers && !rc; l++)
			for (int h = 0; h < m->heads && !rc; h++) {
				if (dg_trace_read(&t, DG_QKV_Q, s, l, h, q) || dg_trace_read(&t, DG_QKV_K, s, l, h, k) ||
				    dg_trace_read(&t, DG_QKV_V, s, l, h, v)) {
					rc = 1;
					break;
				}
				be->load(be, q, k, v);
				be->dense(be);
				be->output(be, true, o);
				if (fwrite(o, sizeof(float), n, f) != n)
					rc = 1;
			}
	be->destroy(be);
	fclose(f);
	dg_trace_close(&t);
	free(q), free(k), free(v), free(o);
	return rc;
}

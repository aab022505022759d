/*
 * trace_chunks.c: the trace writer's chunk pipe (trace_chunks.h): a ring of unit buffers, worker
 * threads that shuffle + deflate them, and in-order writes on the caller's thread.
 */
#include "trace/trace_chunks.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "util/util.h"

#define MAX_WORKERS 8
#define MAX_TAG 64
#define MAX_BUFFER_BYTES (512ull << 20)

enum { FREE, FILLING, QUEUED, RUNNING, DONE };

typedef struct {
	unsigned char *raw; /* (unit_bytes) the unit, 2-byte words */
	unsigned char *z;   /* (zcap) its shuffled, deflated form */
	size_t zlen;
	int state, rc;
	unsigned char tag[MAX_TAG];
} slot;

struct dg_chunk_pipe {
	size_t unit_bytes, zcap;
	dg_chunk_write_fn write;
	void *ctx;
	slot *slots;
	int nslots, head, count; /* the ring: slots[head], ... in submission order, count in use */
	pthread_t workers[MAX_WORKERS];
	int nworkers;
	bool stop, failed;
	pthread_mutex_t mu;
	pthread_cond_t work, done;
};

/* HDF5's shuffle filter for 2-byte elements: every first byte, then every second byte */
static void shuffle2(const unsigned char *in, unsigned char *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		out[i] = in[2 * i];
		out[n + i] = in[2 * i + 1];
	}
}

static void *worker(void *arg)
{
	dg_chunk_pipe *p = arg;
	unsigned char *shuffled = malloc(p->unit_bytes);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		slot *s = NULL;
		for (int i = 0; i < p->count && !s; i++) { /* the oldest queued unit */
			slot *c = &p->slots[(p->head + i) % p->nslots];
			if (c->state == QUEUED)
				s = c;
		}
		if (!s) {
			if (p->stop)
				break;
			pthread_cond_wait(&p->work, &p->mu);
			continue;
		}
		s->state = RUNNING;
		pthread_mutex_unlock(&p->mu);
		int rc = -1;
		uLongf zlen = (uLongf)p->zcap;
		if (shuffled) {
			shuffle2(s->raw, shuffled, p->unit_bytes / 2);
			rc = compress2(s->z, &zlen, shuffled, (uLong)p->unit_bytes, 1) == Z_OK ? 0 : -1;
		}
		pthread_mutex_lock(&p->mu);
		s->zlen = zlen;
		s->rc = rc;
		s->state = DONE;
		pthread_cond_broadcast(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	free(shuffled);
	return NULL;
}

/* Wait for the oldest unit and write it (unless the pipe failed); the mutex is held. */
static void write_head(dg_chunk_pipe *p)
{
	slot *s = &p->slots[p->head];
	while (s->state != DONE)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu); /* write outside the lock: workers go on */
	if (!p->failed) {
		if (s->rc) {
			dg_error("cannot compress a trace chunk (zlib: out of memory)");
			p->failed = true;
		} else if (p->write(p->ctx, s->tag, s->z, s->zlen)) {
			p->failed = true;
		}
	}
	pthread_mutex_lock(&p->mu);
	s->state = FREE;
	p->head = (p->head + 1) % p->nslots;
	p->count--;
}

dg_chunk_pipe *dg_chunk_pipe_new(size_t unit_bytes, dg_chunk_write_fn write, void *ctx)
{
	DG_ASSERT(unit_bytes % 2 == 0);
	dg_chunk_pipe *p = dg_calloc(1, sizeof *p);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int workers = cpus < 1 ? 1 : cpus > MAX_WORKERS ? MAX_WORKERS : (int)cpus;
	p->unit_bytes = unit_bytes;
	p->zcap = compressBound((uLong)unit_bytes);
	p->write = write;
	p->ctx = ctx;
	unsigned long long per = unit_bytes + p->zcap, fit = MAX_BUFFER_BYTES / per;
	p->nslots = 2 * workers;
	if ((unsigned long long)p->nslots > fit)
		p->nslots = fit < 2 ? 2 : (int)fit;
	p->slots = dg_calloc((size_t)p->nslots, sizeof *p->slots);
	for (int i = 0; i < p->nslots; i++) {
		p->slots[i].raw = dg_malloc(unit_bytes);
		p->slots[i].z = dg_malloc(p->zcap);
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	for (int i = 0; i < workers; i++)
		if (pthread_create(&p->workers[p->nworkers], NULL, worker, p) == 0)
			p->nworkers++;
	if (p->nworkers == 0) {
		dg_error("cannot start a thread to compress the trace");
		dg_chunk_pipe_free(p);
		return NULL;
	}
	return p;
}

void *dg_chunk_pipe_slot(dg_chunk_pipe *p)
{
	pthread_mutex_lock(&p->mu);
	while (p->count > 0 && p->slots[p->head].state == DONE) /* write what is ready */
		write_head(p);
	if (p->count == p->nslots)
		write_head(p);
	slot *s = &p->slots[(p->head + p->count) % p->nslots];
	s->state = FILLING;
	pthread_mutex_unlock(&p->mu);
	return s->raw;
}

int dg_chunk_pipe_submit(dg_chunk_pipe *p, const void *tag, size_t tag_bytes)
{
	DG_ASSERT(tag_bytes <= MAX_TAG);
	pthread_mutex_lock(&p->mu);
	slot *s = &p->slots[(p->head + p->count) % p->nslots];
	DG_ASSERT(s->state == FILLING);
	memcpy(s->tag, tag, tag_bytes);
	s->state = QUEUED;
	p->count++;
	pthread_cond_signal(&p->work);
	int rc = p->failed ? -1 : 0;
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int dg_chunk_pipe_drain(dg_chunk_pipe *p)
{
	pthread_mutex_lock(&p->mu);
	while (p->count > 0)
		write_head(p);
	int rc = p->failed ? -1 : 0;
	pthread_mutex_unlock(&p->mu);
	return rc;
}

void dg_chunk_pipe_free(dg_chunk_pipe *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	for (int i = 0; i < p->nslots; i++) /* nothing queued is compressed any more */
		if (p->slots[i].state == QUEUED)
			p->slots[i].state = FREE;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nworkers; i++)
		pthread_join(p->workers[i], NULL);
	for (int i = 0; i < p->nslots; i++)
		free(p->slots[i].raw), free(p->slots[i].z);
	free(p->slots);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	free(p);
}

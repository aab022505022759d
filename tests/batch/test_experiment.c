/*
 * test_experiment.c: experiment files and their grid (experiment.h), without running anything:
 * parsing (repeated keys and continuation lines append; defaults), the grid (runs trace-major,
 * cells in (layer, head) order, ids), shard and worker slices (disjoint, covering, balanced,
 * round-robin), the fingerprint (changes with what decides the rows, not with the output paths),
 * and bad lines: -1 and one message naming FILE:LINE.
 * Run: ctest -R test_experiment
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch/experiment.h"
#include "testhelp.h"
#include "util/util.h"

/* Load text; the error message (if any) goes to err. */
static int load(dg_experiment *e, const char *text, char *err, size_t size)
{
	err[0] = 0;
	fflush(stderr);
	FILE *tmp = tmpfile();
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	int rc = dg_experiment_load_string(e, text, "x.ini", "/tmp");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	if (!fgets(err, (int)size, tmp))
		err[0] = 0;
	err[strcspn(err, "\n")] = 0;
	fclose(tmp);
	return rc;
}

static bool in_list(const int *v, int n, int x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static const char *good =
	"; a comment\n"
	"[experiment]\n"
	"name = grid\n"
	"description = two traces,\n"
	"  three schedules\n"
	"[traces]\n"
	"a = synth: grid=2x4x4 heads=3 layers=2 steps=5 head_dim=32 seed=9\n"
	"b = synth: grid=1x8x8\n"
	"    heads=2 layers=1 steps=6 head_dim=32\n"
	"[policies]\n"
	"list = dense, oracle,\n"
	"  mc-sparse\n"
	"list = factorial\n"
	"[densities]\n"
	"list = 0.1\n"
	"list = 0.2, 0.3\n"
	"[schedules]\n"
	"s1 = warmup=1\n"
	"s2 = warmup=2,\n"
	"     anchors=1;3\n"
	"s3 = dense_layers=0\n"
	"[device]\n"
	"device = cpu\n";

int main(void)
{
	dg_experiment e;
	char err[1024];

	/* --- a good file ------------------------------------------------------------------------ */
	CHECK("good file loads", load(&e, good, err, sizeof err) == 0);
	CHECK("name", !strcmp(e.name, "grid"));
	CHECK("continuation appends to the description", !strcmp(e.description, "two traces, three schedules"));
	CHECK("2 traces, 3 schedules, 6 runs", e.ntraces == 2 && e.nschedules == 3 && e.nruns == 6);
	CHECK("continuation of a synth spec", e.traces[1].so.heads == 2 && e.traces[1].so.steps == 6 &&
						      e.traces[1].so.grid[1] == 8);
	CHECK("canonical synth spec", !strcmp(e.traces[1].spec, "synth: grid=1x8x8 heads=2 layers=1 steps=6 head_dim=32 seed=1"));
	/* dense oracle mc-sparse + factorial (mc-sparse once) = 3 + 7 */
	CHECKF(e.npolicies == 10, "repeated keys and continuations append policies, duplicates once (%d)", e.npolicies);
	CHECK("policy order as written", !strcmp(e.policies[0].name, "dense") && !strcmp(e.policies[2].name, "mc-sparse") &&
						 !strcmp(e.policies[3].name, "baseline"));
	CHECK("3 densities", e.ndensities == 3 && e.densities[2] == 0.3);
	CHECK("schedule continuation joined with a comma", !strcmp(e.schedules[1].spec, "warmup=2,anchors=1;3") &&
								  e.schedules[1].schedule.nanchors == 2);
	CHECK("runs trace-major, named TRACE.SCHEDULE", !strcmp(e.runs[0].name, "a.s1") && !strcmp(e.runs[2].name, "a.s3") &&
							       !strcmp(e.runs[3].name, "b.s1"));
	CHECK("default anchor resolved: the last step before warm-up", e.runs[0].resolved.nanchors == 1 &&
									   e.runs[0].resolved.anchors[0] == 0);
	CHECKF(e.runs[2].resolved.nanchors == 1 && e.runs[2].resolved.anchors[0] == e.traces[0].meta.step_index[0],
	       "no warm-up: the default anchor is the first stored step (%d anchors)", e.runs[2].resolved.nanchors);
	/* cells: a has 2 x 3 clusters, b 1 x 2 -> 3 x 6 + 3 x 2 = 24 */
	CHECKF(e.ncells == 24, "24 cells (%d)", e.ncells);
	CHECK("run a.s2 starts at cell 6 with 6 cells", e.runs[1].first_cell == 6 && e.runs[1].ncells == 6);
	CHECK("cells in (layer, head) order", !strcmp(e.cells[0].id, "l0-h0") && !strcmp(e.cells[1].id, "l0-h1") &&
						     !strcmp(e.cells[3].id, "l1-h0") && e.cells[5].layer == 1 && e.cells[5].head == 2);
	CHECK("cell positions", e.cells[4].l == 1 && e.cells[4].h == 1 && e.cells[4].run == 0 && e.cells[23].run == 5);

	/* --- slices ------------------------------------------------------------------------------ */
	int idx[64], seen[64];
	bool ok_disjoint = true, ok_cover = true, ok_balanced = true, ok_rr = true, ok_workers = true;
	for (int n = 1; n <= 30; n++) {
		memset(seen, 0, sizeof seen);
		int lo = 1 << 30, hi = 0;
		for (int i = 0; i < n; i++) {
			int k = dg_experiment_slice(&e, i, n, 0, 1, idx);
			lo = k < lo ? k : lo;
			hi = k > hi ? k : hi;
			for (int j = 0; j < k; j++) {
				ok_disjoint &= seen[idx[j]] == 0;
				seen[idx[j]]++;
				ok_rr &= idx[j] % n == i && (j == 0 || idx[j] == idx[j - 1] + n);
			}
			/* the workers of a shard split it, disjoint and covering */
			for (int m = 1; m <= 4; m++) {
				int cover[64] = { 0 }, total = 0, w[64];
				for (int wi = 0; wi < m; wi++) {
					int kw = dg_experiment_slice(&e, i, n, wi, m, w);
					total += kw;
					for (int j = 0; j < kw; j++)
						cover[w[j]]++;
				}
				ok_workers &= total == k;
				for (int j = 0; j < k; j++)
					ok_workers &= cover[idx[j]] == 1;
			}
		}
		for (int c = 0; c < e.ncells; c++)
			ok_cover &= seen[c] == 1;
		ok_balanced &= hi - lo <= 1;
	}
	CHECK("shards 1..30: disjoint", ok_disjoint);
	CHECK("shards 1..30: covering", ok_cover);
	CHECK("shards 1..30: sizes differ by at most one", ok_balanced);
	CHECK("shard i/n = cells i, i+n, i+2n, ...", ok_rr);
	CHECK("workers 1..4 split every shard, disjoint and covering", ok_workers);
	int k = dg_experiment_slice(&e, 2, 5, 0, 1, idx);
	CHECK("shard 2/5 of 24 cells: 2 7 12 17 22", k == 5 && idx[0] == 2 && idx[4] == 22);

	/* --- fingerprint --------------------------------------------------------------------------- */
	uint64_t fp = e.fingerprint;
	dg_experiment_set_out(&e, "/tmp/somewhere");
	CHECK("the output folder does not change the fingerprint", e.fingerprint == fp);
	CHECK("synth traces go to OUT/traces/LABEL-HASH.h5", !strncmp(e.traces[0].path, "/tmp/somewhere/traces/a-", 24));
	dg_experiment_set_device(&e, "gpu");
	CHECK("the device changes it", e.fingerprint != fp);
	dg_experiment_set_device(&e, "cpu");
	CHECK("and back", e.fingerprint == fp);
	char *json = dg_experiment_json(&e);
	CHECK("experiment.json has the runs, cells and config text", strstr(json, "\"a.s2\"") && strstr(json, "\"l1-h2\"") &&
									    strstr(json, "three schedules"));
	free(json);
	dg_experiment e2;
	char *text = dg_strdup(good);
	char *p = strstr(text, "description = two");
	memcpy(p, "description = TWO", 17);
	CHECK("a second load", load(&e2, text, err, sizeof err) == 0);
	CHECK("the description does not change the fingerprint", e2.fingerprint == fp);
	dg_experiment_free(&e2);
	p = strstr(text, "list = 0.2, 0.3");
	memcpy(p, "list = 0.2, 0.4", 15);
	CHECK("a third load", load(&e2, text, err, sizeof err) == 0);
	CHECK("a density changes the fingerprint", e2.fingerprint != fp);
	dg_experiment_free(&e2);
	free(text);
	dg_experiment_free(&e);

	/* --- defaults ------------------------------------------------------------------------------ */
	CHECK("minimal file", load(&e, "[traces]\nt = synth:\n", err, sizeof err) == 0);
	CHECK("defaults: replay's policies (ladder, factorial), density 0.15, one schedule 'default', cpu",
	      e.npolicies == 15 && e.ndensities == 1 && e.densities[0] == 0.15 && e.nschedules == 1 &&
		      !strcmp(e.runs[0].name, "t.default") && !strcmp(e.device, "cpu"));
	CHECK("default synth: 4x16x16, 4 heads, 2 layers: 8 cells", e.ncells == 8 && e.traces[0].meta.tokens == 1024);
	CHECK("name from the file name", !strcmp(e.name, "x"));
	dg_experiment_free(&e);

	/* --- bad lines ------------------------------------------------------------------------------ */
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "[traces]\nt = synth:\n[policies]\nlist = nope\n", "x.ini:4: unknown policy 'nope'" },
		{ "[traces]\nt = synth:\n[densities]\nlist = 0.1\nlist = 0\n", "x.ini:5: density 0 is outside (0, 1]" },
		{ "[traces]\nt = synth:\n[schedules]\ns = warmup=1,\n  bogus=2\n", "x.ini:4: schedule 's': unknown key 'bogus'" },
		{ "[traces]\nt = synth: steps=3\n[schedules]\ns = anchors=7\n", "x.ini:4: schedule 's' on trace 't': anchor step 7 is not in the trace" },
		{ "[traces]\nt = synth:\n\n\nnot a pair\n", "x.ini:5: syntax error" },
		{ "[trace]\nt = synth:\n", "x.ini:2: unknown section [trace]" },
		{ "[traces]\nt = synth:\n[output]\ncolour = red\n", "x.ini:4: unknown key 'colour' in [output]" },
		{ "[traces]\nt = synth:\n[experiment]\nname = a b\n", "x.ini:4: bad experiment name 'a b'" },
		{ "[traces]\nt = /no/such/trace.h5\n", "x.ini:2: trace 't': cannot open /no/such/trace.h5" },
		{ "[traces]\nt = synth: grid=1x1x200000\n", "x.ini:2: trace 't': synth: grid 1x1x200000 has 200000 tokens" },
		{ "[traces]\nt = synth:\n[device]\ndevice = cpu\ndevice = gpu\n", "x.ini:5: [device] device is given twice" },
		{ "[traces]\nt = /a\n  /b\n", "x.ini:3: trace 't': a path cannot continue on the next line" },
		{ "", "x.ini: no traces" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = load(&e, bad[i].text, err, sizeof err);
		CHECKF(rc == -1 && strstr(err, bad[i].want) && !strncmp(err, "dsgap: error: x.ini", 19),
		       "bad file %zu: '%s' (got '%.120s')", i, bad[i].want, err);
	}
	/* schedule families: every:N from the default anchor over stored steps that skip some, once, none */
	struct { const char *spec; int steps[8], nsteps; int want[8], nwant; } fam[] = {
		{ "warmup=3,anchors=every:4", { 0, 2, 4, 6, 8, 10 }, 6, { 2, 6, 10 }, 3 },
		{ "warmup=0,anchors=every:3", { 0, 2, 4, 6, 8, 10 }, 6, { 0, 6 }, 2 },
		{ "warmup=5,anchors=once,dense_layers=none", { 0, 2, 4, 6, 8, 10 }, 6, { 4 }, 1 },
		{ "warmup=2,anchors=every:2", { 0, 1, 2, 3, 4, 5, 6 }, 7, { 1, 3, 5 }, 3 },
	};
	for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
		dg_schedule sc;
		bool ok = dg_schedule_parse(fam[i].spec, &sc) == 0 &&
			  dg_schedule_resolve_anchors(&sc, fam[i].steps, fam[i].nsteps) == -1 &&
			  sc.nanchors == fam[i].nwant && sc.ndense_layers == 0;
		for (int a = 0; ok && a < fam[i].nwant; a++)
			ok = sc.anchors[a] == fam[i].want[a] && dg_schedule_is_anchor(&sc, fam[i].want[a]);
		for (int s = 0; ok && s < fam[i].nsteps; s++) /* the rule and the list agree on every step */
			ok = dg_schedule_is_anchor(&sc, fam[i].steps[s]) == in_list(fam[i].want, fam[i].nwant, fam[i].steps[s]);
		CHECKF(ok, "schedule %s over %d stored steps: anchors as listed", fam[i].spec, fam[i].nsteps);
	}
	{ /* the denoising loop: every:10 after warm-up 10 of 50 steps is 9, 19, 29, 39, 49 */
		dg_schedule sc;
		dg_schedule_parse("warmup=10,anchors=every:10", &sc);
		dg_schedule_resolve_anchors(&sc, NULL, 50);
		CHECK("loop: warmup=10,anchors=every:10 of 50 steps -> 9;19;29;39;49",
		      sc.nanchors == 5 && sc.anchors[0] == 9 && sc.anchors[4] == 49 && dg_schedule_is_anchor(&sc, 29) &&
		      !dg_schedule_is_anchor(&sc, 30) && !dg_schedule_is_anchor(&sc, 8));
	}
	char longline[400];
	snprintf(longline, sizeof longline, "[traces]\nt = synth:\n[policies]\nlist = %0230d\n", 0);
	CHECK("a 237-character line: an error, not a silent split",
	      load(&e, longline, err, sizeof err) == -1 && strstr(err, "x.ini:4: line is 237 characters long, at most 197"));
	return test_report();
}

/*
 * cmd_info.c: dsgap info, describe a trace without reading its tensors: shape, model, source,
 * steps, layers, heads, grid, dtype, size on disk and uncompressed.
 *   dsgap info T.h5            one field a line
 *   dsgap info --json T.h5     the same as one JSON object (config parsed when it is JSON)
 *   dsgap info --check T.h5    first read every unit of q, k, v (unreadable chunks, NaN/Inf fail)
 *   dsgap info MODEL           a model folder: its shape, its protocol.json and the class names of
 *                              its conds.safetensors (the --text MODEL/conds.safetensors:NAME names)
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/commands.h"
#include "dit/safetensors.h"
#include "trace/trace.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap info [--json] [--check] T.h5\n"
		   "       dsgap info MODEL\n\n"
		   "Describe a trace: shape, model, source, steps, layers, heads, grid, dtype and size.\n"
		   "Or a model folder (e.g. data/model): its shape, its sampling protocol (protocol.json)\n"
		   "and its class names, the entries of its conds.safetensors (capture and generate take one\n"
		   "as their text: MODEL/conds.safetensors:NAME).\n\n"
		   "      --json      print one JSON object instead of one field a line\n"
		   "      --check     read every unit of q, k, v first: fail on unreadable or non-finite data\n"
		   "  -h, --help      this help\n");
}

/* "1.5 KiB", "17.3 MiB" */
static void human_size(char *buf, size_t size, double bytes)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;
	while (bytes >= 1024 && u < 5)
		bytes /= 1024, u++;
	snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

/* Compact list of ints: runs as "a-b", an arithmetic progression as "a,b,...,z", else "a,b,c". */
static void compact_list(char *buf, size_t size, const int *v, int n)
{
	size_t len = 0;
	buf[0] = 0;
	int d = n >= 4 ? v[1] - v[0] : 0;
	for (int i = 2; i < n && d; i++)
		if (v[i] - v[i - 1] != d)
			d = 0;
	if (d && d != 1) {
		snprintf(buf, size, "%d,%d,...,%d", v[0], v[1], v[n - 1]);
		return;
	}
	for (int i = 0; i < n && len + 1 < size;) {
		int j = i;
		while (j + 1 < n && v[j + 1] == v[j] + 1)
			j++;
		if (j - i >= 2)
			len += snprintf(buf + len, size - len, "%s%d-%d", i ? "," : "", v[i], v[j]);
		else
			len += snprintf(buf + len, size - len, "%s%d", i ? "," : "", v[j = i]);
		i = j + 1;
	}
	if (len + 1 >= size && size > 4)
		strcpy(buf + size - 4, "...");
}

static long long uncompressed_bytes(const dg_trace *t)
{
	const dg_trace_meta *m = &t->meta;
	int elem = strcmp(t->dtype, "f32") ? 2 : 4;
	return (long long)DG_QKV_COUNT * m->steps * m->layers * m->heads * m->tokens * m->head_dim * elem;
}

/* Read every unit: dg_trace_read reports the first unreadable or non-finite one. A check that will
 * take more than a few seconds says so on stderr, with the time it needs, as soon as that is known
 * (then a progress line where stderr is a terminal). */
static int check_units(dg_trace *t)
{
	const dg_trace_meta *m = &t->meta;
	size_t bytes = (size_t)m->tokens * m->head_dim * sizeof(float);
	float *buf = malloc(bytes);
	if (!buf)
		return dg_error("%s: cannot allocate a unit of %d tokens x %d (%zu bytes) to check it", t->path,
				m->tokens, m->head_dim, bytes);
	long long total = (long long)DG_QKV_COUNT * m->steps * m->layers * m->heads, done = 0;
	double start = dg_now();
	bool told = false;
	dg_progress pr = { 0 };
	int rc = 0;
	for (int q = 0; q < DG_QKV_COUNT && !rc; q++)
		for (int s = 0; s < m->steps && !rc; s++)
			for (int l = 0; l < m->layers && !rc; l++)
				for (int h = 0; h < m->heads && !rc; h++) {
					rc = dg_trace_read(t, q, s, l, h, buf);
					done++;
					double el = dg_now() - start, left = el / done * (total - done);
					if (!told && el > 2 && left > 3) {
						char a[32];
						human_size(a, sizeof a, (double)uncompressed_bytes(t));
						fprintf(stderr, "info: %s: checking %lld units of q, k, v (%s uncompressed): about "
							"%.0f s more\n", t->path, total, a, left);
						told = true;
					}
					if (told)
						dg_progress_show(&pr, done == total, "info: checked %lld/%lld units, %.0f s left   ",
								 done, total, left);
				}
	free(buf);
	return rc;
}

/* s on one line: control characters (escape sequences, newlines from an attribute) as \xHH */
static void print_field(const char *name, const char *s)
{
	printf("%-12s ", name);
	for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			printf("\\x%02x", *c);
		else
			putchar(*c);
	putchar('\n');
}

static void print_text(const dg_trace *t, int checked)
{
	const dg_trace_meta *m = &t->meta;
	char list[256], a[32], b[32];
	print_field("trace", t->path);
	printf("shape        [%d, %d, %d, %d, %d]  (steps, layers, heads, tokens, head_dim)\n", m->steps,
	       m->layers, m->heads, m->tokens, m->head_dim);
	print_field("model", m->model);
	print_field("source", m->source);
	print_field("created_by", m->created_by);
	printf("version      %d\n", m->version);
	compact_list(list, sizeof list, m->step_index, m->steps);
	printf("steps        %s  (%d)\n", list, m->steps);
	printf("timestep     %.1f .. %.1f  (sigma %.4f .. %.4f)\n", m->timestep[0], m->timestep[m->steps - 1],
	       m->sigma[0], m->sigma[m->steps - 1]);
	compact_list(list, sizeof list, m->layer_index, m->layers);
	printf("layers       %s  (%d)\n", list, m->layers);
	compact_list(list, sizeof list, m->head_index, m->heads);
	printf("heads        %s  (%d)\n", list, m->heads);
	printf("grid         %dx%dx%d  (frames, height, width)\n", m->grid[0], m->grid[1], m->grid[2]);
	printf("text_tokens  %d\n", m->text_tokens);
	printf("dtype        %s\n", t->dtype);
	human_size(a, sizeof a, (double)t->file_size);
	human_size(b, sizeof b, (double)uncompressed_bytes(t));
	printf("size         %s on disk, %s uncompressed (q, k, v)\n", a, b);
	if (checked)
		printf("checked      %d units of q, k, v: readable and finite\n",
		       DG_QKV_COUNT * m->steps * m->layers * m->heads);
}

/* floats as the shortest decimals that name them, not as the doubles they widen to */
static cJSON *float_array(const float *v, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < n; i++) {
		char s[32];
		snprintf(s, sizeof s, "%.7g", v[i]);
		cJSON_AddItemToArray(a, cJSON_CreateNumber(strtod(s, NULL)));
	}
	return a;
}

static void print_json(const dg_trace *t, int checked)
{
	const dg_trace_meta *m = &t->meta;
	int shape[5] = { m->steps, m->layers, m->heads, m->tokens, m->head_dim };
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "trace", t->path);
	cJSON_AddItemToObject(j, "shape", cJSON_CreateIntArray(shape, 5));
	cJSON_AddStringToObject(j, "model", m->model);
	cJSON_AddStringToObject(j, "source", m->source);
	cJSON_AddStringToObject(j, "created_by", m->created_by);
	cJSON_AddNumberToObject(j, "version", m->version);
	cJSON_AddItemToObject(j, "step_index", cJSON_CreateIntArray(m->step_index, m->steps));
	cJSON_AddItemToObject(j, "timestep", float_array(m->timestep, m->steps));
	cJSON_AddItemToObject(j, "sigma", float_array(m->sigma, m->steps));
	cJSON_AddItemToObject(j, "layer_index", cJSON_CreateIntArray(m->layer_index, m->layers));
	cJSON_AddItemToObject(j, "head_index", cJSON_CreateIntArray(m->head_index, m->heads));
	cJSON_AddItemToObject(j, "grid", cJSON_CreateIntArray(m->grid, 3));
	cJSON_AddNumberToObject(j, "text_tokens", m->text_tokens);
	cJSON_AddStringToObject(j, "dtype", t->dtype);
	cJSON_AddNumberToObject(j, "size_on_disk", (double)t->file_size);
	cJSON_AddNumberToObject(j, "uncompressed_size", (double)uncompressed_bytes(t));
	if (checked)
		cJSON_AddBoolToObject(j, "checked", 1);
	cJSON *config = cJSON_Parse(m->config);
	cJSON_AddItemToObject(j, "config", config ? config : cJSON_CreateString(m->config));
	char *s = cJSON_Print(j);
	printf("%s\n", s);
	cJSON_free(s);
	cJSON_Delete(j);
}

/* a model folder: config.json's shape, protocol.json, and the names in conds.safetensors */
static int print_model(const char *dir)
{
	char *cfg_path = dg_path_join(dir, "config.json"), *proto_path = dg_path_join(dir, "protocol.json");
	char *conds_path = dg_path_join(dir, "conds.safetensors");
	char *text = dg_read_all(cfg_path, 1 << 20, NULL);
	cJSON *cfg = text ? cJSON_Parse(text) : NULL;
	bool read = text != NULL;
	free(text);
	int rc = 0;
	if (!cJSON_IsObject(cfg)) {
		rc = dg_error("info: %s: %s", cfg_path, read ? "not a JSON object" : "cannot read it (a model folder holds config.json)");
		goto out;
	}
	printf("model     %s\n", dir);
	static const char *const keys[] = { "dim", "num_layers", "num_heads", "text_len", "text_dim", "in_dim" };
	printf("shape    ");
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, keys[i]);
		if (cJSON_IsNumber(v))
			printf(" %s=%d", keys[i], v->valueint);
	}
	printf("\n");
	text = dg_read_all(proto_path, 1 << 16, NULL);
	if (text) {
		cJSON *p = cJSON_Parse(text);
		char *flat = p ? cJSON_PrintUnformatted(p) : NULL;
		printf("protocol  %s (protocol.json: capture and generate's defaults)\n", flat ? flat : "(not JSON)");
		free(flat);
		cJSON_Delete(p);
		free(text);
	}
	if (access(conds_path, F_OK)) {
		printf("classes   (no conds.safetensors)\n");
		goto out;
	}
	dg_safetensors st;
	if (dg_st_open(&st, conds_path)) {
		rc = -1;
		goto out;
	}
	printf("classes  ");
	for (int i = 0; i < st.ntensors; i++)
		printf(" %s", st.tensors[i].name);
	printf("\n          (--text %s:NAME)\n", conds_path);
	dg_st_close(&st);
out:
	cJSON_Delete(cfg);
	free(cfg_path), free(proto_path), free(conds_path);
	return rc ? 1 : 0;
}

int dg_cmd_info(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "check", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c, json = 0, check = 0;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 'c': check = 1; break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("info", c, argv, longopts);
		}
	}
	if (optind != argc - 1)
		return dg_error("info: expected one trace file or model folder (dsgap info --help)"), 2;
	struct stat st;
	if (!stat(argv[optind], &st) && S_ISDIR(st.st_mode)) {
		if (json || check)
			return dg_error("info: --json and --check describe a trace, not a model folder"), 2;
		return print_model(argv[optind]);
	}
	dg_trace t;
	if (dg_trace_open(&t, argv[optind]))
		return 1;
	if (check && check_units(&t)) {
		dg_trace_close(&t);
		return 1;
	}
	if (json)
		print_json(&t, check);
	else
		print_text(&t, check);
	dg_trace_close(&t);
	return 0;
}

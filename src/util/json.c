/*
 * json.c: strict JSON parsing over cJSON (json.h).
 */
#include "util/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static int line_at(const char *text, const char *at)
{
	int line = 1;
	for (const char *p = text; at && p < at && *p; p++)
		line += *p == '\n';
	return line;
}

const cJSON *dg_json_twice(const cJSON *v)
{
	for (const cJSON *a = v ? v->child : NULL; a; a = a->next) {
		if (cJSON_IsObject(v))
			for (const cJSON *b = a->next; b; b = b->next)
				if (a->string && b->string && !strcmp(a->string, b->string))
					return b;
		const cJSON *t = dg_json_twice(a);
		if (t)
			return t;
	}
	return NULL;
}

cJSON *dg_json_parse(const char *text, size_t len, const char **why, int *line)
{
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!root) {
		*why = "invalid JSON";
		*line = line_at(text, cJSON_GetErrorPtr());
		return NULL;
	}
	while (end && end < text + len && strchr(" \t\r\n", *end) && *end)
		end++;
	if (end && end < text + len) {
		*why = "bytes after the JSON value";
		*line = line_at(text, end);
		cJSON_Delete(root);
		return NULL;
	}
	const cJSON *t = dg_json_twice(root);
	if (t) {
		static _Thread_local char msg[160];
		snprintf(msg, sizeof msg, "the key \"%.100s\" twice in one object",
			 dg_control_at(t->string) < 0 ? t->string : "(with a control character)");
		*why = msg;
		*line = 0; /* cJSON keeps no positions */
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

void dg_json_paths_shown(cJSON *v)
{
	for (cJSON *a = v ? v->child : NULL; a; a = a->next)
		dg_json_paths_shown(a);
	if (v && cJSON_IsString(v) && v->valuestring && strchr(v->valuestring, '/')) {
		char *s = dg_path_shown(v->valuestring);
		cJSON_SetValuestring(v, s);
		free(s);
	}
}

/*
 * json.h: the one strict reader of the JSON files dsgap reads (run.json, a model's config.json).
 * cJSON alone accepts bytes after the value and keeps the first of two equal keys in an object,
 * where Python's json keeps the last: the two would read one file differently. dg_json_parse
 * refuses both (dg_json_twice finds the key twice for readers with their own parse errors).
 */
#ifndef DG_JSON_H
#define DG_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* text (len bytes) as one JSON value, nothing but whitespace after it, no object with a key twice;
 * or NULL with *why (static text: "invalid JSON", "bytes after the JSON value", "the key "K" twice in
 * one object") and *line (1-based) where the trouble is, 0 for a key twice (no position kept). Free with cJSON_Delete. Reports nothing. */
cJSON *dg_json_parse(const char *text, size_t len, const char **why, int *line);
/* The first object at or below v with a key twice: the second of the two items (its ->string the
 * key), or NULL. For readers that report their own positions (safetensors headers: bytes). */
const cJSON *dg_json_twice(const cJSON *v);
/* Every string at or below v through dg_path_shown (util.h), in place: for the records dsgap writes
 * (run.json, generate.json), never for a file it reads back paths from. */
void dg_json_paths_shown(cJSON *v);

#endif

/*
 * csv.h: CSV fields per RFC 4180: a field that holds a comma, a double quote, CR or LF is written in
 * double quotes, with each double quote inside doubled; any other field is written as it is. And
 * the CSV files commands append to, checked to be of their schema first.
 */
#ifndef DG_CSV_H
#define DG_CSV_H

#include <stdbool.h>
#include <stdio.h>

#include "util/files.h"

/* Whether s must be quoted. */
bool dg_csv_needs_quotes(const char *s);
/* Write s to f as one CSV field (no separator). Returns what fputs/putc return (EOF on error). */
int dg_csv_field(FILE *f, const char *s);
/*
 * A CSV file that a command appends its rows to (bench, callspeed), atomically: opened only when it
 * holds rows of that command's schema, as a temporary copy (dg_out_open: "PATH.tmp.PID") of its
 * rows so far, which the caller appends to through o->f and publishes with dg_out_commit (renamed
 * over PATH) or drops with dg_out_abort: a failure or a signal leaves PATH as it was. A new or empty
 * file gets HEADER (NULL: none); an existing one must be a regular file (not a FIFO, device or
 * folder) whose first line is HEADER, or, with HEADER NULL, one of the command's rows (is_row).
 * Otherwise one line "CMD: PATH is not ...; nothing written" and -1, the file untouched. Reports
 * failures of its own the same way.
 */
int dg_csv_append_open(dg_out *o, const char *cmd, const char *path, const char *header,
		       bool (*is_row)(const char *line));

#endif

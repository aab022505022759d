/*
 * csv.h: CSV fields per RFC 4180: a field that holds a comma, a double quote, CR or LF is written in
 * double quotes, with each double quote inside doubled; any other field is written as it is. And
 * the CSV files commands append to, checked to be of their schema first.
 */
#ifndef DG_CSV_H
#define DG_CSV_H

#include <stdbool.h>
#include <stdio.h>

/* Whether s must be quoted. */
bool dg_csv_needs_quotes(const char *s);
/* Write s to f as one CSV field (no separator). Returns what fputs/putc return (EOF on error). */
int dg_csv_field(FILE *f, const char *s);
/*
 * A CSV file that a command appends its rows to (bench, callspeed): opened for appending only when it
 * holds rows of that command's schema. A new or empty file gets HEADER (NULL: none); an existing one
 * must be a regular file (not a FIFO, device or folder) whose first line is HEADER, or, with HEADER
 * NULL, one of the command's rows (is_row). Otherwise one line "CMD: PATH is not ...; nothing
 * written" and NULL, the file untouched. Reports failures of its own the same way.
 */
FILE *dg_csv_append_open(const char *cmd, const char *path, const char *header, bool (*is_row)(const char *line));

#endif

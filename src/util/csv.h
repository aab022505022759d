/*
 * csv.h: CSV fields per RFC 4180: a field that holds a comma, a double quote, CR or LF is written in
 * double quotes, with each double quote inside doubled; any other field is written as it is.
 */
#ifndef DG_CSV_H
#define DG_CSV_H

#include <stdbool.h>
#include <stdio.h>

/* Whether s must be quoted. */
bool dg_csv_needs_quotes(const char *s);
/* Write s to f as one CSV field (no separator). Returns what fputs/putc return (EOF on error). */
int dg_csv_field(FILE *f, const char *s);

#endif

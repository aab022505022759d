/*
 * csv.c: RFC 4180 quoting of one field (csv.h).
 */
#include "util/csv.h"

#include <string.h>

bool dg_csv_needs_quotes(const char *s)
{
	return s[strcspn(s, ",\"\r\n")] != 0;
}

int dg_csv_field(FILE *f, const char *s)
{
	if (!dg_csv_needs_quotes(s))
		return fputs(s, f);
	if (putc('"', f) == EOF)
		return EOF;
	for (; *s; s++)
		if ((*s == '"' && putc('"', f) == EOF) || putc(*s, f) == EOF)
			return EOF;
	return putc('"', f);
}

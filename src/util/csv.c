/*
 * csv.c: RFC 4180 quoting of one field (csv.h).
 */
#include "util/csv.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "util/util.h"

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

FILE *dg_csv_append_open(const char *cmd, const char *path, const char *header, bool (*is_row)(const char *line))
{
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) /* a FIFO would block, a device take the rows */
		return dg_error("%s: %s is not a regular file; nothing written", cmd, path), NULL;
	FILE *f = fopen(path, "a+");
	if (!f)
		return dg_error("%s: cannot append to %s: %s", cmd, path, strerror(errno)), NULL;
	char line[4096] = "";
	bool empty = !fgets(line, sizeof line, f); /* "a+" reads from the start */
	line[strcspn(line, "\n")] = 0;
	if (empty ? header && fprintf(f, "%s\n", header) < 0
		  : header ? strcmp(line, header) != 0 : !is_row(line)) {
		fclose(f);
		return dg_error("%s: %s is not a %s CSV of this version (its first line is not %s); nothing written",
				cmd, path, cmd, header ? "the header" : "one of its rows"), NULL;
	}
	return f;
}

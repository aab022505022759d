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

int dg_csv_append_open(dg_out *o, const char *cmd, const char *path, const char *header,
		       bool (*is_row)(const char *line))
{
	if (!*path)
		return dg_error("%s: --csv '' names no file", cmd), -1;
	struct stat st;
	bool exists = stat(path, &st) == 0;
	if (exists && !S_ISREG(st.st_mode)) /* a FIFO would block, a device take the rows */
		return dg_error("%s: %s is not a regular file; nothing written", cmd, path), -1;
	FILE *in = exists ? fopen(path, "r") : NULL;
	if (exists && !in)
		return dg_error("%s: cannot read %s: %s", cmd, path, strerror(errno)), -1;
	char line[4096] = "";
	bool empty = !in || !fgets(line, sizeof line, in);
	line[strcspn(line, "\n")] = 0;
	if (!empty && (header ? strcmp(line, header) != 0 : !is_row(line))) {
		fclose(in);
		return dg_error("%s: %s is not a %s CSV of this version (its first line is not %s); nothing written",
				cmd, path, cmd, header ? "the header" : "one of its rows"), -1;
	}
	if (dg_out_open(o, path)) {
		if (in)
			fclose(in);
		return -1;
	}
	int bad = 0;
	if (empty) {
		bad = header && fprintf(o->f, "%s\n", header) < 0;
	} else { /* the rows so far, then the new ones */
		rewind(in);
		char buf[65536];
		size_t n;
		while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0)
			bad = fwrite(buf, 1, n, o->f) != n;
		bad = bad || ferror(in);
	}
	if (in)
		fclose(in);
	if (bad) {
		dg_out_abort(o);
		return dg_error("%s: cannot copy %s into its temporary; nothing written", cmd, path), -1;
	}
	return 0;
}

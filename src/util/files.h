/*
 * files.h: the safety of dsgap's files: temporaries removed on a signal, stale temporaries of dead
 * processes cleaned, inputs that no output may name or overwrite, locks on output folders, sets of
 * files published all together or not at all, and the atomic output file (written under a
 * temporary name, renamed on success): the one definition of dsgap's "nothing partial written".
 */
#ifndef DG_FILES_H
#define DG_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* ---- temporaries ------------------------------------------------------------------------------
 * Every name made by dg_tmp_name (below) is registered as a live temporary of this process; a
 * SIGINT, SIGTERM or SIGHUP, or a fatal error (dg_die), removes every registered one, and then the
 * folders dg_mkdir_track made for the command if they are empty, and ends the process with that
 * signal (or status 1). dg_tmp_release forgets a name (renamed or removed); dg_made_dirs_free
 * forgets the command's folders. */
void dg_tmp_register(const char *path);
void dg_tmp_release(const char *path);
/* Install the handlers (main), and ignore SIGXFSZ so that a write past `ulimit -f` fails with EFBIG
 * and is reported like any other write error. */
void dg_signals_install(void);
/* Remove every registered temporary of this process now (also safe inside a signal handler). */
void dg_tmp_remove_all(void);

/* Remove the temporaries of dead processes in DIR: names "PREFIX*.tmp.PID" (PREFIX NULL: any name)
 * whose PID is not a live process of this machine. Folders are removed with their files. Quiet. */
void dg_tmp_clean_stale(const char *dir, const char *prefix);
/* rm -r PATH (a file or a folder of files and folders); 0 or -1 with errno set */
int dg_remove_tree(const char *path);

/* ---- inputs -----------------------------------------------------------------------------------
 * dg_input_add records PATH (a file or a folder; "FILE:KEY" counts as FILE) as an input of this
 * command, and as the input an out-of-memory report names (dg_oom_input). dg_output_check
 * refuses an output path that names an input (same real path, or same st_dev and st_ino), or lies
 * inside an input folder (a file of it, or a new one), with one line naming both; 0 if it is safe.
 * Every writer of util (dg_out_open) and of trace files calls it. */
void dg_input_add(const char *path);
int dg_output_check(const char *path);
/* An output folder: no input may lie inside it under one of the names NAMES (NULL-terminated) */
int dg_output_dir_check(const char *dir, const char *const *names);
/* The output folder DIR (--out) of a command CMD whose outputs are its own, apart from its inputs
 * (compare, drift, decompose over samples or closed runs, refreshstats, generate, attnstats; not
 * decompose DIR or plot DIR, which add tables to a run's folder, nor merge, whose --out may be a
 * shard, nor replay and run, whose --out may hold their trace): refused with one line "CMD: --out
 * DIR ..." when DIR is an input, holds one at any depth or lies inside an input folder, whether or
 * not it exists yet (its real path: the deepest existing folder's); 0 when it is safe. Called after
 * every input is added, before any work. (--out '' is refused for every command by main.c.) */
int dg_output_folder_check(const char *cmd, const char *dir);
/* Whether paths A and B name one existing file (same st_dev and st_ino): the same input twice */
bool dg_same_file(const char *a, const char *b);

/* ---- locks on output folders ------------------------------------------------------------------
 * dg_dir_lock takes an exclusive lock on DIR (flock on DIR/.dsgap.lock holding "pid host start");
 * when another process holds it, it reports "DIR is in use by dsgap pid P on HOST since T" and
 * returns -1. The lock is held until dg_dir_unlock or the process ends; the lock file is removed
 * by dg_dir_unlock, at exit, or by a signal (like a temporary). It also cleans DIR's stale temporaries (it is ours now). */
typedef struct {
	int fd;
	char *path;
	long pid;
} dg_dir_lock_t;
int dg_dir_lock(dg_dir_lock_t *l, const char *dir);
void dg_dir_unlock(dg_dir_lock_t *l);

/* mkdir -p that remembers the folders it made: dg_made_dirs_remove removes them (innermost first)
 * if they are empty, for a command that failed. */
typedef struct {
	char **dirs;
	int n;
} dg_made_dirs;
int dg_mkdir_track(const char *path, dg_made_dirs *made); /* made NULL: dg_mkdir_p */
/* mkdir -p. Returns 0 or reports "cannot create directory PATH: reason" and returns -1. */
int dg_mkdir_p(const char *path);
void dg_made_dirs_remove(dg_made_dirs *made);
void dg_made_dirs_free(dg_made_dirs *made);

/* ---- publishing a set of files all or nothing --------------------------------------------------
 * dg_publish_add records a finished temporary TMP for FINAL (both copied); dg_publish_commit renames
 * them all, and on a failure removes what it had renamed and every remaining temporary (nothing
 * published); dg_publish_abort removes every temporary. */
typedef struct {
	char **tmp, **final;
	int n;
} dg_publish;
void dg_publish_add(dg_publish *p, const char *tmp, const char *final);
int dg_publish_commit(dg_publish *p);
void dg_publish_abort(dg_publish *p);
/* A command's whole output (tables, figures rendered by gnuplot) made in a staging folder inside
 * its output folder, then published all or nothing:
 *   dg_stage s;
 *   if (dg_stage_open(&s, dir, "attnstats")) ...      s.path = DIR/.attnstats.tmp.PID (DIR made)
 *   rc = write everything under s.path (subfolders too);
 *   rc = dg_stage_close(&s, rc);
 * dg_stage_close with rc 0 renames every file of the stage to the same place under DIR (subfolders
 * made as needed) by one dg_publish_commit; other files of DIR stay. Either way the stage is removed,
 * and on a failure (rc != 0, or a rename) the folders dg_stage_open made, if empty. Returns 0 or -1
 * (a failure of its own reported). */
typedef struct {
	char *path, *dir;
	dg_made_dirs made;
} dg_stage;
int dg_stage_open(dg_stage *s, const char *dir, const char *name);
int dg_stage_close(dg_stage *s, int rc);
/* While P is set (not NULL), dg_out_commit (below) does not rename: it adds the finished file to P,
 * so that the files of a command that writes several are published by one dg_publish_commit. */
void dg_out_defer(dg_publish *p);
dg_publish *dg_out_deferred(void);
/* ---- atomic output ---------------------------------------------------------------------------- */
/*
 * Atomic output file: dg_out_open creates "PATH.tmp.PID" for writing; dg_out_commit closes it,
 * checks every write succeeded and renames it to PATH; dg_out_abort closes and removes it.
 * Either way the handle is freed; readers never see a partial PATH. dg_out_open refuses a PATH that
 * is an input of the command (dg_output_check); the temporary is registered, so that a
 * signal removes it (dg_tmp_register).
 */
typedef struct dg_out_s {
	FILE *f;
	char *path;
	char *tmp;
} dg_out;
int dg_out_open(dg_out *o, const char *path);
/* dg_out_open of the file NAME in the folder DIR */
int dg_out_open_in(dg_out *o, const char *dir, const char *name);
int dg_out_commit(dg_out *o);
void dg_out_abort(dg_out *o);
/* Flush and close F: 0, or the errno of the first failure (EIO when none is known). */
int dg_out_close_errno(FILE *f);
/* Temporary name for PATH (PATH.tmp.PID), new string: for writers that are not stdio (HDF5). The
 * name is registered as a live temporary (removed on SIGINT/SIGTERM; dg_tmp_release when
 * it is renamed or removed), and the PATH.tmp.* of dead processes are removed. */
char *dg_tmp_name(const char *path);

/* Close an atomic output file without renaming it: checks every write and adds it to P.
 * On a failure reports one line, removes the temporary and returns -1. The handle is freed. */
int dg_out_finish(dg_out *o, dg_publish *p);

#endif

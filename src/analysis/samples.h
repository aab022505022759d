/*
 * samples.h: decompose over a sample set (issue 19): many results directories, one per sample
 * (a class or prompt with a noise seed, each captured and replayed on its own), into one pair of
 * tables with two-level bootstrap intervals (samples, then (layer, head) clusters within each),
 * per-sample estimates and sign stability (decompose.h dg_table_build_samples).
 *
 *   dsgap decompose [LABEL=]DIR [[LABEL=]DIR ...] --out OUT [--boot N] [--seed X]
 *   dsgap decompose --samples LIST --out OUT            LIST: lines LABEL=DIR (or DIR), relative
 *                                                       to LIST's folder; '#' comments
 * A label defaults to the directory's last component. Writes OUT/decomposition.{csv,md,tex},
 * OUT/ablation.{csv,md,tex} and, with several samples, OUT/{decomposition,ablation}-samples.csv,
 * each atomically. Every sample must come from the same model and schedule (warm-up, dense layers).
 */
#ifndef DG_SAMPLES_H
#define DG_SAMPLES_H

#include <stdbool.h>

/* A sample set: a label and a folder per sample (LABEL=DIR operands or lines of a list file). */
typedef struct {
	char **label, **dir;
	int n;
} dg_sample_list;
/* Add LABEL=DIR or DIR (label: DIR's last component); DIR joined to base unless base is NULL or
 * DIR is absolute. */
void dg_sample_list_add(dg_sample_list *l, const char *spec, const char *base);
/* Add the LABEL=DIR (or DIR) lines of file, DIR relative to its folder ('#' comments); a problem
 * (a FIFO or device, refused before any read): one line naming the file (and line), -1. */
int dg_sample_list_read(dg_sample_list *l, const char *file);
/* -1 with one line naming cmd (and both folders) when a label holds a control character, two
 * samples have the same label or two are the same folder (under other names); else 0 */
int dg_sample_list_unique(const dg_sample_list *l, const char *cmd);
void dg_sample_list_free(dg_sample_list *l);

/* True when the command line asks for the sample-set form (--out, --samples or several
 * operands); dg_cmd_decompose hands it to dg_decompose_samples. */
bool dg_decompose_is_samples(int argc, char **argv);
/* The whole command; returns the exit status (0, 1: failed, 2: bad command line). */
int dg_decompose_samples(int argc, char **argv);

#endif

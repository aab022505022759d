/*
 * commands.h: the subcommands of the dsgap CLI (docs/spec.md §1). Each takes main's argc/argv shifted so
 * that argv[0] is the command name, parses its own options with getopt_long, answers --help,
 * and returns the process exit status (0 ok, 1 error, 2 usage).
 */
#ifndef DG_COMMANDS_H
#define DG_COMMANDS_H

int dg_cmd_synth(int argc, char **argv);     /* cmd_synth.c */
int dg_cmd_info(int argc, char **argv);      /* cmd_info.c */
int dg_cmd_presets(int argc, char **argv);   /* cmd_presets.c */
int dg_cmd_replay(int argc, char **argv);    /* cmd_replay.c */
int dg_cmd_decompose(int argc, char **argv); /* cmd_decompose.c */
int dg_cmd_plot(int argc, char **argv);      /* cmd_plot.c */
int dg_cmd_demo(int argc, char **argv);      /* cmd_demo.c */
int dg_cmd_bench(int argc, char **argv);     /* cmd_bench.c */
int dg_cmd_run(int argc, char **argv);       /* cmd_run.c */
int dg_cmd_merge(int argc, char **argv);     /* cmd_merge.c */
int dg_cmd_capture(int argc, char **argv);   /* cmd_capture.c */
int dg_cmd_generate(int argc, char **argv);  /* cmd_generate.c */
int dg_cmd_attnstats(int argc, char **argv); /* cmd_attnstats.c */
int dg_cmd_refreshstats(int argc, char **argv); /* cmd_refreshstats.c */
int dg_cmd_sheet(int argc, char **argv);     /* cmd_sheet.c */
int dg_cmd_compare(int argc, char **argv);   /* cmd_compare.c */
int dg_cmd_callspeed(int argc, char **argv); /* cmd_callspeed.c */
int dg_cmd_drift(int argc, char **argv);     /* cmd_drift.c */

#endif

/* cmd_plot.c: placeholder until the command lands (replaced in this session). */
#include "commands.h"
#include "util.h"
int dg_cmd_plot(int argc, char **argv) { return dg_error("plot: not built yet"), 1; }

/* cmd_synth.c: placeholder until the command lands (replaced in this session). */
#include "commands.h"
#include "util.h"
int dg_cmd_synth(int argc, char **argv) { return dg_error("synth: not built yet"), 1; }

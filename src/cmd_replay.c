/* cmd_replay.c: placeholder until the command lands (replaced in this session). */
#include "commands.h"
#include "util.h"
int dg_cmd_replay(int argc, char **argv) { return dg_error("replay: not built yet"), 1; }

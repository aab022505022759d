/* cmd_info.c: placeholder until the command lands (replaced in this session). */
#include "commands.h"
#include "util.h"
int dg_cmd_info(int argc, char **argv) { return dg_error("info: not built yet"), 1; }

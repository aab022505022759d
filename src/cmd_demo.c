/* cmd_demo.c: placeholder until the command lands (replaced in this session). */
#include "commands.h"
#include "util.h"
int dg_cmd_demo(int argc, char **argv) { return dg_error("demo: not built yet"), 1; }

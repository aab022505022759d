/* cmd_decompose.c: placeholder until the command lands (replaced in this session). */
#include "commands.h"
#include "util.h"
int dg_cmd_decompose(int argc, char **argv) { return dg_error("decompose: not built yet"), 1; }

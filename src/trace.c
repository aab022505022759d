/* trace.c: placeholder until trace I/O lands. */
#include "trace.h"

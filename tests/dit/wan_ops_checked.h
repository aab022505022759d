/*
 * wan_ops_checked.h: a CPU stand-in for a device backend of the Wan forward, for tests: the CPU's
 * arithmetic (bit for bit), but every tensor argument must lie in a buffer it allocated (weights in
 * its own copies), and an operand buffer (bf16 only on a device) may go only where a device table
 * reads or writes bf16; anything else stops the program naming the op and argument.
 *   dg_wan_load_ops(&m, path, dg_wan_ops_checked())
 */
#ifndef DG_WAN_OPS_CHECKED_H
#define DG_WAN_OPS_CHECKED_H

#include "dit/wan_ops.h"

dg_wan_ops *dg_wan_ops_checked(void);

#endif

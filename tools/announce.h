/* announce.h - what a command that runs on a device says first on stderr. */
#ifndef LF_ANNOUNCE_H
#define LF_ANNOUNCE_H

#include "linformer.h"

/* "linformer COMMAND: device P:D NAME (PLATFORM)", and, when the kernel cache
 * is off or empty, that the kernels are being compiled: a silent wait follows. */
void tool_announce(const char *command, lf_context *ctx);

#endif

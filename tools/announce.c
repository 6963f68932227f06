/* announce.c - the device a command runs on, and a word before compiling kernels. */
#include "announce.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>

/* Which device runs, and, before a silent wait, that kernels are being compiled. */
void tool_announce(const char *command, lf_context *ctx)
{
    lf_device_info d;
    if (lf_context_device_info(ctx, &d) == LF_OK)
        fprintf(stderr, "linformer %s: device %u:%u %s (%s)\n", command, d.platform_index, d.device_index, d.device_name,
                d.platform_name);
    char dir[4096];
    if (lf_kernel_cache_dir(dir, sizeof dir) != LF_OK) {
        fprintf(stderr, "linformer %s: compiling the kernels, at every run: they are not cached (%s)\n", command,
                dir);
        return;
    }
    DIR *listing = opendir(dir);
    bool cached = false;
    for (struct dirent *e; listing && !cached && (e = readdir(listing));) cached = e->d_name[0] != '.';
    if (listing) closedir(listing);
    if (!cached)
        fprintf(stderr, "linformer %s: compiling the kernels for the first run (up to a minute on a CPU); "
                        "they are cached in %s for the next runs\n", command, dir);
}

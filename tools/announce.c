/* announce.c - the device a command runs on, and a word before compiling kernels. */
#include "announce.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kernel cache as the library finds it (linformer.h): NULL when it is off. */
static const char *cache_dir(char *buf, size_t size)
{
    const char *dir = getenv("LINFORMER_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && strcmp(dir, "off") == 0) return NULL;
    if (dir && *dir) snprintf(buf, size, "%s", dir);
    else if (xdg && *xdg) snprintf(buf, size, "%s/linformer", xdg);
    else snprintf(buf, size, "%s/.cache/linformer", home ? home : ".");
    return buf;
}

/* Which device runs, and, before a silent wait, that kernels are being compiled. */
void tool_announce(const char *command, lf_context *ctx)
{
    lf_device_info d;
    if (lf_context_device_info(ctx, &d) == LF_OK)
        fprintf(stderr, "linformer %s: device %u:%u %s (%s)\n", command, d.platform_index, d.device_index, d.device_name,
                d.platform_name);
    char buf[4096];
    const char *dir = cache_dir(buf, sizeof buf);
    DIR *listing = dir ? opendir(dir) : NULL;
    bool cached = false;
    for (struct dirent *e; listing && !cached && (e = readdir(listing));) cached = e->d_name[0] != '.';
    if (listing) closedir(listing);
    if (!dir)
        fprintf(stderr, "linformer %s: compiling the kernels (LINFORMER_CACHE_DIR=off: at every run)\n", command);
    else if (!cached)
        fprintf(stderr, "linformer %s: compiling the kernels for the first run (up to a minute on a CPU); "
                        "they are cached in %s for the next runs\n", command, dir);
}

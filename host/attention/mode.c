/* mode.c - the names of the attention modes, which the plan's messages, the
 * stages' profile names and the public parse share. */
#include <string.h>

#include "linformer.h"

const char *lf_mode_name(lf_mode mode)
{
    switch (mode) {
    case LF_MODE_LINFORMER: return "linformer";
    case LF_MODE_DENSE: return "dense";
    case LF_MODE_FLASH: return "flash";
    }
    return "unknown";
}

lf_status lf_mode_parse(const char *name, lf_mode *mode)
{
    if (!name || !mode) return LF_ERR_ARGUMENT;
    for (int m = LF_MODE_LINFORMER; m <= LF_MODE_FLASH; m++)
        if (strcmp(name, lf_mode_name((lf_mode)m)) == 0) return *mode = (lf_mode)m, LF_OK;
    return LF_ERR_ARGUMENT;
}

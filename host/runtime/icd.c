/* icd.c - the installed OpenCL drivers that gave no platform, and why.
 *
 * The ICD loader dlopen()s the library that each .icd file names and drops,
 * without a word, one that fails to load: a platform is then simply missing.
 * This reads the same files (OCL_ICD_VENDORS: a folder, an .icd file or a
 * library; unset or empty, /etc/OpenCL/vendors) and loads each library again
 * as the loader does (RTLD_LAZY | RTLD_LOCAL), once a process, as the loader
 * reads them once: a library the loader holds already loads at no cost, one
 * that failed fails again with dlerror()'s reason. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime.h"

#define LF_SYSTEM_VENDORS "/etc/OpenCL/vendors"

static char report[4096];
static pthread_once_t report_once = PTHREAD_ONCE_INIT;

static void add(const char *fmt, ...)
{
    size_t used = strlen(report);
    if (used + 1 >= sizeof report) return;
    if (used) report[used++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(report + used, sizeof report - used, fmt, ap);
    va_end(ap);
}

/* Loads the library `origin` names, as the ICD loader does. */
static void try_library(const char *origin, const char *library)
{
    dlerror();
    void *h = dlopen(library, RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        add("%s names %s, which does not load: %s", origin, library, why ? why : "dlopen failed");
        return;
    }
    if (!dlsym(h, "clGetExtensionFunctionAddress"))
        add("%s names %s, which is no OpenCL driver (it has no clGetExtensionFunctionAddress)", origin, library);
    dlclose(h);
}

/* An .icd file: one line, the driver's library (a path, or a name the dynamic
 * loader searches for). */
static void try_icd(const char *path)
{
    char library[1024] = "";
    FILE *f = fopen(path, "r");
    if (!f) {
        add("%s cannot be read", path);
        return;
    }
    if (!fgets(library, sizeof library, f)) library[0] = 0;
    fclose(f);
    size_t n = strlen(library);
    while (n && (library[n - 1] == '\n' || library[n - 1] == '\r' || library[n - 1] == ' ')) library[--n] = 0;
    if (!n)
        add("%s names no library", path);
    else
        try_library(path, library);
}

static int is_icd(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    return n > 4 && strcmp(e->d_name + n - 4, ".icd") == 0;
}

static void scan(void)
{
    const char *env = getenv("OCL_ICD_VENDORS");
    const char *where = env && *env ? env : LF_SYSTEM_VENDORS;
    struct stat st;
    if (stat(where, &st) != 0) {
        if (where == env)
            add("OCL_ICD_VENDORS is \"%s\", which does not exist: the ICD loader looks for drivers there "
                "instead of " LF_SYSTEM_VENDORS " (unset it, or point it at a folder of .icd files)", env);
        else
            add(LF_SYSTEM_VENDORS " does not exist: no OpenCL driver is installed");
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        size_t n = strlen(where);
        if (n > 4 && strcmp(where + n - 4, ".icd") == 0)
            try_icd(where);
        else
            try_library("OCL_ICD_VENDORS", where);
        return;
    }
    struct dirent **entries = NULL;
    int count = scandir(where, &entries, is_icd, alphasort);
    if (count <= 0)
        add("%s%s holds no .icd file", where == env ? "OCL_ICD_VENDORS folder " : "", where);
    for (int i = 0; i < count; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", where, entries[i]->d_name);
        try_icd(path);
        free(entries[i]);
    }
    free(entries);
}

const char *lf_devices_unloaded(void)
{
    cl_uint np = 0;
    clGetPlatformIDs(0, NULL, &np); /* the ICD loader loads its drivers first, so that none loads here first */
    pthread_once(&report_once, scan);
    return report;
}

const char *lf__unloaded_note(char *buf, size_t size)
{
    const char *r = lf_devices_unloaded();
    static const char head[] = "; installed drivers that gave no platform: ";
    if (!*r || size < sizeof head + 1) return "";
    size_t used = sizeof head - 1;
    memcpy(buf, head, used);
    for (; *r && used + 3 < size; r++) {
        if (*r == '\n') buf[used++] = ';';
        buf[used++] = *r == '\n' ? ' ' : *r;
    }
    buf[used] = 0;
    return buf;
}

/*
 * tune_table.c - the built-in table of CLBlast's sets per device and GEMM
 * shape class, each row measured to win on its device (`linformer tune
 * --model`), with where and when it was measured.
 *
 * A row is a line "device VENDOR|DEVICE|UNITS|MEASURED" and the sets' lines
 * after it, as a stored entry's (tune_entry.c). It is the device's where
 * VENDOR is part of the device's vendor (any case), DEVICE its name (exactly)
 * and UNITS its compute units (0: any). A stored entry of the device wins
 * over its row. LINFORMER_GEMM_TABLE names a file of rows read in the
 * table's place (tests, and a table measured elsewhere).
 */
#define _GNU_SOURCE /* strcasestr */
#include "kernel_cache.h"
#include "tune_space.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows only of sets measured to win on their device (bench/NOTES.md, "GEMM
 * parameters per shape class"). PoCL's CPU device on a 2-core AMD EPYC:
 * the layer's forward (d_model 256, n 2048) with LINFORMER_GEMM=clblast took
 * 117-136 ms with these sets against 254-314 ms with CLBlast's own (the host
 * BLAS, the CPU's default, took 33 ms). */
static const char builtin[] =
    "device AuthenticAMD|pthread-haswell-AMD EPYC|2|2-core AMD EPYC (Zen 3) VM, PoCL 3.1, CLBlast 1.5.3: "
    "linformer tune --model (d_model 256, d_ff 1024, k 64, n 2048, batch 1), 300 s, 2026-12-07\n"
    "tile Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=16 MDIMC=16 MWG=64 NDIMB=8 NDIMC=8 NWG=64 SA=1 SB=1 "
    "STRM=0 STRN=0 VWM=4 VWN=4\n"
    "sum Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=8 MWG=32 NDIMB=16 NDIMC=16 NWG=64 SA=1 SB=1 "
    "STRM=0 STRN=0 VWM=4 VWN=4\n"
    "head Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=16 MDIMC=16 MWG=64 NDIMB=8 NDIMC=8 NWG=64 SA=1 SB=1 "
    "STRM=0 STRN=0 VWM=4 VWN=4\n"
    "XgemmDirect KWID=8 MDIMAD=8 MDIMCD=16 NDIMBD=32 NDIMCD=16 PADA=1 PADB=1 VWMD=2 VWND=1 WGD=32\n"
    "GemmRoutine XGEMM_MIN_INDIRECT_SIZE=0\n";

/* Whether a "device ..." line names d (its fourth field, where and when, is for readers). */
static bool names_device(const char *line, const lf_device_info *d)
{
    char vendor[128], name[128];
    unsigned units = 0;
    int used = 0;
    if (sscanf(line, "device %127[^|]|%127[^|]|%u|%n", vendor, name, &units, &used) != 3 || !used) return false;
    return strcasestr(d->vendor, vendor) && strcmp(d->device_name, name) == 0 && (!units || units == d->compute_units);
}

/* The row of d in `rows` (cut up), parsed into t. */
static lf_status find_row(char *rows, const lf_device_info *d, lf_tuned *t, bool *found)
{
    *found = false;
    for (char *line = rows; line && *line;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (strncmp(line, "device ", 7) == 0 && names_device(line, d)) {
            char *end = next ? strstr(next, "\ndevice ") : NULL;
            if (end) end[1] = 0;
            if (!next || !lf__tune_parse(next, d, t)) return LF_ERR_FORMAT;
            *found = true;
            return LF_OK;
        }
        line = next;
    }
    return LF_OK;
}

lf_status lf__tune_table(const lf_device_info *d, lf_tuned *t, bool *found, char *errbuf, size_t errbuf_size)
{
    const char *path = getenv("LINFORMER_GEMM_TABLE");
    char *rows = NULL;
    size_t len = 0;
    if (path && *path && lf__read_file(path, true, &rows, &len) != LF_OK)
        return lf__fail_buf(errbuf, errbuf_size, LF_ERR_IO, "LINFORMER_GEMM_TABLE \"%s\" cannot be read", path);
    if (!rows && !(rows = strdup(builtin))) return lf__fail_buf(errbuf, errbuf_size, LF_ERR_OUT_OF_MEMORY, "no memory");
    lf_status st = find_row(rows, d, t, found);
    free(rows);
    if (st != LF_OK)
        return lf__fail_buf(errbuf, errbuf_size, st, "%s: the row of \"%s\" holds a line that is no valid set here",
                            path && *path ? path : "the built-in GEMM table", d->device_name);
    return LF_OK;
}

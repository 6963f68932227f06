/* cmd_kernels.c - `linformer kernels`: every program the library builds for a GPU, written out without the GPU. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "linformer.h"
#include "output_file.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: linformer kernels --emit DIR --device-profile NAME\n"
            "       linformer kernels --profiles\n\n"
            "Writes into DIR (created if missing) every program the library builds on a GPU of\n"
            "profile NAME, as it builds it there: NN-FILE.cl, the source with its prelude, and\n"
            "kernels.tsv, a line a program: its .cl file, the profile's GPU vendor (nvidia, amd,\n"
            "intel), the profile's local memory in bytes, the kernels the library creates of it,\n"
            "and the build options (the -D parameters of the kernel parameter table for that GPU,\n"
            "LINFORMER_KERNEL_PARAMS included). No OpenCL device is opened.\n"
            "--profiles lists the profiles: name, vendor, local memory, compute units, max\n"
            "work-group size. scripts/check-gpu-compilers.sh compiles them with each vendor's\n"
            "compiler.\n");
}

static int list_profiles(void)
{
    for (size_t i = 0; lf_device_profile_name(i); i++) {
        lf_device_info d;
        if (lf_device_profile_info(lf_device_profile_name(i), &d, NULL, 0) != LF_OK) return 1;
        printf("%s\t%s\t%s\t%llu\t%u\t%zu\n", lf_device_profile_name(i), d.vendor, d.device_name,
               (unsigned long long)d.local_mem_bytes, d.compute_units, d.max_work_group_size);
    }
    return 0;
}

/* Writes `size` bytes of text to DIR/name; 0, or -1 with a message in err. */
static int write_file(const char *dir, const char *name, const char *text, size_t size, char *err, size_t err_size)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    output_file *f = output_file_open(path, NULL, 0, err, err_size);
    if (!f) return -1;
    fwrite(text, 1, size, output_file_stream(f));
    return output_file_commit(f, err, err_size);
}

/* One program's source as NN-FILE.cl and its line of the manifest. */
static int emit_one(const char *dir, size_t n, const lf_kernel_build *b, const lf_device_info *d, FILE *manifest,
                    char *err, size_t err_size)
{
    char *text = NULL, name[64];
    size_t size = 0;
    if (lf_kernel_source(b->file, &text, &size, err, err_size) != LF_OK) return -1;
    snprintf(name, sizeof name, "%02zu-%s", n, b->file);
    const int st = write_file(dir, name, text, size, err, err_size);
    free(text);
    if (st == 0)
        fprintf(manifest, "%s\t%s\t%llu\t%s\t%s\n", name, b->compiler, (unsigned long long)d->local_mem_bytes,
                b->kernels, b->build_options);
    return st;
}

static int emit(const char *dir, const char *profile)
{
    char err[1024] = "";
    lf_device_info d;
    size_t count = 0;
    if (lf_device_profile_info(profile, &d, err, sizeof err) != LF_OK ||
        lf_kernel_builds(profile, NULL, 0, &count, err, sizeof err) != LF_OK)
        return cli_usage_error("kernels", err);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "linformer kernels: --emit %s: cannot create the folder: %s\n", dir, strerror(errno));
        return 1;
    }
    lf_kernel_build *builds = calloc(count, sizeof *builds);
    char path[4200];
    snprintf(path, sizeof path, "%s/kernels.tsv", dir);
    output_file *manifest = builds ? output_file_open(path, NULL, 0, err, sizeof err) : NULL;
    int st = manifest && lf_kernel_builds(profile, builds, count, &count, err, sizeof err) == LF_OK ? 0 : -1;
    if (!builds) snprintf(err, sizeof err, "out of memory");
    for (size_t i = 0; st == 0 && i < count; i++)
        st = emit_one(dir, i, &builds[i], &d, output_file_stream(manifest), err, sizeof err);
    if (st == 0) st = output_file_commit(manifest, err, sizeof err);
    else output_file_abort(manifest);
    free(builds);
    if (st != 0) {
        fprintf(stderr, "linformer kernels: --emit %s: %s\n", dir, err);
        return 1;
    }
    fprintf(stderr, "linformer kernels: %zu programs for %s in %s\n", count, profile, dir);
    return 0;
}

int cmd_kernels(int argc, char **argv)
{
    static const cli_option options[] = {
        {"emit", true}, {"device-profile", true}, {"profiles", false}, {"help", false}};
    const char *v[4];
    char err[512];
    if (cli_parse(argc, argv, options, 4, v, err, sizeof err) != 0) return cli_usage_error("kernels", err);
    if (v[3]) {
        usage(stdout);
        return 0;
    }
    if (v[2]) {
        if (v[0] || v[1]) return cli_usage_error("kernels", "--profiles takes no --emit or --device-profile");
        return list_profiles();
    }
    if (!v[0]) return cli_usage_error("kernels", "--emit DIR is missing: the folder to write the kernels into");
    if (!*v[0]) return cli_usage_error("kernels", "--emit is empty: give the folder to write the kernels into");
    if (!v[1])
        return cli_usage_error("kernels", "--device-profile NAME is missing (`linformer kernels --profiles` lists them)");
    return emit(v[0], v[1]);
}

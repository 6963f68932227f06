/* commands.h - the subcommands of the `linformer` program. */
#ifndef LF_COMMANDS_H
#define LF_COMMANDS_H

int cmd_devices(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_rank(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_kernels(int argc, char **argv);

/* How long OpenBLAS's idle threads wait by yielding, as a power of two of
 * cycles: the program sets it unless the user did (main.c), and `devices`
 * says what it is. */
#define LF_THREAD_TIMEOUT_VAR "OPENBLAS_THREAD_TIMEOUT"
#define LF_THREAD_TIMEOUT "4"

/* How MKL's GNU OpenMP threads wait when idle: libgomp reads it as it loads,
 * with MKL, at the first context (main.c sets it unless the user did). */
#define LF_WAIT_POLICY_VAR "OMP_WAIT_POLICY"
#define LF_WAIT_POLICY "passive"

#endif

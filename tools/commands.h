/* commands.h - the subcommands of the `linformer` program. */
#ifndef LF_COMMANDS_H
#define LF_COMMANDS_H

int cmd_devices(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_rank(int argc, char **argv);
int cmd_tune(int argc, char **argv);

#endif

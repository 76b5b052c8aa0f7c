/* commands.h — the `frugal <command>` entry points. Each returns the process exit status:
 * 0 success, 1 bad input / runtime failure (message already printed), 2 usage error. */
#ifndef FRUGAL_COMMANDS_H
#define FRUGAL_COMMANDS_H

int fr_cmd_tokenize(int argc, char **argv);
int fr_cmd_generate(int argc, char **argv);
int fr_cmd_render(int argc, char **argv);

#endif

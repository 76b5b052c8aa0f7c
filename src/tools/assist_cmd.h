/* assist_cmd.h — `frugal assist`: the stdin/stdout door of the assist handler (serve/assist.h).
 * Returns the process exit status: 0 (every line answered), 1 (set-up failed), 2 (usage). */
#ifndef FRUGAL_ASSIST_CMD_H
#define FRUGAL_ASSIST_CMD_H

int fr_cmd_assist(int argc, char **argv);

#endif

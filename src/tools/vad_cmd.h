/* vad_cmd.h — `frugal vad`: the speech spans Silero VAD finds in audio files. Returns the process
 * exit status: 0 success, 1 bad input / no model (message printed), 2 usage. */
#ifndef FRUGAL_VAD_CMD_H
#define FRUGAL_VAD_CMD_H

int fr_cmd_vad(int argc, char **argv);

#endif

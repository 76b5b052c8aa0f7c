/* transcribe_cmd.h — `frugal transcribe` (Whisper on the CPU). Returns the process exit status:
 * 0 success, 1 bad input / runtime failure (message printed), 2 usage. */
#ifndef FRUGAL_TRANSCRIBE_CMD_H
#define FRUGAL_TRANSCRIBE_CMD_H

int fr_cmd_transcribe(int argc, char **argv);

#endif

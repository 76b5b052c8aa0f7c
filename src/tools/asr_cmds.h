/* asr_cmds.h — `frugal asr`, `frugal build-lm` and `frugal eval-asr`. Each returns the process
 * exit status: 0 success, 1 bad input / runtime failure (message already printed), 2 usage. */
#ifndef FRUGAL_ASR_CMDS_H
#define FRUGAL_ASR_CMDS_H

int fr_cmd_asr(int argc, char **argv);
int fr_cmd_build_lm(int argc, char **argv);
int fr_cmd_eval_asr(int argc, char **argv);

/* The deterministic ASR held-out rule for BANKING77 train rows: FNV-1a of the raw utterance
 * text, modulo 40, equals 7 (about 2.5 % of rows). Rows held out never enter the domain LM. */
int fr_asr_is_heldout(const char *text);

#endif

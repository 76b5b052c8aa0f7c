/* speech_eval.h — `frugal eval-speech` (speech -> intent on generated spoken sets; see
 * speech_eval.c). Returns the exit status: 0, 1 runtime failure, 2 usage. */
#ifndef FRUGAL_SPEECH_EVAL_H
#define FRUGAL_SPEECH_EVAL_H

#include <stdint.h>

#include "stages/nlu/intent_train.h"

int fr_cmd_eval_speech(int argc, char **argv);

/* The text splits of the spoken sets over BANKING77 train rows d (the shipped intent recipe's
 * stratified seed-1 split): mark[i] 1 = evaluation texts (the intent validation rows), 2 =
 * tuning texts (the calibration rows), 0 = intent training rows. `frugal build-lm` leaves rows
 * 1 and 2 out of the domain LM. -1 when d is empty. */
int fr_speech_split_marks(const fr_intent_data *d, uint8_t *mark);

#endif

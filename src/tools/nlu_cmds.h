/* nlu_cmds.h — `frugal train-intent` and `frugal eval-nlu`. Each returns the process exit status:
 * 0 success, 1 bad input / runtime failure (message already printed), 2 usage error. */
#ifndef FRUGAL_NLU_CMDS_H
#define FRUGAL_NLU_CMDS_H

int fr_cmd_train_intent(int argc, char **argv);
int fr_cmd_eval_nlu(int argc, char **argv);

#endif

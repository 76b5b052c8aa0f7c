/* ocr_cmds.h — `frugal ocr`, `frugal gen-docs`, `frugal eval-ocr`. Each returns the process exit
 * status: 0 success, 1 bad input / runtime failure (message printed), 2 usage error. */
#ifndef FRUGAL_OCR_CMDS_H
#define FRUGAL_OCR_CMDS_H

int fr_cmd_ocr(int argc, char **argv);
int fr_cmd_gen_docs(int argc, char **argv);
int fr_cmd_eval_ocr(int argc, char **argv);

#endif

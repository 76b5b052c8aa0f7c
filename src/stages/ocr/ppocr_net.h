/* ppocr_net.h — internal to stages/ocr: one PP-OCR network's session on the CPU executor or on
 * a CUDA device, shared by the engine (ppocr_run.c) and the shared recogniser (ppocr_batch.c).
 */
#ifndef FRUGAL_STAGES_OCR_PPOCR_NET_H
#define FRUGAL_STAGES_OCR_PPOCR_NET_H

#include "backend/cuda/onnx_cuda.h"
#include "backend/onnx_exec.h"
#include "stages/ocr/ppocr.h"

/* One network's session, on the CPU executor or on a CUDA device (the other NULL). */
typedef struct net_sess {
    fr_onnx_sess *cpu;
    fr_onnx_cuda_sess *gpu;
} net_sess;

/* A session for m on o->device; path: on CUDA, the output comes back as its greedy path
 * (argmax_last: index and value per step) instead of the class probabilities. 0, or -1 with err
 * set (a CUDA device in a binary without the CUDA backend: UNSUPPORTED). */
int fr_ppocr_net_new(const fr_ppocr_opts *o, const fr_onnx_model *m, int path, net_sess *n,
                     fr_err *err);
void fr_ppocr_net_free(net_sess *n);
/* One run on x (n, 3, h, w). 0, or an fr_ocr_status: STOPPED when the cancel check says stop
 * (before the run or as the reason it failed), FAILED with err otherwise. */
int fr_ppocr_net_run(net_sess *s, const char *what, float *x, int64_t n, int64_t h, int64_t w,
                     fr_onnx_arr *out, const fr_cancel *cancel, fr_err *err);
/* Recognises the n lines x[i] (3, 48, w[i]) through q, blocking until they are done: path[i]
 * (malloc'd, (T[i], 2) greedy paths). 0; FR_OCR_STOPPED when cancel stops it (no paths); or
 * FR_OCR_FAILED with err (no paths). */
int fr_ppocr_recq_run(fr_ppocr_recq *q, int n, float *const *x, const uint32_t *w,
                      const fr_cancel *cancel, float **path, int *T, fr_err *err);
/* The recogniser of m (borrowed). */
const fr_onnx_model *fr_ppocr_models_rec(const fr_ppocr_models *m);
/* The dictionary of m (borrowed). */
const fr_ppocr_dict *fr_ppocr_models_dict(const fr_ppocr_models *m);

#endif

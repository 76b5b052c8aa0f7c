/* quant.h — weight-only quantisation of a loaded model into the CPU backend's own formats.
 *
 * "q8" (8-bit, group 32, one scale per group) or "q4" (4-bit, group 32, scale and minimum per
 * group). Used on load (`--weights q8|q4`, serve's quant setting, fr_backend_params.weights on the
 * CPU); the layouts and names are in backend/cpu/cpu.h. Runs on a temporary worker pool (one
 * thread per core); the model must not be in use by a decoder while it runs.
 */
#ifndef FRUGAL_QUANT_H
#define FRUGAL_QUANT_H

#include "model/model.h"

/* Converts every F32 matrix of the model whose rows are a multiple of 32 long in place (the model
 * owns the new buffers; others stay F32); the tensors get dtype FR_DTYPE_Q8 / FR_DTYPE_Q4 (values
 * past FR_DTYPE_COUNT, backend/cpu/cpu.h). "none"/"f32"/NULL: no change. m->weight_bytes becomes
 * the bytes streamed per decoded token. Returns 0, or -1 with err (unknown kind, out of memory). */
int fr_model_quantize(fr_model *m, const char *kind, fr_err *err);

#endif

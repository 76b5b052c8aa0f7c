/* vit_check.h — the vision tower's kernel checks (vit_check.c), called by gpu-check's main. */
#ifndef FRUGAL_GPU_VIT_CHECK_H
#define FRUGAL_GPU_VIT_CHECK_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

/* Runs every check, printing one line each; adds to *n_pass / *n_fail. */
void check_vit(cudaStream_t st, bool quick, int *n_pass, int *n_fail);

#endif

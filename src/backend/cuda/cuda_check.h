/* cuda_check.h — the CUDA backend's error checks, for .cu files and for the C programs that call
 * the runtime directly (tests/gpu, bench/gpu).
 *
 * Every CUDA runtime / cuBLAS call goes through FR_CK / FR_CKB: a failure is a broken invariant
 * of our own code (bad launch configuration, illegal address), so it prints file:line and aborts
 * (the same tier as FR_ASSERT in base.h). Out-of-memory at start-up is the one expected failure;
 * the decoder checks those calls itself and returns an fr_err instead.
 */
#ifndef FRUGAL_CUDA_CHECK_H
#define FRUGAL_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define FR_CK(call)                                                                        \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: CUDA error %s: %s (in %s)\n", __FILE__, __LINE__,      \
                    cudaGetErrorName(e_), cudaGetErrorString(e_), #call);                 \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#define FR_CKB(call)                                                                       \
    do {                                                                                   \
        cublasStatus_t s_ = (call);                                                        \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
            fprintf(stderr, "%s:%d: cuBLAS error %d (%s) (in %s)\n", __FILE__, __LINE__,   \
                    (int)s_, cublasGetStatusString(s_), #call);                            \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#endif

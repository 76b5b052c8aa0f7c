/* k_swiglu.cu — act = bf16(silu(gate) * up) over interleaved gate/up rows (kernels.h frk_swiglu;
 * the unfused path after the gate/up GEMM).
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"

__global__ void k_swiglu(const float2 *__restrict__ gu, size_t n, bf16 *__restrict__ act) {
    pdl_trigger();
    pdl_wait();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float2 v = gu[i];
        act[i] = __float2bfloat16(v.x / (1.f + __expf(-v.x)) * v.y);
    }
}
extern "C" void frk_swiglu(const float *gu, int T, int F, uint16_t *act, cudaStream_t st) {
    const size_t n = (size_t)T * F;
    if (!n) return;
    int blocks = (int)FR_MIN_SZ((n + 255) / 256, (size_t)132 * 16);
    frk_launch(k_swiglu, dim3(blocks), dim3(256), 0, st, (const float2 *)gu, n, (bf16 *)act);
}

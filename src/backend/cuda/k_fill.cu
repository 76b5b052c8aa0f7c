/* k_fill.cu — random fills for benchmarks and tests (kernels.h frk_fill_*): a counter hash per
 * element, never zeros.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"

__global__ void k_fill_bf16(bf16 *p, size_t n, float amp, float off, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = __float2bfloat16(off + amp * (2.f * u01(mix64(seed ^ (i * 0x632be59bd9b4e019ull))) - 1.f));
}
__global__ void k_fill_f32(float *p, size_t n, float amp, float off, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = off + amp * (2.f * u01(mix64(seed ^ (i * 0x632be59bd9b4e019ull))) - 1.f);
}
__global__ void k_fill_u32(uint32_t *p, size_t n, uint32_t v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}
extern "C" void frk_fill_bf16(uint16_t *p, size_t n, float amp, float offset, uint64_t seed,
                              cudaStream_t st) {
    if (!n) return;
    k_fill_bf16<<<132 * 8, 256, 0, st>>>((bf16 *)p, n, amp, offset, seed);
    FR_CK_LAUNCH();
}
extern "C" void frk_fill_f32(float *p, size_t n, float amp, float offset, uint64_t seed,
                             cudaStream_t st) {
    if (!n) return;
    k_fill_f32<<<132 * 8, 256, 0, st>>>(p, n, amp, offset, seed);
    FR_CK_LAUNCH();
}
extern "C" void frk_fill_u32(uint32_t *p, size_t n, uint32_t value, cudaStream_t st) {
    if (!n) return;
    k_fill_u32<<<132 * 8, 256, 0, st>>>(p, n, value);
    FR_CK_LAUNCH();
}

/* k_embed.cu — the token embedding gather (kernels.h frk_embed): x[t][:] = f32(table[tokens[t]][:]),
 * one block per token.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"

__global__ void k_embed(const bf16 *__restrict__ table, const int32_t *__restrict__ tokens, int E,
                        float *__restrict__ x) {
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x;
    const bf16 *row = table + (size_t)tokens[t] * E;
    float *o = x + (size_t)t * E;
    for (int i = threadIdx.x; i < E; i += blockDim.x) o[i] = __bfloat162float(row[i]);
}

extern "C" void frk_embed(const uint16_t *table, const int32_t *tokens, int T, int E, float *x,
                          cudaStream_t st) {
    if (T <= 0) return;
    frk_launch(k_embed, dim3(T), dim3(256), 0, st, (const bf16 *)table, tokens, E, x);
}

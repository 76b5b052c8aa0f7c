/* k_vit_norm.cu — the vision tower's norms into bf16 (vit_kernels.h frk_vit_norm): LayerNorm
 * with bias (Qwen2-VL) or RMSNorm (Qwen2.5-VL), one block per row, fp32 reductions (block_sum).
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/vit_kernels.h"

__global__ void k_vit_norm(const float *__restrict__ x, const float *__restrict__ w,
                           const float *__restrict__ b, int E, float eps, bf16 *__restrict__ out) {
    __shared__ float sh[32];
    const float *xr = x + (size_t)blockIdx.x * E;
    bf16 *o = out + (size_t)blockIdx.x * E;
    float mean = 0.f;
    if (b) { /* LayerNorm: the mean first, then the variance around it */
        float s = 0.f;
        for (int j = threadIdx.x; j < E; j += blockDim.x) s += xr[j];
        mean = block_sum(s, sh) / (float)E;
    }
    float ss = 0.f;
    for (int j = threadIdx.x; j < E; j += blockDim.x) {
        const float d = xr[j] - mean;
        ss += d * d;
    }
    const float inv = rsqrtf(block_sum(ss, sh) / (float)E + eps);
    for (int j = threadIdx.x; j < E; j += blockDim.x) {
        const float v = (xr[j] - mean) * inv * w[j];
        o[j] = __float2bfloat16(b ? v + b[j] : v);
    }
}

extern "C" void frk_vit_norm(const float *x, const float *w, const float *b, int n, int E,
                             float eps, uint16_t *out, cudaStream_t st) {
    if (n <= 0) return;
    k_vit_norm<<<n, E >= 1024 ? 256 : 128, 0, st>>>(x, w, b, E, eps, (bf16 *)out);
    FR_CK_LAUNCH();
}

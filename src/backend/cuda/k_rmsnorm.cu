/* k_rmsnorm.cu — RMSNorm of residual rows into bf16 (kernels.h frk_rmsnorm): one block per row,
 * float4 loads where the row allows, the sum of squares reduced in fp32 (block_sum).
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"

/* One block per row. E % 4 == 0 uses float4 loads. */
__global__ void k_rmsnorm(const float *__restrict__ x, const float *__restrict__ w,
                          const int32_t *__restrict__ rows, int E, float eps, bf16 *__restrict__ out) {
    __shared__ float sh[32];
    pdl_trigger();
    pdl_wait();
    const int i = blockIdx.x;
    const int r = rows ? rows[i] : i;
    const float *xr = x + (size_t)r * E;
    bf16 *o = out + (size_t)i * E;
    float ss = 0.f;
    if ((E & 3) == 0) {
        for (int j = threadIdx.x * 4; j < E; j += blockDim.x * 4) {
            float4 v = *(const float4 *)(xr + j);
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
    } else {
        for (int j = threadIdx.x; j < E; j += blockDim.x) ss += xr[j] * xr[j];
    }
    ss = block_sum(ss, sh);
    const float inv = rsqrtf(ss / (float)E + eps);
    if ((E & 3) == 0) {
        for (int j = threadIdx.x * 4; j < E; j += blockDim.x * 4) {
            float4 v = *(const float4 *)(xr + j);
            float4 g = *(const float4 *)(w + j);
            bf162 a = __floats2bfloat162_rn(v.x * inv * g.x, v.y * inv * g.y);
            bf162 b = __floats2bfloat162_rn(v.z * inv * g.z, v.w * inv * g.w);
            *(bf162 *)(o + j) = a;
            *(bf162 *)(o + j + 2) = b;
        }
    } else {
        for (int j = threadIdx.x; j < E; j += blockDim.x) o[j] = __float2bfloat16(xr[j] * inv * w[j]);
    }
}

extern "C" void frk_rmsnorm(const float *x, const float *w, const int32_t *rows, int n, int E,
                            float eps, uint16_t *out, cudaStream_t st) {
    if (n <= 0) return;
    int th = E >= 4096 ? 512 : 256;
    frk_launch(k_rmsnorm, dim3(n), dim3(th), 0, st, x, w, rows, E, eps, (bf16 *)out);
}

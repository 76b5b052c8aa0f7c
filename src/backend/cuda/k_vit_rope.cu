/* k_vit_rope.cu — the vision tower's 2D rotary embedding with the qkv bias fused
 * (vit_kernels.h frk_vit_rope): one block per row; thread j of the first H handles rotation
 * pair j (q heads, then k heads), the v columns only get their bias; the row goes out in bf16
 * for the attention's tensor cores.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/vit_kernels.h"

__global__ void k_vit_rope(const float *__restrict__ qkv, const float *__restrict__ bias,
                           const float *__restrict__ cs, const float *__restrict__ sn,
                           int n_head, int D, bf16 *__restrict__ out) {
    const int H = n_head * D, half = D / 2;
    const float *r = qkv + (size_t)blockIdx.x * 3 * H;
    bf16 *o = out + (size_t)blockIdx.x * 3 * H;
    const float *c = cs + (size_t)blockIdx.x * half, *s = sn + (size_t)blockIdx.x * half;
    /* H pairs per row: which (q or k) = p / (H/2), then head, then k inside the head */
    for (int p = threadIdx.x; p < H; p += blockDim.x) {
        const int which = p / (H / 2), rem = p % (H / 2), h = rem / half, k = rem % half;
        const int c0 = which * H + h * D + k, c1 = c0 + half;
        float x0 = r[c0], x1 = r[c1];
        if (bias) x0 += bias[c0], x1 += bias[c1];
        o[c0] = __float2bfloat16(x0 * c[k] - x1 * s[k]);
        o[c1] = __float2bfloat16(x1 * c[k] + x0 * s[k]);
    }
    for (int j = 2 * H + threadIdx.x; j < 3 * H; j += blockDim.x)
        o[j] = __float2bfloat16(bias ? r[j] + bias[j] : r[j]);
}

extern "C" void frk_vit_rope(const float *qkv, const float *bias, const float *cs, const float *sn,
                             int n, int n_head, int D, uint16_t *out, cudaStream_t st) {
    if (n <= 0) return;
    k_vit_rope<<<n, 128, 0, st>>>(qkv, bias, cs, sn, n_head, D, (bf16 *)out);
    FR_CK_LAUNCH();
}

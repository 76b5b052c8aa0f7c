/* k_vit_elt.cu — the vision tower's element-wise kernels (vit_kernels.h): the MLP and merger
 * activations with their biases fused into the bf16 input of the next product, the residual
 * add with the bias of the product before it, and the window reordering of rows and its
 * inverse. Grid-stride loops over all elements.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/vit_kernels.h"

static int elt_blocks(size_t n) { return (int)FR_MIN_SZ((n + 255) / 256, (size_t)132 * 32); }

__global__ void k_vit_act(const float *__restrict__ a, const float *__restrict__ ba,
                          const float *__restrict__ u, const float *__restrict__ bu, size_t n,
                          int F, int kind, bf16 *__restrict__ out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % (size_t)F);
        const float x = a[i] + (ba ? ba[c] : 0.f);
        float y;
        if (kind == FRK_VIT_SWIGLU) y = x / (1.f + expf(-x)) * (u[i] + (bu ? bu[c] : 0.f));
        else if (kind == FRK_VIT_QUICK_GELU) y = x / (1.f + expf(-1.702f * x));
        else y = 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
        out[i] = __float2bfloat16(y);
    }
}

__global__ void k_vit_residual(float *__restrict__ x, const float *__restrict__ t,
                               const float *__restrict__ b, size_t n, int E) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] += t[i] + (b ? b[i % (size_t)E] : 0.f);
}

__global__ void k_vit_gather_rows(const float *__restrict__ src, const int32_t *__restrict__ win,
                                  int mu, int cols, size_t n, bf16 *__restrict__ dst) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i / (size_t)cols, c = i % (size_t)cols;
        const size_t from = (size_t)win[row / mu] * mu + row % mu;
        dst[i] = __float2bfloat16(src[from * cols + c]);
    }
}

/* dst row i (window order) = the processor's patch row win[i / mu] * mu + i % mu of the 8-bit
 * image, through the per-channel table; patch p of the processor's order is merge block
 * (bh, bw), cell (ih, iw): p = ((bh * (gw / m) + bw) * m + ih) * m + iw; columns (c, t, y, x). */
__global__ void k_vit_patchify_u8(const uint8_t *__restrict__ rgb, int w,
                                  const float *__restrict__ lut, const int32_t *__restrict__ win,
                                  int mu, int gw, int m, int P, int T, size_t n,
                                  bf16 *__restrict__ dst) {
    const int PP = P * P, cols = 3 * T * PP;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i / (size_t)cols;
        const int col = (int)(i % (size_t)cols);
        const int p = win[row / mu] * mu + (int)(row % mu);
        const int iw = p % m, ih = (p / m) % m, blk = p / (m * m), bw = blk % (gw / m), bh = blk / (gw / m);
        const int c = col / (T * PP), r = col % PP;
        const int y = (bh * m + ih) * P + r / P, x = (bw * m + iw) * P + r % P;
        dst[i] = __float2bfloat16(lut[c * 256 + rgb[((size_t)y * w + x) * 3 + c]]);
    }
}

__global__ void k_vit_scatter_rows(const float *__restrict__ y, const float *__restrict__ b,
                                   const int32_t *__restrict__ win, int O, size_t n,
                                   float *__restrict__ out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i / (size_t)O, c = i % (size_t)O;
        out[(size_t)win[row] * O + c] = y[i] + (b ? b[c] : 0.f);
    }
}

extern "C" void frk_vit_act(const float *a, const float *ba, const float *u, const float *bu,
                            int n, int F, int kind, uint16_t *out, cudaStream_t st) {
    const size_t N = (size_t)n * F;
    if (!N) return;
    k_vit_act<<<elt_blocks(N), 256, 0, st>>>(a, ba, u, bu, N, F, kind, (bf16 *)out);
    FR_CK_LAUNCH();
}

extern "C" void frk_vit_residual(float *x, const float *t, const float *b, int n, int E,
                                 cudaStream_t st) {
    const size_t N = (size_t)n * E;
    if (!N) return;
    k_vit_residual<<<elt_blocks(N), 256, 0, st>>>(x, t, b, N, E);
    FR_CK_LAUNCH();
}

extern "C" void frk_vit_gather_rows(const float *src, const int32_t *win, int n_units, int mu,
                                    int cols, uint16_t *dst, cudaStream_t st) {
    const size_t N = (size_t)n_units * mu * cols;
    if (!N) return;
    k_vit_gather_rows<<<elt_blocks(N), 256, 0, st>>>(src, win, mu, cols, N, (bf16 *)dst);
    FR_CK_LAUNCH();
}

extern "C" void frk_vit_patchify_u8(const uint8_t *rgb, int w, const float *lut, const int32_t *win,
                                    int n_units, int mu, int gw, int merge, int P, int T,
                                    uint16_t *dst, cudaStream_t st) {
    const size_t N = (size_t)n_units * mu * 3 * T * P * P;
    if (!N) return;
    k_vit_patchify_u8<<<elt_blocks(N), 256, 0, st>>>(rgb, w, lut, win, mu, gw, merge, P, T, N,
                                                      (bf16 *)dst);
    FR_CK_LAUNCH();
}

extern "C" void frk_vit_scatter_rows(const float *y, const float *b, const int32_t *win,
                                     int n_units, int O, float *out, cudaStream_t st) {
    const size_t N = (size_t)n_units * O;
    if (!N) return;
    k_vit_scatter_rows<<<elt_blocks(N), 256, 0, st>>>(y, b, win, O, N, out);
    FR_CK_LAUNCH();
}

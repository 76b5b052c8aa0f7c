/* k_wh_elt.cu — the CUDA Whisper's element-wise and row kernels (whisper_kernels.h): the two
 * convolutions' im2col, the bias / GELU / positional epilogue of a product, LayerNorm, the
 * decoder's embedding, the self-attention cache writes and the greedy argmax. Element-wise
 * kernels are grid-stride loops; LayerNorm and argmax take one block per row.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/whisper_kernels.h"

static int elt_blocks(size_t n) { return (int)FR_MIN_SZ((n + 255) / 256, (size_t)132 * 32); }

static __device__ __forceinline__ float gelu_erf(float x) {
    return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
}

__global__ void k_wh_im2col1(const float *__restrict__ mel, int M, int T2, size_t n,
                             bf16 *__restrict__ col) {
    const int C = 3 * M;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i / (size_t)C; /* b * T2 + t */
        const int c = (int)(i % (size_t)C), ch = c / 3, k = c % 3;
        const size_t b = row / (size_t)T2;
        const int t = (int)(row % (size_t)T2), s = t + k - 1;
        const float v = s >= 0 && s < T2 ? mel[(b * M + ch) * (size_t)T2 + s] : 0.f;
        col[i] = __float2bfloat16(v);
    }
}

__global__ void k_wh_im2col2(const bf16 *__restrict__ y, int T2, int d, size_t n,
                             bf16 *__restrict__ col) {
    const int C = 3 * d, T = T2 / 2;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i / (size_t)C; /* b * T + t */
        const int c = (int)(i % (size_t)C), ch = c / 3, k = c % 3;
        const size_t b = row / (size_t)T;
        const int t = (int)(row % (size_t)T), s = 2 * t + k - 1;
        col[i] = s >= 0 && s < T2 ? y[(b * T2 + s) * (size_t)d + ch] : __float2bfloat16(0.f);
    }
}

__global__ void k_wh_bias_act(const float *__restrict__ a, const float *__restrict__ b, size_t n,
                              int F, int gelu, const float *__restrict__ add, int period,
                              float *__restrict__ of, bf16 *__restrict__ oh) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i / (size_t)F;
        const int c = (int)(i % (size_t)F);
        float v = a[i] + (b ? b[c] : 0.f);
        if (gelu) v = gelu_erf(v);
        if (add) v += add[(row % (size_t)period) * F + c];
        if (of) of[i] = v;
        if (oh) oh[i] = __float2bfloat16(v);
    }
}

__global__ void k_wh_layernorm(const float *__restrict__ x, const float *__restrict__ w,
                               const float *__restrict__ b, int E, float eps, float *of,
                               bf16 *__restrict__ oh) {
    __shared__ float sh[32];
    const float *xr = x + (size_t)blockIdx.x * E;
    float s = 0.f;
    for (int j = threadIdx.x; j < E; j += blockDim.x) s += xr[j];
    const float mean = block_sum(s, sh) / (float)E;
    float ss = 0.f;
    for (int j = threadIdx.x; j < E; j += blockDim.x) {
        const float dd = xr[j] - mean;
        ss += dd * dd;
    }
    const float inv = rsqrtf(block_sum(ss, sh) / (float)E + eps);
    __syncthreads(); /* every thread has read xr before of (which may alias it) is written */
    for (int j = threadIdx.x; j < E; j += blockDim.x) {
        const float v = (xr[j] - mean) * inv * w[j] + b[j];
        if (oh) oh[(size_t)blockIdx.x * E + j] = __float2bfloat16(v);
        if (of) of[(size_t)blockIdx.x * E + j] = v;
    }
}

__global__ void k_wh_embed(const int32_t *__restrict__ tok, const int32_t *__restrict__ pos,
                           const bf16 *__restrict__ emb, const float *__restrict__ pt, int d,
                           size_t n, float *__restrict__ x) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / (size_t)d;
        const int c = (int)(i % (size_t)d);
        x[i] = __bfloat162float(emb[(size_t)tok[r] * d + c]) + pt[(size_t)pos[r] * d + c];
    }
}

__global__ void k_wh_self_kv(const float *__restrict__ qkv, const float *__restrict__ bq,
                             const float *__restrict__ bv, const int32_t *__restrict__ pos,
                             bf16 *const *__restrict__ base, size_t koff, size_t voff, int d,
                             size_t n, bf16 *__restrict__ qh) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / (size_t)d;
        const int c = (int)(i % (size_t)d);
        const float *row = qkv + r * 3 * (size_t)d;
        const size_t at = (size_t)pos[r] * d + c;
        qh[i] = __float2bfloat16(row[c] + bq[c]);
        base[r][koff + at] = __float2bfloat16(row[d + c]);
        base[r][voff + at] = __float2bfloat16(row[2 * d + c] + bv[c]);
    }
}

__global__ void k_wh_argmax(const float *__restrict__ logits, int V, int ld,
                            int32_t *__restrict__ out) {
    __shared__ float sv[32];
    __shared__ int si[32];
    const float *row = logits + (size_t)blockIdx.x * ld;
    float best = -INFINITY;
    int bi = V; /* none yet */
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float v = row[j];
        if (v > best || (bi == V && v == best)) best = v, bi = j; /* ascending j: first max */
    }
    /* warp: the larger value, ties to the lower index */
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ov > best || (ov == best && oi < bi)) best = ov, bi = oi;
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sv[w] = best, si[w] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < (int)(blockDim.x >> 5); k++)
            if (sv[k] > best || (sv[k] == best && si[k] < bi)) best = sv[k], bi = si[k];
        out[blockIdx.x] = bi < V ? bi : 0; /* all NaN: 0 */
    }
}

extern "C" void frk_wh_im2col1(const float *mel, int B, int M, int T2, uint16_t *col,
                               cudaStream_t st) {
    const size_t n = (size_t)B * T2 * 3 * M;
    if (!n) return;
    k_wh_im2col1<<<elt_blocks(n), 256, 0, st>>>(mel, M, T2, n, (bf16 *)col);
    FR_CK_LAUNCH();
}

extern "C" void frk_wh_im2col2(const uint16_t *y, int B, int T2, int d, uint16_t *col,
                               cudaStream_t st) {
    const size_t n = (size_t)B * (T2 / 2) * 3 * d;
    if (!n) return;
    k_wh_im2col2<<<elt_blocks(n), 256, 0, st>>>((const bf16 *)y, T2, d, n, (bf16 *)col);
    FR_CK_LAUNCH();
}

extern "C" void frk_wh_bias_act(const float *a, const float *b, int n, int F, int gelu,
                                const float *add, int add_period, float *of, uint16_t *oh,
                                cudaStream_t st) {
    const size_t N = (size_t)n * F;
    if (!N) return;
    FR_DEV_ASSERT(!add || add_period >= 1);
    k_wh_bias_act<<<elt_blocks(N), 256, 0, st>>>(a, b, N, F, gelu, add, add ? add_period : 1, of,
                                                 (bf16 *)oh);
    FR_CK_LAUNCH();
}

extern "C" void frk_wh_layernorm(const float *x, const float *w, const float *b, int n, int E,
                                 float eps, float *of, uint16_t *oh, cudaStream_t st) {
    if (n <= 0) return;
    k_wh_layernorm<<<n, E >= 1024 ? 256 : 128, 0, st>>>(x, w, b, E, eps, of, (bf16 *)oh);
    FR_CK_LAUNCH();
}

extern "C" void frk_wh_embed(const int32_t *tok, const int32_t *pos, const uint16_t *emb,
                             const float *pos_tab, int R, int d, float *x, cudaStream_t st) {
    const size_t n = (size_t)R * d;
    if (!n) return;
    k_wh_embed<<<elt_blocks(n), 256, 0, st>>>(tok, pos, (const bf16 *)emb, pos_tab, d, n, x);
    FR_CK_LAUNCH();
}

extern "C" void frk_wh_self_kv(const float *qkv, const float *bq, const float *bv,
                               const int32_t *pos, uint16_t *const *base, size_t koff, size_t voff,
                               int R, int d, uint16_t *qh, cudaStream_t st) {
    const size_t n = (size_t)R * d;
    if (!n) return;
    k_wh_self_kv<<<elt_blocks(n), 256, 0, st>>>(qkv, bq, bv, pos, (bf16 *const *)base, koff, voff,
                                                d, n, (bf16 *)qh);
    FR_CK_LAUNCH();
}

extern "C" void frk_wh_argmax(const float *logits, int R, int V, int ld, int32_t *out,
                              cudaStream_t st) {
    if (R <= 0) return;
    FR_DEV_ASSERT(V >= 1 && ld >= V);
    k_wh_argmax<<<R, 256, 0, st>>>(logits, V, ld, out);
    FR_CK_LAUNCH();
}

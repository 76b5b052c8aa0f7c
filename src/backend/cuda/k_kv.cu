/* k_kv.cu — the writes into the paged KV cache: RoPE + KV store (bf16 cache, or staging rows for
 * the int8 store; kernels.h frk_rope_kv) and the int8 KV store with per-block scales
 * (frk_kv_store_i8). RoPE angles are computed in double (pos * inv_freq, then sincos) once per
 * token and shared by all heads, or read from the decoder's cos / sin tables, so long positions
 * keep full precision.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/rope_kv.cuh"

/* ---------------------------------------------------------------- RoPE + KV */
/* One block per token. Shared: cos/sin [D/2]. */
__global__ void k_rope_kv(frk_rope_args a) {
    extern __shared__ float cs[]; /* [D/2] cos, then [D/2] sin */
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x, D = a.D, half = D / 2;
    float *sn = cs + half;
    const int p = a.pos[t];
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        if (a.cos_tab) {
            cs[i] = a.cos_tab[(size_t)p * half + i];
            sn[i] = a.sin_tab[(size_t)p * half + i];
        } else {
            double s, c;
            sincos((double)p * a.inv_freq[i], &s, &c);
            cs[i] = (float)c;
            sn[i] = (float)s;
        }
    }
    __syncthreads();
    const int NQ = a.H * D, NK = a.Hkv * D, W = NQ + 2 * NK;
    const float *row = a.qkv + (size_t)t * W;
    /* destination of K/V for this token */
    bf16 *kdst = nullptr, *vdst = nullptr;
    size_t head_stride = 0;
    rope_kv_dest(a, t, p, &kdst, &vdst, &head_stride);
    /* rotate q and k: pairs */
    const int npairs = (a.H + a.Hkv) * half;
    for (int idx = threadIdx.x; idx < npairs; idx += blockDim.x) {
        const int h = idx / half, i = idx % half;
        const int i0 = a.interleaved ? 2 * i : i, i1 = a.interleaved ? 2 * i + 1 : i + half;
        const int off = h * D; /* q heads then k heads are contiguous in the row */
        const int j0 = a.pair_rows ? 2 * i : i0, j1 = a.pair_rows ? 2 * i + 1 : i1;
        float x0 = row[off + j0], x1 = row[off + j1];
        if (a.bias) {
            x0 += a.bias[off + i0];
            x1 += a.bias[off + i1];
        }
        const float c = cs[i], s = sn[i];
        const float y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
        if (h < a.H) {
            bf16 *q = (bf16 *)a.qout + (size_t)t * NQ + off;
            q[i0] = __float2bfloat16(y0);
            q[i1] = __float2bfloat16(y1);
        } else {
            bf16 *k = kdst + (size_t)(h - a.H) * head_stride;
            k[i0] = __float2bfloat16(y0);
            k[i1] = __float2bfloat16(y1);
        }
    }
    /* v: copy */
    for (int idx = threadIdx.x; idx < NK; idx += blockDim.x) {
        const int h = idx / D, d = idx % D;
        float v = row[NQ + NK + idx];
        if (a.bias) v += a.bias[NQ + NK + idx];
        vdst[(size_t)h * head_stride + d] = __float2bfloat16(v);
    }
}

extern "C" void frk_rope_kv(const frk_rope_args *a, cudaStream_t st) {
    if (a->T <= 0) return;
    FR_DEV_ASSERT(a->D % 2 == 0 && a->D <= 512);
    FR_DEV_ASSERT(a->kc ? (a->vc && a->block_tables && a->tok_seq) : (a->kvnew != nullptr));
    frk_launch(k_rope_kv, dim3(a->T), dim3(128), (size_t)a->D * sizeof(float), st, *a);
}

/* ---------------------------------------------------------------- INT8 KV store */
/* grid (n_seg, Hkv, 2 (K/V)); 128 threads. */
__global__ void k_kv_store_i8(const bf16 *__restrict__ kvnew, const int32_t *__restrict__ seg,
                              const int32_t *__restrict__ seg_start, const int32_t *__restrict__ rows,
                              const int32_t *__restrict__ bt,
                              int bt_stride, int layer, int n_layer, int Hkv, int D, int8_t *kc,
                              int8_t *vc, float *kscale, float *vscale) {
    __shared__ float sh[32];
    pdl_trigger();
    pdl_wait();
    const int si = blockIdx.x, h = blockIdx.y, which = blockIdx.z;
    const int s = seg[si * 4 + 0], bi = seg[si * 4 + 1], f0 = seg[si * 4 + 2], n = seg[si * 4 + 3];
    const int32_t *srows = rows + seg_start[si]; /* kvnew row of the segment's j-th token */
    const int NK = Hkv * D;
    const int blk = bt[(size_t)s * bt_stride + bi];
    const size_t sidx = ((size_t)blk * n_layer + layer) * Hkv + h;
    int8_t *dst = (which ? vc : kc) + sidx * FRK_BLOCK * D;
    float *scale = (which ? vscale : kscale) + sidx;
    /* absmax of the new values */
    float amax = 0.f;
    for (int idx = threadIdx.x; idx < n * D; idx += blockDim.x) {
        const int j = idx / D, d = idx % D;
        const float v = __bfloat162float(kvnew[(size_t)srows[j] * 2 * NK + which * NK + h * D + d]);
        amax = fmaxf(amax, fabsf(v));
    }
    amax = block_max(amax, sh);
    const float s_old = f0 > 0 ? *scale : 0.f;
    const float s_new = fmaxf(s_old, amax / 127.f);
    if (f0 > 0 && s_new > s_old) {
        const float r = s_old / s_new;
        for (int idx = threadIdx.x; idx < f0 * D; idx += blockDim.x) {
            const float q = (float)dst[idx] * r;
            dst[idx] = (int8_t)fminf(127.f, fmaxf(-127.f, rintf(q)));
        }
    }
    const float inv = s_new > 0.f ? 1.f / s_new : 0.f;
    for (int idx = threadIdx.x; idx < n * D; idx += blockDim.x) {
        const int j = idx / D, d = idx % D;
        const float v = __bfloat162float(kvnew[(size_t)srows[j] * 2 * NK + which * NK + h * D + d]);
        dst[(size_t)(f0 + j) * D + d] = (int8_t)fminf(127.f, fmaxf(-127.f, rintf(v * inv)));
    }
    __syncthreads(); /* every thread read *scale (s_old) before it changes */
    if (threadIdx.x == 0) *scale = s_new;
}

extern "C" void frk_kv_store_i8(const uint16_t *kvnew, const int32_t *seg, const int32_t *seg_start,
                                const int32_t *rows, int n_seg, const int32_t *block_tables, int bt_stride, int layer,
                                int n_layer, int Hkv, int D, int8_t *kc, int8_t *vc, float *kscale,
                                float *vscale, cudaStream_t st) {
    if (n_seg <= 0) return;
    dim3 grid(n_seg, Hkv, 2);
    frk_launch(k_kv_store_i8, grid, dim3(128), 0, st, (const bf16 *)kvnew, seg, seg_start, rows,
               block_tables, bt_stride, layer, n_layer, Hkv, D, kc, vc, kscale, vscale);
}

/* k_mrope.cu — M-RoPE + KV store for the batches that carry M-RoPE positions (kernels.h
 * frk_mrope_kv; Qwen2-VL / Qwen2.5-VL): k_rope_kv's work (q/k/v bias, rotation, K/V into the
 * paged cache or the int8 staging rows, roped q out) with each rotation pair's angle taken from
 * the position row of its section (t for pairs [0, s0), h for [s0, s0 + s1), w for the rest) as
 * the CPU decoder's fr_cpu_rope_mrope does. The KV slot stays the token's pos. A separate kernel
 * so that the text path's rope (k_kv.cu, the streamed qkv epilogue of k_stream.cu) is untouched.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/rope_kv.cuh"

/* One block per token. Shared: cos/sin [D/2] of this token's three position rows. */
__global__ void k_mrope_kv(frk_rope_args a, const int32_t *__restrict__ rope_pos, int rp_stride,
                           int s0, int s1) {
    extern __shared__ float cs[]; /* [D/2] cos, then [D/2] sin */
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x, D = a.D, half = D / 2;
    float *sn = cs + half;
    const int b1 = s0, b2 = s0 + s1;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        const int r = i < b1 ? 0 : i < b2 ? 1 : 2;
        const int p = rope_pos[(size_t)r * rp_stride + t];
        cs[i] = a.cos_tab[(size_t)p * half + i];
        sn[i] = a.sin_tab[(size_t)p * half + i];
    }
    __syncthreads();
    const int NQ = a.H * D, NK = a.Hkv * D, W = NQ + 2 * NK;
    const float *row = a.qkv + (size_t)t * W;
    bf16 *kdst = nullptr, *vdst = nullptr;
    size_t head_stride = 0;
    rope_kv_dest(a, t, a.pos[t], &kdst, &vdst, &head_stride);
    const int npairs = (a.H + a.Hkv) * half;
    for (int idx = threadIdx.x; idx < npairs; idx += blockDim.x) {
        const int h = idx / half, i = idx % half;
        const int i0 = a.interleaved ? 2 * i : i, i1 = a.interleaved ? 2 * i + 1 : i + half;
        const int off = h * D;
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
    for (int idx = threadIdx.x; idx < NK; idx += blockDim.x) {
        const int h = idx / D, d = idx % D;
        float v = row[NQ + NK + idx];
        if (a.bias) v += a.bias[NQ + NK + idx];
        vdst[(size_t)h * head_stride + d] = __float2bfloat16(v);
    }
}

extern "C" void frk_mrope_kv(const frk_rope_args *a, const int32_t *rope_pos, int rp_stride,
                             const int sect[3], cudaStream_t st) {
    if (a->T <= 0) return;
    FR_DEV_ASSERT(a->D % 2 == 0 && a->D <= 512 && a->cos_tab && a->sin_tab && rope_pos);
    FR_DEV_ASSERT(rp_stride >= a->T && sect[0] >= 0 && sect[1] >= 0 && sect[2] >= 0 &&
                  sect[0] + sect[1] + sect[2] == a->D / 2);
    FR_DEV_ASSERT(a->kc ? (a->vc && a->block_tables && a->tok_seq) : (a->kvnew != nullptr));
    frk_launch(k_mrope_kv, dim3(a->T), dim3(128), (size_t)a->D * sizeof(float), st, *a, rope_pos,
               rp_stride, sect[0], sect[1]);
}

/* k_wh_attn.cu — attention of independent query rows over their own keys (whisper_kernels.h
 * frk_wh_attention): the decoder's self-attention (each row over its sequence's cache up to its
 * position) and cross-attention (over its window's encoder keys), and the encoder's attention
 * when the head size is no multiple of 16 (the tensor-core kernel k_vit_attn needs one).
 *
 * Flash-style: no score matrix. A block of NW = 8 warps serves one (row, head). Lane l holds
 * dimensions l, l + 32, l + 64, l + 96 of q (scaled) and of its output accumulator; warp w takes
 * chunks of KU = 4 consecutive keys (w KU, w KU + 32, ...): per key the lanes' partial dot
 * products are summed by shuffles, then the warp folds the chunk's scores into its running
 * maximum m, sum l and accumulator o (fp32, exp of the score less the running maximum). At the end the 8 partial states are merged through shared
 * memory: M = max m_w, out = sum_w o_w e^(m_w - M) / sum_w l_w e^(m_w - M). A warp with no key
 * has m = -inf and contributes nothing.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/whisper_kernels.h"

#define NW 8
#define KU 4 /* keys a warp takes at once */
#define DMAX FRK_WH_MAX_HEAD_DIM

__global__ void __launch_bounds__(NW * 32)
k_wh_attn(const bf16 *__restrict__ q, int ldq, const bf16 *const *__restrict__ base, size_t koff,
          size_t voff, int ldk, const int32_t *__restrict__ len, int D, float scale,
          bf16 *__restrict__ out, int ldo) {
    __shared__ float sm[NW], sl[NW];
    __shared__ float so[NW][DMAX];
    const int r = blockIdx.x, h = blockIdx.y;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int L = len[r];
    const bf16 *K = base[r] + koff + (size_t)h * D, *V = base[r] + voff + (size_t)h * D;
    const bf16 *qr = q + (size_t)r * ldq + (size_t)h * D;
    float qv[DMAX / 32], o[DMAX / 32];
#pragma unroll
    for (int i = 0; i < DMAX / 32; i++) {
        const int d = lane + 32 * i;
        qv[i] = d < D ? __bfloat162float(qr[d]) * scale : 0.f;
        o[i] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    /* warp w takes the chunks of KU consecutive keys starting at w KU, w KU + NW KU, ...; the KU
     * dot products of a chunk are independent (their loads and shuffles overlap), then one
     * rescale folds the chunk in. Whether a key exists is the same for the whole warp. */
    for (int j0 = w * KU; j0 < L; j0 += NW * KU) {
        float s[KU];
#pragma unroll
        for (int u = 0; u < KU; u++) {
            s[u] = 0.f;
            if (j0 + u < L) {
                const bf16 *kr = K + (size_t)(j0 + u) * ldk;
#pragma unroll
                for (int i = 0; i < DMAX / 32; i++) {
                    const int d = lane + 32 * i;
                    if (d < D) s[u] = fmaf(qv[i], __bfloat162float(kr[d]), s[u]);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < KU; u++) s[u] = warp_sum(s[u]);
        float mx = s[0]; /* key j0 exists */
#pragma unroll
        for (int u = 1; u < KU; u++)
            if (j0 + u < L) mx = fmaxf(mx, s[u]);
        const float mn = fmaxf(m, mx);
        const float c = __expf(m - mn); /* 0 on the first chunk */
        float p[KU];
#pragma unroll
        for (int u = 0; u < KU; u++) p[u] = j0 + u < L ? __expf(s[u] - mn) : 0.f;
        float ps = 0.f;
#pragma unroll
        for (int u = 0; u < KU; u++) ps += p[u];
        l = l * c + ps;
#pragma unroll
        for (int i = 0; i < DMAX / 32; i++) {
            const int d = lane + 32 * i;
            float acc = o[i] * c;
            if (d < D)
#pragma unroll
                for (int u = 0; u < KU; u++)
                    if (j0 + u < L) acc = fmaf(p[u], __bfloat162float(V[(size_t)(j0 + u) * ldk + d]), acc);
            o[i] = acc;
        }
        m = mn;
    }
    if (lane == 0) sm[w] = m, sl[w] = l;
#pragma unroll
    for (int i = 0; i < DMAX / 32; i++) so[w][lane + 32 * i] = o[i];
    __syncthreads();
    float M = -INFINITY;
    for (int k = 0; k < NW; k++) M = fmaxf(M, sm[k]);
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.f, sum = 0.f;
        for (int k = 0; k < NW; k++) {
            if (sm[k] == -INFINITY) continue;
            const float e = __expf(sm[k] - M);
            acc = fmaf(so[k][d], e, acc);
            sum = fmaf(sl[k], e, sum);
        }
        out[(size_t)r * ldo + (size_t)h * D + d] = __float2bfloat16(sum > 0.f ? acc / sum : 0.f);
    }
}

extern "C" void frk_wh_attention(const uint16_t *q, int ldq, const uint16_t *const *base,
                                 size_t koff, size_t voff, int ldk, const int32_t *len, int R,
                                 int n_head, int D, float scale, uint16_t *out, int ldo,
                                 cudaStream_t st) {
    if (R <= 0) return;
    FR_DEV_ASSERT(D >= 1 && D <= DMAX && n_head >= 1);
    const dim3 grid((unsigned)R, (unsigned)n_head);
    k_wh_attn<<<grid, NW * 32, 0, st>>>((const bf16 *)q, ldq, (const bf16 *const *)base, koff, voff,
                                        ldk, len, D, scale, (bf16 *)out, ldo);
    FR_CK_LAUNCH();
}

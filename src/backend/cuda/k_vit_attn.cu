/* k_vit_attn.cu — the vision tower's attention over variable-length segments (vit_kernels.h
 * frk_vit_attention): windows or whole frames, non-causal, fp32 throughout (flash-style: the
 * softmax runs online over key tiles, no score matrix exists).
 *
 * Grid (segments x query tiles of ROWS, heads); a block of ROWS warps, one query row each.
 * Per key tile of KT = 32 keys the block stages K and V of its segment and head in shared memory
 * (K rows padded by one float against bank conflicts); lane j scores key j against the warp's
 * query (held in shared memory), the warp folds the tile into its running max m, sum l and
 * output accumulators (lane owns dims lane + 32 i, i < DV = ceil(D / 32)), then writes
 * out = acc / l. Query tiles past a segment's end return at once (the grid is sized by the
 * longest segment). CUDA cores only: the tensor-core version is the next step (docs/CUDA.md).
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/vit_kernels.h"

#define ROWS 8 /* query rows (warps) per block */
#define KT 32  /* keys per tile */
#define DMAX FRK_VIT_MAX_HEAD_DIM

template <int DV>
__global__ void __launch_bounds__(ROWS * 32)
k_vit_attn(const float *__restrict__ qkv, const int32_t *__restrict__ cu, int tiles, int n_head,
           int D, float scale, bf16 *__restrict__ out) {
    __shared__ float Ks[KT][DMAX + 1];
    __shared__ float Vs[KT][DMAX];
    __shared__ float Qs[ROWS][DMAX];
    const int seg = blockIdx.x / tiles, tile = blockIdx.x % tiles, h = blockIdx.y;
    const int a = cu[seg], len = cu[seg + 1] - a;
    const int q0 = tile * ROWS;
    if (q0 >= len) return; /* the whole block: no barrier is skipped by part of it */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int H = n_head * D;
    const size_t st = 3 * (size_t)H;
    const int row = q0 + warp; /* inside the segment; >= len: computes, writes nothing */
    for (int c = lane; c < D; c += 32)
        Qs[warp][c] = row < len ? qkv[(size_t)(a + row) * st + h * D + c] : 0.f;
    float m = -INFINITY, l = 0.f, acc[DV];
#pragma unroll
    for (int i = 0; i < DV; i++) acc[i] = 0.f;
    for (int k0 = 0; k0 < len; k0 += KT) {
        __syncthreads(); /* the previous tile is consumed (and Qs written, the first time) */
        for (int idx = threadIdx.x; idx < KT * D; idx += ROWS * 32) {
            const int j = idx / D, c = idx % D;
            const bool in = k0 + j < len;
            const float *kr = qkv + (size_t)(a + k0 + j) * st + H + h * D;
            Ks[j][c] = in ? kr[c] : 0.f;
            Vs[j][c] = in ? kr[H + c] : 0.f;
        }
        __syncthreads();
        float s = -INFINITY;
        if (k0 + lane < len) {
            float d = 0.f;
            for (int c = 0; c < D; c++) d += Qs[warp][c] * Ks[lane][c];
            s = d * scale;
        }
        const float mn = fmaxf(m, warp_max(s)); /* finite: the tile holds >= 1 key */
        const float corr = expf(m - mn);        /* 0 on the first tile (m = -inf) */
        const float p = k0 + lane < len ? expf(s - mn) : 0.f;
        l = l * corr + warp_sum(p);
        m = mn;
#pragma unroll
        for (int i = 0; i < DV; i++) acc[i] *= corr;
        const int nk = min(KT, len - k0);
        for (int j = 0; j < nk; j++) {
            const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
            for (int i = 0; i < DV; i++) {
                const int c = lane + 32 * i;
                if (c < D) acc[i] += pj * Vs[j][c];
            }
        }
    }
    if (row >= len) return;
    const float inv = 1.f / l;
    bf16 *o = out + (size_t)(a + row) * H + h * D;
#pragma unroll
    for (int i = 0; i < DV; i++) {
        const int c = lane + 32 * i;
        if (c < D) o[c] = __float2bfloat16(acc[i] * inv);
    }
}

extern "C" void frk_vit_attention(const float *qkv, const int32_t *cu, int n_seg, int max_len,
                                  int n_head, int D, uint16_t *out, cudaStream_t st) {
    if (n_seg <= 0 || max_len <= 0) return;
    FR_DEV_ASSERT(D >= 1 && D <= DMAX && n_head >= 1);
    const int tiles = fr_cdiv(max_len, ROWS);
    const dim3 grid((unsigned)((long)n_seg * tiles), (unsigned)n_head);
    const float scale = 1.f / sqrtf((float)D);
    bf16 *o = (bf16 *)out;
    switch ((D + 31) / 32) {
    case 1: k_vit_attn<1><<<grid, ROWS * 32, 0, st>>>(qkv, cu, tiles, n_head, D, scale, o); break;
    case 2: k_vit_attn<2><<<grid, ROWS * 32, 0, st>>>(qkv, cu, tiles, n_head, D, scale, o); break;
    case 3: k_vit_attn<3><<<grid, ROWS * 32, 0, st>>>(qkv, cu, tiles, n_head, D, scale, o); break;
    default: k_vit_attn<4><<<grid, ROWS * 32, 0, st>>>(qkv, cu, tiles, n_head, D, scale, o); break;
    }
    FR_CK_LAUNCH();
}

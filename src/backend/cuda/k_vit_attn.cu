/* k_vit_attn.cu — the vision tower's attention over variable-length segments (vit_kernels.h
 * frk_vit_attention): windows or whole frames, non-causal, flash-style on the tensor cores
 * (bf16 mma.sync m16n8k16, fp32 accumulators, online softmax; no score matrix exists).
 *
 * Grid (segments x query tiles of QT = 64 rows, heads); a block of 4 warps, 16 query rows each.
 * Each warp keeps its Q rows as A fragments in registers for the whole segment. Per key tile of
 * KT = 64 keys the block stages K (row-major, [key][dim]) and V transposed ([dim][key]) in shared
 * memory, rows padded by 8 bf16 so the fragment loads hit 32 different banks. The warp computes
 * S = Q K^T (16 x 64, 8 n-tiles), scales it into the exp2 domain, folds it into its running row
 * max m and partial sum l (each thread holds rows g and g + 8 of its quad's columns; the quads
 * reduce m by shuffles, l only at the end), turns S into bf16 P fragments in registers (the C
 * layout of two n-tiles is the A layout of one k-step) and accumulates O += P V (D / 8 n-tiles).
 * Keys past the segment's end score -inf; query rows past it compute on zeros and write nothing;
 * query tiles past a segment's end return at once (the grid is sized by the longest segment).
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/vit_kernels.h"

#define QT 64  /* query rows per block: 4 warps x 16 */
#define KT 64  /* keys per tile */
#define PAD 8  /* bf16 padding of the shared rows */

static __device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0,
                                                uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x = lo (low half) */
    return *(const uint32_t *)&v;
}

static __device__ __forceinline__ uint32_t ld32(const bf16 *p) { return *(const uint32_t *)p; }

/* DK = D / 16 k-steps of the head dimension. */
template <int DK>
__global__ void __launch_bounds__(128)
k_vit_fa(const bf16 *__restrict__ qkv, const int32_t *__restrict__ cu, int tiles, int n_head,
         float scale_log2, bf16 *__restrict__ out) {
    constexpr int D = 16 * DK, DN = 2 * DK; /* D / 8 n-tiles of the output */
    __shared__ __align__(16) bf16 Ks[KT][D + PAD];
    __shared__ __align__(16) bf16 Vt[D][KT + PAD];
    const int seg = blockIdx.x / tiles, tile = blockIdx.x % tiles, h = blockIdx.y;
    const int a = cu[seg], len = cu[seg + 1] - a;
    const int q0 = tile * QT;
    if (q0 >= len) return; /* the whole block: no barrier is skipped by part of it */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int H = n_head * D;
    const size_t st = 3 * (size_t)H;
    const int r0 = q0 + warp * 16 + g, r1 = r0 + 8; /* this thread's two query rows */
    const bf16 *q_r0 = qkv + (size_t)(a + r0) * st + h * D, *q_r1 = qkv + (size_t)(a + r1) * st + h * D;
    uint32_t qa[DK][4];
#pragma unroll
    for (int kk = 0; kk < DK; kk++) {
        const int c = 16 * kk + 2 * t;
        qa[kk][0] = r0 < len ? ld32(q_r0 + c) : 0u;
        qa[kk][1] = r1 < len ? ld32(q_r1 + c) : 0u;
        qa[kk][2] = r0 < len ? ld32(q_r0 + c + 8) : 0u;
        qa[kk][3] = r1 < len ? ld32(q_r1 + c + 8) : 0u;
    }
    float o[DN][4];
#pragma unroll
    for (int n = 0; n < DN; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    for (int k0 = 0; k0 < len; k0 += KT) {
        __syncthreads(); /* the previous tile is consumed */
        /* K and V of keys k0 .. k0 + KT: 16-byte chunks of 8 dims */
        for (int idx = threadIdx.x; idx < KT * (D / 8); idx += 128) {
            const int j = idx / (D / 8), c = (idx % (D / 8)) * 8;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
            if (k0 + j < len) {
                const bf16 *kr = qkv + (size_t)(a + k0 + j) * st + H + h * D + c;
                kv = *(const uint4 *)kr;
                vv = *(const uint4 *)(kr + H);
            }
            *(uint4 *)&Ks[j][c] = kv;
            const bf16 *ve = (const bf16 *)&vv;
#pragma unroll
            for (int i = 0; i < 8; i++) Vt[c + i][j] = ve[i];
        }
        __syncthreads();
        float s[KT / 8][4];
#pragma unroll
        for (int j = 0; j < KT / 8; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < DK; kk++)
                mma_bf16(s[j], qa[kk], ld32(&Ks[8 * j + g][16 * kk + 2 * t]),
                         ld32(&Ks[8 * j + g][16 * kk + 8 + 2 * t]));
        }
        /* scale into the exp2 domain, mask keys past the end, row maxima */
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int j = 0; j < KT / 8; j++) {
            const int key = k0 + 8 * j + 2 * t;
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const bool in = key + e < len;
                s[j][e] = in ? s[j][e] * scale_log2 : -INFINITY;
                s[j][2 + e] = in ? s[j][2 + e] * scale_log2 : -INFINITY;
                mx0 = fmaxf(mx0, s[j][e]);
                mx1 = fmaxf(mx1, s[j][2 + e]);
            }
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1); /* finite: >= 1 key per tile */
        const float c0 = exp2f(m0 - mn0), c1 = exp2f(m1 - mn1); /* 0 on the first tile */
        m0 = mn0, m1 = mn1;
        l0 *= c0, l1 *= c1;
#pragma unroll
        for (int n = 0; n < DN; n++) o[n][0] *= c0, o[n][1] *= c0, o[n][2] *= c1, o[n][3] *= c1;
        uint32_t pa[KT / 16][4];
#pragma unroll
        for (int j = 0; j < KT / 8; j++) {
            const float p0 = exp2f(s[j][0] - mn0), p1 = exp2f(s[j][1] - mn0);
            const float p2 = exp2f(s[j][2] - mn1), p3 = exp2f(s[j][3] - mn1);
            l0 += p0 + p1, l1 += p2 + p3;
            pa[j / 2][(j & 1) * 2 + 0] = pack_bf16(p0, p1);
            pa[j / 2][(j & 1) * 2 + 1] = pack_bf16(p2, p3);
        }
#pragma unroll
        for (int kk = 0; kk < KT / 16; kk++)
#pragma unroll
            for (int n = 0; n < DN; n++)
                mma_bf16(o[n], pa[kk], ld32(&Vt[8 * n + g][16 * kk + 2 * t]),
                         ld32(&Vt[8 * n + g][16 * kk + 8 + 2 * t]));
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = 1.f / l0, i1 = 1.f / l1;
    bf16 *o0 = out + (size_t)(a + r0) * H + h * D, *o1 = out + (size_t)(a + r1) * H + h * D;
#pragma unroll
    for (int n = 0; n < DN; n++) {
        const int c = 8 * n + 2 * t;
        if (r0 < len) *(uint32_t *)(o0 + c) = pack_bf16(o[n][0] * i0, o[n][1] * i0);
        if (r1 < len) *(uint32_t *)(o1 + c) = pack_bf16(o[n][2] * i1, o[n][3] * i1);
    }
}

extern "C" void frk_vit_attention(const uint16_t *qkv, const int32_t *cu, int n_seg, int max_len,
                                  int n_head, int D, uint16_t *out, cudaStream_t st) {
    if (n_seg <= 0 || max_len <= 0) return;
    FR_DEV_ASSERT(D >= 16 && D <= FRK_VIT_MAX_HEAD_DIM && D % 16 == 0 && n_head >= 1);
    const int tiles = fr_cdiv(max_len, QT);
    const dim3 grid((unsigned)((long)n_seg * tiles), (unsigned)n_head);
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)D);
    const bf16 *q = (const bf16 *)qkv;
    bf16 *o = (bf16 *)out;
    switch (D / 16) {
    case 1: k_vit_fa<1><<<grid, 128, 0, st>>>(q, cu, tiles, n_head, scale_log2, o); break;
    case 2: k_vit_fa<2><<<grid, 128, 0, st>>>(q, cu, tiles, n_head, scale_log2, o); break;
    case 3: k_vit_fa<3><<<grid, 128, 0, st>>>(q, cu, tiles, n_head, scale_log2, o); break;
    case 4: k_vit_fa<4><<<grid, 128, 0, st>>>(q, cu, tiles, n_head, scale_log2, o); break;
    case 5: k_vit_fa<5><<<grid, 128, 0, st>>>(q, cu, tiles, n_head, scale_log2, o); break;
    case 6: k_vit_fa<6><<<grid, 128, 0, st>>>(q, cu, tiles, n_head, scale_log2, o); break;
    case 7: k_vit_fa<7><<<grid, 128, 0, st>>>(q, cu, tiles, n_head, scale_log2, o); break;
    default: k_vit_fa<8><<<grid, 128, 0, st>>>(q, cu, tiles, n_head, scale_log2, o); break;
    }
    FR_CK_LAUNCH();
}

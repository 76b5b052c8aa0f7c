/* k_gemv.cu — matrix-vector products for decode (batch 1..64), bf16 and weight-only INT8/INT4.
 *
 * BF16 (nb <= 4): batch-1 decode reads every weight once per token, so the kernel is a stream:
 * each warp owns 2 rows, each lane issues 16-byte loads (ld.global.nc.L1::no_allocate, so the
 * activations keep L1), 4 per row in flight before the first use, fp32 FMAs, one warp reduction
 * per row at the end. x (bf16, tiny) is re-read through L1. Epilogues: store, accumulate into the
 * residual stream (y += W x, which fuses the residual add), or SwiGLU over interleaved gate/up
 * rows (act[i] = silu(y[2i]) * y[2i+1]).
 *
 * INT8 / INT4 (nb <= 64): dequantisation arithmetic would make a plain FMA loop instruction-bound
 * at INT4 rates, so the dot products run on the tensor cores: mma.sync m16n8k16 f16 x f16 -> f32.
 * The weights are stored tile-permuted so that the 16 bytes a lane loads are exactly its A
 * fragments for 2 (int8) or 4 (int4) k-steps; q is turned into f16 (1024 + q) with one lop3 /
 * prmt per pair and the zero point subtracted with one hsub2 (exact), so the MMA computes
 * sum (q - z) x exactly in fp32 per group; the group scale is applied to the fp32 partial
 * afterwards. The batch is the MMA's N dimension (8 per n-tile, up to 8 n-tiles). A block is 8
 * warps on one 16-row tile, splitting K by groups; partials meet in shared memory.
 *
 * The packed layout is documented in k_quant.cu (its owner: quantiser, packer, dequantiser).
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_frag.cuh"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ bf16 GEMV */

static __device__ __forceinline__ float silu(float g) { return g / (1.f + __expf(-g)); }

/* R rows per warp, U 16-byte loads per row per lane per round, DB: the next round is loaded
 * before the current one is computed (two rounds in flight), MINB: blocks per SM to fit. The first
 * round is issued before pdl_wait. Two rows per warp, four loads per row per round: batch 1 in
 * single rounds at 4 blocks per SM, batches 2-4 double-buffered (the fastest in the full
 * decode step on an H200 of the four shapes measured, run 2; the unfused path). */
template <int NB, int MODE, int R, int U, bool DB, int MINB>
__global__ void __launch_bounds__(256, MINB) k_gemv_bf16(const bf16 *__restrict__ W, int M, int K,
                                                         const bf16 *__restrict__ x, int ldx,
                                                         void *__restrict__ out, int ldo) {
    pdl_trigger();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r0 = (blockIdx.x * 8 + warp) * R;
    const bool live = r0 < M;
    const uint4 *w[R];
#pragma unroll
    for (int r = 0; r < R; r++) w[r] = (const uint4 *)(W + (size_t)(r0 + r < M ? r0 + r : (live ? r0 : 0)) * K);
    const int nv = K / 8;
    float acc[R][NB];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int n = 0; n < NB; n++) acc[r][n] = 0.f;
    uint4 a[R][U];
#pragma unroll
    for (int u = 0; u < U; u++) { /* first round before the wait: weights do not depend on it */
        const int i = u * 32 + lane;
#pragma unroll
        for (int r = 0; r < R; r++) a[r][u] = live && i < nv ? ld_stream16(w[r] + i) : make_uint4(0, 0, 0, 0);
    }
    pdl_wait();
    if (!live) return;
    for (int base = 0; base < nv; base += 32 * U) {
        uint4 na[R][U];
        if (DB) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int i = base + 32 * U + u * 32 + lane;
#pragma unroll
                for (int r = 0; r < R; r++) na[r][u] = i < nv ? ld_stream16(w[r] + i) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int i = base + u * 32 + lane;
            if (i < nv) {
#pragma unroll
                for (int n = 0; n < NB; n++) {
                    const uint4 xv = __ldg((const uint4 *)(x + (size_t)n * ldx) + i);
#pragma unroll
                    for (int r = 0; r < R; r++) acc[r][n] = fr_dot8(a[r][u], xv, acc[r][n]);
                }
            }
        }
        if (DB) {
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int r = 0; r < R; r++) a[r][u] = na[r][u];
        } else if (base + 32 * U < nv) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int i = base + 32 * U + u * 32 + lane;
#pragma unroll
                for (int r = 0; r < R; r++) a[r][u] = i < nv ? ld_stream16(w[r] + i) : make_uint4(0, 0, 0, 0);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int n = 0; n < NB; n++) acc[r][n] = warp_sum(acc[r][n]);
    if (lane != 0) return;
#pragma unroll
    for (int n = 0; n < NB; n++) {
        if (MODE == FRK_OUT_SWIGLU) {
            ((bf16 *)out)[(size_t)n * ldo + r0 / 2] = __float2bfloat16(silu(acc[0][n]) * acc[R - 1][n]);
        } else {
            float *o = (float *)out + (size_t)n * ldo;
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (r0 + r >= M) continue;
                if (MODE == FRK_OUT_ACC)
                    o[r0 + r] += acc[r][n];
                else
                    o[r0 + r] = acc[r][n];
            }
        }
    }
}

template <int NB, int R, int U, bool DB, int MINB>
static void gemv_bf16_v(const bf16 *W, int M, int K, const bf16 *x, int ldx, void *out, int ldo,
                        int mode, cudaStream_t st) {
    const dim3 blocks(fr_cdiv(M, 8 * R)), th(256);
    if (mode == FRK_OUT_STORE)
        frk_launch(k_gemv_bf16<NB, FRK_OUT_STORE, R, U, DB, MINB>, blocks, th, 0, st, W, M, K, x, ldx, out, ldo);
    else if (mode == FRK_OUT_ACC)
        frk_launch(k_gemv_bf16<NB, FRK_OUT_ACC, R, U, DB, MINB>, blocks, th, 0, st, W, M, K, x, ldx, out, ldo);
    else
        frk_launch(k_gemv_bf16<NB, FRK_OUT_SWIGLU, R, U, DB, MINB>, blocks, th, 0, st, W, M, K, x, ldx, out, ldo);
}

extern "C" void frk_gemv_bf16(const uint16_t *W, int M, int K, const uint16_t *x, int ldx, int nb,
                              void *out, int ldo, int mode, cudaStream_t st) {
    if (nb <= 0 || M <= 0) return;
    FR_DEV_ASSERT(K % 8 == 0 && ldx % 8 == 0 && nb <= 4);
    FR_DEV_ASSERT(mode != FRK_OUT_SWIGLU || M % 2 == 0);
    const bf16 *w = (const bf16 *)W, *xx = (const bf16 *)x;
    switch (nb) {
    case 1: gemv_bf16_v<1, 2, 4, false, 4>(w, M, K, xx, ldx, out, ldo, mode, st); break;
    case 2: gemv_bf16_v<2, 2, 4, true, 1>(w, M, K, xx, ldx, out, ldo, mode, st); break;
    case 3: gemv_bf16_v<3, 2, 4, true, 1>(w, M, K, xx, ldx, out, ldo, mode, st); break;
    default: gemv_bf16_v<4, 2, 4, true, 1>(w, M, K, xx, ldx, out, ldo, mode, st); break;
    }
}

/* ------------------------------------------------------------------ INT8 / INT4 GEMV (mma) */
static __device__ __forceinline__ uint32_t bf2_to_h2(uint32_t u) {
    half2 h = __floats2half2_rn(bf_lo(u), bf_hi(u));
    return *(uint32_t *)&h;
}

template <int BITS, int NT, int MODE>
__global__ void __launch_bounds__(256) k_gemv_q(const uint4 *__restrict__ Wp,
                                                const uint32_t *__restrict__ sz, int M, int K,
                                                int NG, const bf16 *__restrict__ x, int ldx, int nb,
                                                void *__restrict__ out, int ldo) {
    constexpr int CPG = BITS == 4 ? 2 : 4;          /* 16-byte chunks per lane per group */
    constexpr int KPC = 8 / CPG;                    /* k-steps per chunk */
    constexpr int GB = (NT <= 2 ? 8 : 4) / CPG;     /* groups per prefetch batch */
    constexpr int CB = GB * CPG;                    /* chunks per batch (8 or 4) */
    __shared__ float red[8][NT][32][4];
    pdl_trigger();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
    const int rt = blockIdx.x;
    const int col0 = blockIdx.y * NT * 8;
    const int g0 = warp * NG / 8, g1 = (warp + 1) * NG / 8;
    const uint4 *wb = Wp + (size_t)rt * NG * CPG * 32 + lane;
    const uint32_t *szb = sz + (size_t)rt * NG * 16;
    float acc[NT][4];
#pragma unroll
    for (int i = 0; i < NT; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    /* batch b covers groups g0 + b*GB ... ; all its chunks and scale words are loaded at once, and
     * the next batch is in flight while this one is computed */
    uint4 cur[CB];
    uint32_t cs0[GB], cs1[GB];
#pragma unroll
    for (int c = 0; c < CB; c++) {
        const int G = g0 + c / CPG;
        cur[c] = G < g1 ? ld_stream16(wb + ((size_t)G * CPG + c % CPG) * 32) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int gi = 0; gi < GB; gi++) {
        const int G = g0 + gi;
        cs0[gi] = G < g1 ? szb[G * 16 + gq] : 0u;
        cs1[gi] = G < g1 ? szb[G * 16 + gq + 8] : 0u;
    }
    pdl_wait();
    { /* pull this warp's slice of x into L1 now: the k-step loads below then hit L1 */
        const int nrow = min(nb - col0, NT * 8), lines = (g1 - g0) * 2; /* 128-byte lines per row */
        for (int i = lane; i < nrow * lines; i += 32) {
            const int n = col0 + i / lines, k = g0 * FRK_GROUP + (i % lines) * 64;
            if (k < K) asm volatile("prefetch.global.L1 [%0];" ::"l"(x + (size_t)n * ldx + k));
        }
    }
    for (int Gb = g0; Gb < g1; Gb += GB) {
        uint4 nxt[CB];
        uint32_t ns0[GB], ns1[GB];
#pragma unroll
        for (int c = 0; c < CB; c++) {
            const int G = Gb + GB + c / CPG;
            nxt[c] = G < g1 ? ld_stream16(wb + ((size_t)G * CPG + c % CPG) * 32) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int gi = 0; gi < GB; gi++) {
            const int G = Gb + GB + gi;
            ns0[gi] = G < g1 ? szb[G * 16 + gq] : 0u;
            ns1[gi] = G < g1 ? szb[G * 16 + gq + 8] : 0u;
        }
#pragma unroll
        for (int gi = 0; gi < GB; gi++) {
            const int G = Gb + gi;
            if (G >= g1) break;
            const uint32_t s0 = cs0[gi], s1 = cs1[gi];
            const uint32_t zz0 = __byte_perm(s0, s0, 0x3232), zz1 = __byte_perm(s1, s1, 0x3232);
            const float sc0 = __half2float(__ushort_as_half((unsigned short)(s0 & 0xffffu)));
            const float sc1 = __half2float(__ushort_as_half((unsigned short)(s1 & 0xffffu)));
            float c[NT][4];
#pragma unroll
            for (int i = 0; i < NT; i++) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.f;
#pragma unroll
            for (int ci = 0; ci < CPG; ci++) {
                const uint4 ch = cur[gi * CPG + ci];
                const uint32_t wd[4] = {ch.x, ch.y, ch.z, ch.w};
#pragma unroll
                for (int j = 0; j < KPC; j++) {
                    uint32_t A[4];
                    qf_frag<BITS>(wd, j, zz0, zz1, A);
                    const int k = (G * 8 + ci * KPC + j) * 16 + 2 * tq;
#pragma unroll
                    for (int nt = 0; nt < NT; nt++) {
                        const int n = col0 + nt * 8 + gq;
                        uint32_t b0 = 0, b1 = 0;
                        if (n < nb) {
                            const bf16 *xr = x + (size_t)n * ldx;
                            if (k < K) b0 = bf2_to_h2(__ldg((const unsigned int *)(xr + k)));
                            if (k + 8 < K) b1 = bf2_to_h2(__ldg((const unsigned int *)(xr + k + 8)));
                        }
                        qf_mma(c[nt], A, b0, b1);
                    }
                }
            }
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                acc[nt][0] = fmaf(sc0, c[nt][0], acc[nt][0]);
                acc[nt][1] = fmaf(sc0, c[nt][1], acc[nt][1]);
                acc[nt][2] = fmaf(sc1, c[nt][2], acc[nt][2]);
                acc[nt][3] = fmaf(sc1, c[nt][3], acc[nt][3]);
            }
        }
#pragma unroll
        for (int c = 0; c < CB; c++) cur[c] = nxt[c];
#pragma unroll
        for (int gi = 0; gi < GB; gi++) {
            cs0[gi] = ns0[gi];
            cs1[gi] = ns1[gi];
        }
    }
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) red[warp][nt][lane][e] = acc[nt][e];
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * 8 * NT; i += 256) {
        const int nt = i / 128, r = (i / 8) % 16, cc = i % 8;
        const int n = col0 + nt * 8 + cc, row = rt * 16 + r;
        if (n >= nb || row >= M) continue;
        if (MODE == FRK_OUT_SWIGLU && (r & 1)) continue;
        float v = 0.f;
        {
            const int ln = (r % 8) * 4 + cc / 2, e = (r / 8) * 2 + (cc % 2);
#pragma unroll
            for (int w = 0; w < 8; w++) v += red[w][nt][ln][e];
        }
        if (MODE == FRK_OUT_SWIGLU) {
            const int r1 = r + 1;
            const int ln = (r1 % 8) * 4 + cc / 2, e = (r1 / 8) * 2 + (cc % 2);
            float u = 0.f;
#pragma unroll
            for (int w = 0; w < 8; w++) u += red[w][nt][ln][e];
            ((bf16 *)out)[(size_t)n * ldo + row / 2] = __float2bfloat16(silu(v) * u);
        } else if (MODE == FRK_OUT_ACC) {
            ((float *)out)[(size_t)n * ldo + row] += v;
        } else {
            ((float *)out)[(size_t)n * ldo + row] = v;
        }
    }
}

template <int BITS, int NT>
static void gemv_q_nt(const void *packed, const uint32_t *sz, int M, int K, const uint16_t *x,
                      int ldx, int nb, void *out, int ldo, int mode, cudaStream_t st) {
    const int NG = fr_cdiv(K, FRK_GROUP);
    dim3 grid(fr_cdiv(M, 16), fr_cdiv(nb, NT * 8));
    const uint4 *w = (const uint4 *)packed;
    const bf16 *xx = (const bf16 *)x;
    if (mode == FRK_OUT_STORE)
        frk_launch(k_gemv_q<BITS, NT, FRK_OUT_STORE>, grid, dim3(256), 0, st, w, sz, M, K, NG, xx, ldx, nb, out, ldo);
    else if (mode == FRK_OUT_ACC)
        frk_launch(k_gemv_q<BITS, NT, FRK_OUT_ACC>, grid, dim3(256), 0, st, w, sz, M, K, NG, xx, ldx, nb, out, ldo);
    else
        frk_launch(k_gemv_q<BITS, NT, FRK_OUT_SWIGLU>, grid, dim3(256), 0, st, w, sz, M, K, NG, xx, ldx, nb, out, ldo);
}
template <int BITS>
static void gemv_q_bits(const void *packed, const uint32_t *sz, int M, int K, const uint16_t *x,
                        int ldx, int nb, void *out, int ldo, int mode, cudaStream_t st) {
    if (nb <= 8)
        gemv_q_nt<BITS, 1>(packed, sz, M, K, x, ldx, nb, out, ldo, mode, st);
    else if (nb <= 16)
        gemv_q_nt<BITS, 2>(packed, sz, M, K, x, ldx, nb, out, ldo, mode, st);
    else if (nb <= 32)
        gemv_q_nt<BITS, 4>(packed, sz, M, K, x, ldx, nb, out, ldo, mode, st);
    else
        gemv_q_nt<BITS, 8>(packed, sz, M, K, x, ldx, nb, out, ldo, mode, st);
}

extern "C" void frk_gemv_q(const void *packed, const uint32_t *sz, int M, int K, int bits,
                           const uint16_t *x, int ldx, int nb, void *out, int ldo, int mode,
                           cudaStream_t st) {
    if (nb <= 0 || M <= 0) return;
    FR_DEV_ASSERT(K % 8 == 0 && ldx % 2 == 0 && (bits == 4 || bits == 8));
    FR_DEV_ASSERT(mode != FRK_OUT_SWIGLU || M % 2 == 0);
    if (bits == 4)
        gemv_q_bits<4>(packed, sz, M, K, x, ldx, nb, out, ldo, mode, st);
    else
        gemv_q_bits<8>(packed, sz, M, K, x, ldx, nb, out, ldo, mode, st);
}

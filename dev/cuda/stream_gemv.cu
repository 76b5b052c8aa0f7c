/* stream_gemv.cu — the decode step's streamed weight-stationary GEMV, y = W x for a few rows x,
 * with its loaders and INT8 / INT4 consumer variants, each checked against a CPU reference and
 * timed alone.
 *
 *   make dev && ./build-dev/stream_gemv                 every format, every variant
 *   ./build-dev/stream_gemv -f int4 23                  one variant (INT4, consumer 23)
 *   ./build-dev/stream_gemv -f int8 -M 6144 -K 4096 -n 1 -r 50
 *
 * The kernels are the production ones of src/backend/cuda/k_stream.cu as they were when every
 * variant still lived there, with the engine plumbing cut away: the input is plain bf16 rows (no
 * fused RMSNorm prologue), the output a plain f32 store (no residual add, SwiGLU or RoPE / K/V
 * epilogue), no programmatic dependent launch and no timeline probes. What is left is the real
 * algorithm of each variant: blocks of 8 consumer warps (INT: + a producer warp for V & 16) over
 * contiguous row ranges, weights HBM -> shared memory by the bulk-copy engine (cp.async.bulk +
 * one mbarrier per stage) or by cp.async from every thread, stages of 16 KiB (or 32 KiB) in
 * flight, and for INT the tensor-core consumers (mma.sync m16n8k16 f16, fp32 accumulate) on the
 * packed tile layout described at pack_q below.
 *
 * Measured alone, a kernel has no neighbour: the effects that came from what fits beside it on an
 * SM (register caps, held-back stages, the shared-memory carveout next to the attention) do not
 * show here, and a consumer that is faster alone was not always faster in the step (bench/gpu/
 * NOTES.md §2-3 has the step figures). Variants:
 *
 *   bf16 (-f bf16; one input row):
 *     0  TMA bulk copies, 2 blocks/SM x 4 stages                          production default
 *     1  TMA, 1 block/SM x 8 stages                                        (v4-v5: 121 tok/s)
 *     2  cp.async from every thread, 1 block/SM x 8 stages                 (v6 loader)
 *     3  TMA, 3 blocks/SM at <= 80 registers, 3 stages                     (v16 register cap)
 *     10-13  the register GEMV before the streamed kernels (k_gemv.cu variants 0-3: rows per
 *        warp, loads per lane, rounds in flight); 11 is the unfused path's
 *   INT8 / INT4 (-f int8 / int4; 1..8 input rows): the number is k_stream_q's V, a sum of
 *     1 early release, 2 B-fragment order, 4 INT4 one shift, 8 folded zero point, 16 producer
 *     warp, 32 free-running consumers, 64 group sums by an extra MMA, 128 three blocks per SM:
 *     0    block barrier per stage, thread 0 refills (the v15 consumer)
 *     1    + early release
 *     3    + B-fragment order
 *     7    + one-shift INT4
 *     23   + producer warp                       production: INT4 qkv, o, down
 *     55   + free-running consumers              production: INT8 o, gate/up, down, head
 *     59   55 with the folded zero point         production: INT4 gate/up, LM head
 *     123  59 with its sums made by an extra MMA (v27: -10 %)
 *     151  23 at three blocks per SM (72 regs)   production: INT8 qkv
 *     1000 consumer 0 with the cp.async loader, 1 block/SM x 8 stages   (v6)
 *     1055 consumer 55 with 32 KiB stages                               (v17: INT4 -26 %)
 */
#include "common.h"

#include <climits>
#include <vector>

#define GROUP 128              /* weight-only quantisation group along K */
#define ST_BYTES 16384         /* bytes of weights per stage */
#define ST_NS_MAX 12           /* stages in flight at most */
#define ST_NS_MIN 2
#define ST_KC 1024             /* bf16: columns per stage row */
#define ST_NSA 8               /* cp.async loader: stages (one commit group each) */
#define ST_DYN_MAX (216 * 1024)

/* The launch's arguments (a reduced frk_gemv_args). */
struct gemv_args {
    const void *W;      /* bf16 [M][K] or packed INT (pack_q) */
    const uint32_t *sz; /* INT: [Mt][NG][16] f16 scale | f16 (1024 + z) << 16 */
    int M, K, bits;
    const uint16_t *x;  /* bf16 [nb][K] */
    int nb;
    float *out;         /* f32 [nb][M] */
    int tmap;           /* 1: the first N % G blocks take one unit more (longer blocks first) */
};

/* ------------------------------------------------------------------ device helpers */
static __device__ __forceinline__ uint32_t sptr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
static __device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
static __device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float fr_dot8(const uint4 w, const uint4 x, float acc) {
    acc = fmaf(bf_lo(w.x), bf_lo(x.x), acc);
    acc = fmaf(bf_hi(w.x), bf_hi(x.x), acc);
    acc = fmaf(bf_lo(w.y), bf_lo(x.y), acc);
    acc = fmaf(bf_hi(w.y), bf_hi(x.y), acc);
    acc = fmaf(bf_lo(w.z), bf_lo(x.z), acc);
    acc = fmaf(bf_hi(w.z), bf_hi(x.z), acc);
    acc = fmaf(bf_lo(w.w), bf_lo(x.w), acc);
    acc = fmaf(bf_hi(w.w), bf_hi(x.w), acc);
    return acc;
}
static __device__ __forceinline__ void cp_async16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
static __device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
static __device__ __forceinline__ void cp_wait_nsa() { asm volatile("cp.async.wait_group %0;" ::"n"(ST_NSA - 2) : "memory"); }

static __device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
static __device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
static __device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
static __device__ __forceinline__ uint64_t policy_evict_first() {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
/* global -> shared bulk copy completing on mbarrier `bar`; 16-byte aligned, bytes % 16 == 0 */
static __device__ __forceinline__ void bulk_g2s(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar,
                                                uint64_t pol) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1], %2, [%3], %4;" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar), "l"(pol)
                 : "memory");
}
static __device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
static __device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
static __device__ __forceinline__ uint64_t tma_begin(uint64_t *bar, int ns) {
    for (int i = 0; i < ns; i++) mbar_init(sptr(&bar[i]), 1);
    fence_mbar_init();
    fence_proxy_async();
    return policy_evict_first();
}
/* First unit (row group / tile) of block b of G over N units; block b's range is
 * [unit_lo(b), unit_lo(b + 1)). m = 1: the longer ranges first. */
static __device__ __forceinline__ int unit_lo(int b, int G, int N, int m) {
    if (!m) return (int)((long)b * N / G);
    const int base = N / G, extra = N - base * G;
    return b < extra ? b * (base + 1) : extra * (base + 1) + (b - extra) * base;
}

/* ------------------------------------------------------------------ INT fragment arithmetic */
/* (a & b) | c: q into the mantissa of f16 1024 */
static __device__ __forceinline__ uint32_t qf_lop3_and_or(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}
static __device__ __forceinline__ uint32_t qf_hsub2(uint32_t a, uint32_t b) {
    half2 r = __hsub2(*(const half2 *)&a, *(const half2 *)&b);
    return *(uint32_t *)&r;
}
static __device__ __forceinline__ uint32_t qf_hfma2(uint32_t a, uint32_t b, uint32_t c) {
    half2 r = __hfma2(*(const half2 *)&a, *(const half2 *)&b, *(const half2 *)&c);
    return *(uint32_t *)&r;
}
/* raw A fragment: int4 f16 (1024 + q) in rows gq, (1024 + 16 q) in rows gq + 8; int8 (1024 + q) */
template <int BITS>
static __device__ __forceinline__ void qf_frag_raw(const uint32_t wd[4], int j, uint32_t A[4]) {
    if (BITS == 4) {
        const uint32_t w = wd[j], w8 = w >> 8;
        A[0] = qf_lop3_and_or(w, 0x000F000Fu, 0x64006400u);
        A[1] = qf_lop3_and_or(w, 0x00F000F0u, 0x64006400u);
        A[2] = qf_lop3_and_or(w8, 0x000F000Fu, 0x64006400u);
        A[3] = qf_lop3_and_or(w8, 0x00F000F0u, 0x64006400u);
    } else {
        const uint32_t w0 = wd[2 * j], w1 = wd[2 * j + 1];
        A[0] = __byte_perm(w0, 0x64646464u, 0x4140);
        A[1] = __byte_perm(w0, 0x64646464u, 0x4342);
        A[2] = __byte_perm(w1, 0x64646464u, 0x4140);
        A[3] = __byte_perm(w1, 0x64646464u, 0x4342);
    }
}
/* (q - z) exactly: three shifts for int4, one hsub2 per register */
template <int BITS>
static __device__ __forceinline__ void qf_frag(const uint32_t wd[4], int j, uint32_t zz0, uint32_t zz1, uint32_t A[4]) {
    if (BITS == 4) {
        const uint32_t w = wd[j];
        A[0] = qf_lop3_and_or(w, 0x000F000Fu, 0x64006400u);
        A[1] = qf_lop3_and_or(w >> 4, 0x000F000Fu, 0x64006400u);
        A[2] = qf_lop3_and_or(w >> 8, 0x000F000Fu, 0x64006400u);
        A[3] = qf_lop3_and_or(w >> 12, 0x000F000Fu, 0x64006400u);
    } else {
        qf_frag_raw<8>(wd, j, A);
    }
    A[0] = qf_hsub2(A[0], zz0);
    A[1] = qf_hsub2(A[1], zz1);
    A[2] = qf_hsub2(A[2], zz0);
    A[3] = qf_hsub2(A[3], zz1);
}
/* INT4 with one shift: odd nibbles 4 bits up, one hfma2 by 1/16 with nz1 = f16(-(64 + z)) */
static __device__ __forceinline__ void qf_frag4s(const uint32_t wd[4], int j, uint32_t zz0, uint32_t nz1, uint32_t A[4]) {
    qf_frag_raw<4>(wd, j, A);
    A[0] = qf_hsub2(A[0], zz0);
    A[1] = qf_hfma2(A[1], 0x2C002C00u, nz1);
    A[2] = qf_hsub2(A[2], zz0);
    A[3] = qf_hfma2(A[3], 0x2C002C00u, nz1);
}
static __device__ __forceinline__ void qf_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* ------------------------------------------------------------------ prologue: the input rows */
/* Within each 32 columns (two k-steps) lane tq's b0, b1 of k-step 0 and of k-step 1 are 16
 * contiguous bytes (one shared load for two MMAs). */
static __device__ __forceinline__ int xperm(int k) {
    return (k & ~31) | ((k & 7) >> 1) << 3 | (k >> 4 & 1) << 2 | (k >> 3 & 1) << 1 | (k & 1);
}
/* xs[n][0..Kp) = input row n (bf16, or f16 when F16, in xperm order when PX), zero beyond K.
 * Ends synchronised. */
template <bool F16, bool PX = false>
static __device__ __forceinline__ void stage_x(const gemv_args &a, int nb, int Kp, void *xs) {
    const int K = a.K, tid = threadIdx.x;
    const int kend = tid < 256 ? K : 0; /* the 256 worker threads (a producer warp idles) */
    for (int n = 0; n < nb; n++) {
        const bf16 *xr = (const bf16 *)a.x + (size_t)n * K;
        for (int k = tid * 8; k < kend; k += 2048) {
            const uint4 v = *(const uint4 *)(xr + k);
            if (F16) {
                const uint32_t w[4] = {v.x, v.y, v.z, v.w};
                half *xr16 = (half *)xs + (size_t)n * Kp;
#pragma unroll
                for (int e = 0; e < 4; e++)
                    *(half2 *)(xr16 + (PX ? xperm(k + 2 * e) : k + 2 * e)) = __floats2half2_rn(bf_lo(w[e]), bf_hi(w[e]));
            } else {
                *(uint4 *)((bf16 *)xs + (size_t)n * Kp + k) = v;
            }
        }
    }
    if (F16)
        for (int n = 0; n < nb; n++)
            for (int k = K + tid; k < Kp; k += blockDim.x) ((half *)xs)[(size_t)n * Kp + (PX ? xperm(k) : k)] = __float2half(0.f);
    __syncthreads();
}
/* ZF: stage_x<true, PX>, then gsum[g][n] = sum over group g of row n's f16 values (fp32; 0 for
 * nb <= n < 8): one thread per (row, group), rotated start against bank conflicts. */
template <bool PX>
static __device__ void stage_x_zf(const gemv_args &a, int nb, int Kp, half *xs, float *gsum) {
    stage_x<true, PX>(a, nb, Kp, xs);
    const int NG = Kp / GROUP;
    for (int i = threadIdx.x; i < NG * nb; i += blockDim.x) {
        const int n = i / NG, g = i - n * NG;
        float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
        const uint4 *p = (const uint4 *)(xs + (size_t)n * Kp + (size_t)g * GROUP);
#pragma unroll
        for (int c = 0; c < 16; c++) {
            const uint4 v = p[(c + i) & 15];
            const float2 f0 = __half22float2(*(const half2 *)&v.x), f1 = __half22float2(*(const half2 *)&v.y);
            const float2 f2 = __half22float2(*(const half2 *)&v.z), f3 = __half22float2(*(const half2 *)&v.w);
            s0 += f0.x + f0.y;
            s1 += f1.x + f1.y;
            s2 += f2.x + f2.y;
            s3 += f3.x + f3.y;
        }
        gsum[g * 8 + n] = (s0 + s1) + (s2 + s3);
    }
    for (int i = threadIdx.x; i < NG * 8; i += blockDim.x)
        if ((i & 7) >= nb) gsum[i] = 0.f;
    __syncthreads();
}

/* ------------------------------------------------------------------ bf16 */
template <int NB>
static __device__ __forceinline__ void epi_bf16(const gemv_args &a, const float (*red)[NB], int rg) {
    const int tid = threadIdx.x;
    if (tid < 8 * NB) {
        const int r = tid % 8, n = tid / 8, row = rg * 8 + r;
        if (row < a.M) a.out[(size_t)n * a.M + row] = red[r][n];
    }
}
/* A stage is 8 rows x 1024 columns (one row per warp); 16-byte shared loads, fp32 FMAs, one warp
 * reduction per row at its last stage; one __syncthreads per stage releases the slot, and thread
 * 0 refills it (TMA), or every thread refills the slot of the previous iteration (ASYNC). */
template <int NB, bool ASYNC, int MINB = 1>
__global__ void __launch_bounds__(256, MINB) k_stream_bf16(const gemv_args a, int ns) {
    extern __shared__ __align__(128) unsigned char dsm[];
    __shared__ __align__(8) uint64_t bar[ST_NS_MAX];
    __shared__ float red[2][8][NB];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int M = a.M, K = a.K;
    const int NRG = (M + 7) / 8, NKT = (K + ST_KC - 1) / ST_KC;
    const int rg0 = unit_lo(blockIdx.x, gridDim.x, NRG, a.tmap);
    const int rg1 = unit_lo(blockIdx.x + 1, gridDim.x, NRG, a.tmap);
    const int nst = (rg1 - rg0) * NKT;
    if (ASYNC) ns = ST_NSA;
    unsigned char *stg = dsm;
    bf16 *xs = (bf16 *)(dsm + (size_t)ns * ST_BYTES);
    const bf16 *W = (const bf16 *)a.W;
    uint64_t pol = 0;
    int i_slot = 0, i_rg = rg0, i_kt = 0; /* the issuer's stage indices, advanced incrementally */
    auto issue = [&]() {
        const int kc = min(ST_KC, K - i_kt * ST_KC), nr = min(8, M - i_rg * 8);
        const uint32_t b = sptr(&bar[i_slot]);
        mbar_expect_tx(b, (uint32_t)(nr * kc * 2));
        for (int r = 0; r < nr; r++)
            bulk_g2s(sptr(stg + i_slot * ST_BYTES + r * ST_KC * 2),
                     W + (size_t)(i_rg * 8 + r) * K + (size_t)i_kt * ST_KC, (uint32_t)(kc * 2), b, pol);
        if (++i_slot == ns) i_slot = 0;
        if (++i_kt == NKT) i_kt = 0, i_rg++;
    };
    auto load_async = [&](int s) {
        if (s < nst) {
            const int slot = s % ST_NSA, rg = rg0 + s / NKT, kt = s % NKT;
            const int kc = min(ST_KC, K - kt * ST_KC);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int c = tid + 256 * i, r = c >> 7, v = c & 127, row = rg * 8 + r;
                if (row < M && v * 8 < kc)
                    cp_async16(sptr(stg + slot * ST_BYTES + r * ST_KC * 2 + v * 16), W + (size_t)row * K + (size_t)kt * ST_KC + v * 8);
            }
        }
        cp_commit();
    };
    if (ASYNC) {
        for (int s = 0; s < ST_NSA - 1; s++) load_async(s);
    } else if (tid == 0) {
        pol = tma_begin(bar, ns);
        for (int s = 0; s < ns && s < nst; s++) issue();
    }
    stage_x<false>(a, NB, K, xs); /* ends with __syncthreads (also publishes the barriers) */
    float acc[NB];
#pragma unroll
    for (int n = 0; n < NB; n++) acc[n] = 0.f;
    int pend = -1; /* ASYNC: row group whose epilogue waits for the next __syncthreads */
    int slot = 0, rg = rg0, kt = 0;
    uint32_t par = 0;
    for (int s = 0; s < nst; s++) {
        const int kc = min(ST_KC, K - kt * ST_KC);
        if (ASYNC) {
            cp_wait_nsa();
            __syncthreads();
            if (pend >= 0) epi_bf16<NB>(a, red[(pend - rg0) & 1], pend);
            pend = -1;
            load_async(s + ST_NSA - 1);
        } else {
            mbar_wait(sptr(&bar[slot]), par);
        }
        if (rg * 8 + warp < M) {
            const uint4 *wr = (const uint4 *)(stg + slot * ST_BYTES + warp * ST_KC * 2);
            const uint4 *xk = (const uint4 *)(xs + (size_t)kt * ST_KC);
#pragma unroll
            for (int i = 0; i < ST_KC / 256; i++) {
                const int v = lane + 32 * i;
                if (v * 8 < kc) {
                    const uint4 wv = wr[v];
#pragma unroll
                    for (int n = 0; n < NB; n++) acc[n] = fr_dot8(wv, xk[(size_t)n * (K / 8) + v], acc[n]);
                }
            }
        }
        const bool last = kt == NKT - 1;
        const int buf = (rg - rg0) & 1;
        if (last) {
#pragma unroll
            for (int n = 0; n < NB; n++) {
                const float v = warp_sum(acc[n]);
                if (lane == 0) red[buf][warp][n] = v;
                acc[n] = 0.f;
            }
        }
        if (ASYNC) {
            if (last) pend = rg;
        } else {
            __syncthreads();
            if (tid == 0 && s + ns < nst) {
                fence_proxy_async();
                issue();
            }
            if (last) epi_bf16<NB>(a, red[buf], rg);
        }
        if (++slot == ns) slot = 0, par ^= 1u;
        if (++kt == NKT) kt = 0, rg++;
    }
    if (ASYNC) {
        __syncthreads();
        if (pend >= 0) epi_bf16<NB>(a, red[(pend - rg0) & 1], pend);
    }
}

/* ------------------------------------------------------------------ bf16, registers instead of stages */
/* The GEMV before the streamed kernels (src/backend/cuda/k_gemv.cu, still the unfused path):
 * no shared memory; each warp owns R rows, each lane issues U 16-byte loads per row per round
 * (ld.global.nc.L1::no_allocate, so x keeps L1), DB: the next round is loaded before the current
 * one is computed; fp32 FMAs, one warp reduction per row; MINB blocks per SM to fit. */
static __device__ __forceinline__ uint4 ld_stream16(const void *p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}
template <int NB, int R, int U, bool DB, int MINB>
__global__ void __launch_bounds__(256, MINB) k_gemv_bf16(const gemv_args a) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, M = a.M, K = a.K;
    const int r0 = (blockIdx.x * 8 + warp) * R;
    if (r0 >= M) return;
    const bf16 *W = (const bf16 *)a.W, *x = (const bf16 *)a.x;
    const uint4 *w[R];
#pragma unroll
    for (int r = 0; r < R; r++) w[r] = (const uint4 *)(W + (size_t)(r0 + r < M ? r0 + r : r0) * K);
    const int nv = K / 8;
    float acc[R][NB];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int n = 0; n < NB; n++) acc[r][n] = 0.f;
    uint4 ra[R][U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int i = u * 32 + lane;
#pragma unroll
        for (int r = 0; r < R; r++) ra[r][u] = i < nv ? ld_stream16(w[r] + i) : make_uint4(0, 0, 0, 0);
    }
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
                    const uint4 xv = __ldg((const uint4 *)(x + (size_t)n * K) + i);
#pragma unroll
                    for (int r = 0; r < R; r++) acc[r][n] = fr_dot8(ra[r][u], xv, acc[r][n]);
                }
            }
        }
        if (DB) {
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int r = 0; r < R; r++) ra[r][u] = na[r][u];
        } else if (base + 32 * U < nv) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int i = base + 32 * U + u * 32 + lane;
#pragma unroll
                for (int r = 0; r < R; r++) ra[r][u] = i < nv ? ld_stream16(w[r] + i) : make_uint4(0, 0, 0, 0);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int n = 0; n < NB; n++) acc[r][n] = warp_sum(acc[r][n]);
    if (lane != 0) return;
#pragma unroll
    for (int n = 0; n < NB; n++)
#pragma unroll
        for (int r = 0; r < R; r++)
            if (r0 + r < M) a.out[(size_t)n * M + r0 + r] = acc[r][n];
}

/* ------------------------------------------------------------------ INT8 / INT4 */
template <int BITS, int SB = ST_BYTES, int NW = 8>
struct qgeom {
    static constexpr int CPG = BITS == 4 ? 2 : 4; /* 16-byte chunks per lane per group */
    static constexpr int KPC = 8 / CPG;           /* k-steps per chunk */
    static constexpr int GBYTES = CPG * 512;      /* bytes per (tile, group) */
    static constexpr int GPS = SB / GBYTES;       /* groups per stage */
    static constexpr int GPW = GPS / NW;          /* groups per warp per stage */
    static constexpr int SZB = GPS * 64;          /* scale bytes per stage */
    static constexpr int NACC = GPW >= 4 ? 1 : 2; /* accumulator chains per group */
};
/* Output of row tile rt from the warps' fragment partials red[w][lane][e]; output i (row i % 16,
 * column i / 16) by the thread with i0 + k step = i. */
template <int NW = 8>
static __device__ __forceinline__ void epi_q_from(const gemv_args &a, const float (*red)[32][4], int rt, int i0, int step) {
    for (int i = i0; i < 16 * a.nb; i += step) {
        const int r = i % 16, n = i / 16, row = rt * 16 + r;
        if (row >= a.M) continue;
        const int ln = (r % 8) * 4 + n / 2, e = (r / 8) * 2 + (n % 2);
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < NW; w++) v += red[w][ln][e];
        a.out[(size_t)n * a.M + row] = v;
    }
}
template <int NW = 8>
static __device__ __forceinline__ void epi_q(const gemv_args &a, const float (*red)[32][4], int rt) {
    epi_q_from<NW>(a, red, rt, threadIdx.x, blockDim.x);
}
template <int V> struct qthreads {
    static constexpr int nw = 8;
    static constexpr int n = 32 * nw + ((V & 16) ? 32 : 0);
};
/* A stage is GPS groups of one 16-row tile (+ their scale words); each of the 8 consumer warps
 * takes GPW groups side by side, two accumulator chains each; the warps' tile partials meet in
 * shared memory at the tile's last stage. V selects the consumer (see the top of the file). */
template <int BITS, bool ASYNC, int MINB = 1, int SB = ST_BYTES, int V = 0>
__global__ void __launch_bounds__(qthreads<V>::n, MINB) k_stream_q(const __grid_constant__ gemv_args a, int ns) {
    static_assert(!ASYNC || (SB == ST_BYTES && !(V & 1)), "the cp.async loader fills 16 KiB stages, no early release");
    static_assert(!(V & 16) || (V & 1), "the producer warp needs early release");
    static_assert(!(V & 32) || (V & 16), "free-running consumers need the producer warp");
    static_assert(!(V & 64) || (V & 8), "MMA-made group sums are for the folded zero point");
    constexpr bool ER = (V & 1) != 0, PX = (V & 2) != 0, ZF = (V & 8) != 0, PW = (V & 16) != 0;
    constexpr bool FR = (V & 32) != 0, ZS = (V & 64) != 0;
    constexpr int NW = qthreads<V>::nw;
    constexpr int ITID = PW ? 32 * NW : 0; /* the thread that issues the bulk copies */
    constexpr bool D4S = BITS == 4 && (V & 4) != 0 && !ZF;
    typedef qgeom<BITS, SB, NW> Q;
    extern __shared__ __align__(128) unsigned char dsm[];
    __shared__ __align__(8) uint64_t bar[ST_NS_MAX];
    __shared__ __align__(8) uint64_t empty[FR ? ST_NS_MAX : 1], tbar[2], rfree[2];
    __shared__ __align__(16) float red[2][NW][32][4];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, tq = lane & 3;
    const int M = a.M, K = a.K, nb = a.nb, NG = (K + GROUP - 1) / GROUP, Kp = NG * GROUP;
    const int NRT = (M + 15) / 16, NST = (NG + Q::GPS - 1) / Q::GPS;
    const int rt0 = unit_lo(blockIdx.x, gridDim.x, NRT, a.tmap);
    const int rt1 = unit_lo(blockIdx.x + 1, gridDim.x, NRT, a.tmap);
    const int nst = (rt1 - rt0) * NST;
    if (ASYNC) ns = ST_NSA;
    unsigned char *stg = dsm;
    uint32_t *ssz = (uint32_t *)(dsm + (size_t)ns * SB);
    half *xs = (half *)(dsm + (size_t)ns * (SB + Q::SZB));
    float *gsum = (float *)(xs + (size_t)nb * Kp); /* ZF: [NG][8] */
    const unsigned char *Wp = (const unsigned char *)a.W;
    uint64_t pol = 0;
    int i_slot = 0, i_rt = rt0, i_j = 0;
    auto issue = [&]() {
        const int g0 = i_j * Q::GPS, ng = min(Q::GPS, NG - g0);
        const uint32_t b = sptr(&bar[i_slot]);
        mbar_expect_tx(b, (uint32_t)(ng * (Q::GBYTES + 64)));
        bulk_g2s(sptr(stg + i_slot * SB), Wp + ((size_t)i_rt * NG + g0) * Q::GBYTES, (uint32_t)(ng * Q::GBYTES), b, pol);
        bulk_g2s(sptr(ssz + i_slot * (Q::SZB / 4)), a.sz + ((size_t)i_rt * NG + g0) * 16, (uint32_t)(ng * 64), b, pol);
        if (++i_slot == ns) i_slot = 0;
        if (++i_j == NST) i_j = 0, i_rt++;
    };
    auto load_async = [&](int s) {
        if (s < nst) {
            const int slot = s % ST_NSA, rt = rt0 + s / NST, g0 = (s % NST) * Q::GPS;
            const int ng = min(Q::GPS, NG - g0);
            const unsigned char *src = Wp + ((size_t)rt * NG + g0) * Q::GBYTES;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int c = tid + 256 * i;
                if (c * 16 < ng * Q::GBYTES) cp_async16(sptr(stg + slot * ST_BYTES + c * 16), src + c * 16);
            }
            if (tid < ng * 4) cp_async16(sptr(ssz + slot * (Q::SZB / 4) + tid * 4), a.sz + ((size_t)rt * NG + g0) * 16 + tid * 4);
        }
        cp_commit();
    };
    if (ASYNC) {
        for (int s = 0; s < ST_NSA - 1; s++) load_async(s);
    } else if (tid == ITID) {
        if (FR) {
            for (int i = 0; i < ns; i++) mbar_init(sptr(&empty[i]), NW);
            for (int b = 0; b < 2; b++) mbar_init(sptr(&tbar[b]), NW), mbar_init(sptr(&rfree[b]), 1);
        }
        pol = tma_begin(bar, ns);
        for (int s = 0; s < ns && s < nst; s++) issue();
    }
    if (ZF && !ZS) stage_x_zf<PX>(a, nb, Kp, xs, gsum);
    else stage_x<true, PX>(a, nb, Kp, xs);
    const half *xn = xs + (size_t)(gq < nb ? gq : 0) * Kp;
    const bool bcol = gq < nb;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    int pend = -1;
    int slot = 0, rt = rt0, j = 0;
    uint32_t par = 0;
    if (FR && warp == NW) { /* the producer warp, free-running consumers */
        uint32_t epar = 0;
        int esl = 0, t = 0;
        for (int s = 0; s < nst; s++) {
            if (s + ns < nst) {
                mbar_wait(sptr(&empty[esl]), epar); /* all consumer warps hold stage s */
                if (lane == 0) {
                    fence_proxy_async();
                    issue();
                }
            }
            if (j == NST - 1) { /* the tile's partials, its epilogue, then the buffer is free */
                mbar_wait(sptr(&tbar[t & 1]), (t >> 1) & 1);
                epi_q_from<NW>(a, red[t & 1], rt, lane, 32);
                __syncwarp();
                if (lane == 0) mbar_arrive(sptr(&rfree[t & 1]));
                t++;
            }
            if (++esl == ns) esl = 0, epar ^= 1u;
            if (++j == NST) j = 0, rt++;
        }
        return;
    }
    if (PW && warp == NW) { /* the producer warp: one barrier per stage, as the consumers */
        for (int s = 0; s < nst; s++) {
            __syncthreads(); /* every consumer holds stage s in registers: the slot is free */
            if (lane == 0 && s + ns < nst) {
                fence_proxy_async();
                issue();
            }
            if (pend >= 0) epi_q_from<NW>(a, red[(pend - rt0) & 1], pend, lane, 32);
            pend = -1;
            if (j == NST - 1) pend = rt;
            if (++j == NST) j = 0, rt++;
        }
        __syncthreads();
        if (pend >= 0) epi_q_from<NW>(a, red[(pend - rt0) & 1], pend, lane, 32);
        return;
    }
    for (int s = 0; s < nst; s++) {
        const int g0 = j * Q::GPS;
        const int ng = min(Q::GPS, NG - g0);
        if (ASYNC) {
            cp_wait_nsa();
            __syncthreads();
            if (pend >= 0) epi_q<NW>(a, red[(pend - rt0) & 1], pend);
            pend = -1;
            load_async(s + ST_NSA - 1);
        } else {
            mbar_wait(sptr(&bar[slot]), par);
        }
        /* the warp's GPW groups side by side, two accumulator chains each; a group past the
         * stage's end runs on column 0 with scale 0 and zero point 1024, adding exactly 0 */
        uint32_t sw[Q::GPW][2];
        uint4 ch[Q::GPW][Q::CPG];
#pragma unroll
        for (int gi = 0; gi < Q::GPW; gi++) {
            const int gl = warp * Q::GPW + gi;
            const bool ok = gl < ng;
            sw[gi][0] = ok ? ssz[slot * (Q::SZB / 4) + gl * 16 + gq] : 0x64000000u;
            sw[gi][1] = ok ? ssz[slot * (Q::SZB / 4) + gl * 16 + gq + 8] : 0x64000000u;
        }
        if (ER) {
#pragma unroll
            for (int gi = 0; gi < Q::GPW; gi++)
#pragma unroll
                for (int ci = 0; ci < Q::CPG; ci++)
                    ch[gi][ci] = *(const uint4 *)(stg + slot * SB + ((warp * Q::GPW + gi) * Q::CPG + ci) * 512 + lane * 16);
            if (FR) {
                __syncwarp();
                if (lane == 0) mbar_arrive(sptr(&empty[slot])); /* this warp is done with the slot */
            } else {
                __syncthreads(); /* the slot is free: refill it before the arithmetic */
            }
            if (!PW) {
                if (tid == 0 && s + ns < nst) {
                    fence_proxy_async();
                    issue();
                }
                if (pend >= 0) epi_q<NW>(a, red[(pend - rt0) & 1], pend);
                pend = -1;
            }
        }
        uint32_t zz[Q::GPW][2], nz[Q::GPW];
        float sc[Q::GPW][2], c[Q::GPW][Q::NACC][4];
        const bool zfirst = ZS && rt == rt0; /* ZS: the block's first tile makes the group sums */
        float zsum[ZS ? Q::GPW : 1][4];
        int Gk[Q::GPW];
#pragma unroll
        for (int gi = 0; gi < Q::GPW; gi++) {
            const int gl = warp * Q::GPW + gi;
            zz[gi][0] = __byte_perm(sw[gi][0], sw[gi][0], 0x3232);
            zz[gi][1] = __byte_perm(sw[gi][1], sw[gi][1], 0x3232);
            if (D4S) nz[gi] = qf_hsub2(0x63806380u, zz[gi][1]); /* f16 960 - (1024 + z) */
            sc[gi][0] = __half2float(__ushort_as_half((unsigned short)(sw[gi][0] & 0xffffu)));
            sc[gi][1] = __half2float(__ushort_as_half((unsigned short)(sw[gi][1] & 0xffffu)));
            Gk[gi] = gl < ng ? g0 + gl : 0;
            if (ZS)
#pragma unroll
                for (int e = 0; e < 4; e++) zsum[gi][e] = 0.f;
#pragma unroll
            for (int h = 0; h < Q::NACC; h++)
#pragma unroll
                for (int e = 0; e < 4; e++) c[gi][h][e] = 0.f;
        }
#pragma unroll
        for (int ci = 0; ci < Q::CPG; ci++) {
            if (!ER)
#pragma unroll
                for (int gi = 0; gi < Q::GPW; gi++)
                    ch[gi][ci] = *(const uint4 *)(stg + slot * SB + ((warp * Q::GPW + gi) * Q::CPG + ci) * 512 + lane * 16);
            uint4 bx[Q::GPW];
#pragma unroll
            for (int jj = 0; jj < Q::KPC; jj++)
#pragma unroll
                for (int gi = 0; gi < Q::GPW; gi++) {
                    const uint32_t wd[4] = {ch[gi][ci].x, ch[gi][ci].y, ch[gi][ci].z, ch[gi][ci].w};
                    uint32_t A[4];
                    if (ZF) qf_frag_raw<BITS>(wd, jj, A);
                    else if (D4S) qf_frag4s(wd, jj, zz[gi][0], nz[gi], A);
                    else qf_frag<BITS>(wd, jj, zz[gi][0], zz[gi][1], A);
                    const int kst = ci * Q::KPC + jj; /* k-step in the group */
                    uint32_t b0, b1;
                    if (PX) {
                        if (!(kst & 1)) bx[gi] = *(const uint4 *)(xn + Gk[gi] * GROUP + (kst >> 1) * 32 + tq * 8);
                        b0 = kst & 1 ? bx[gi].z : bx[gi].x;
                        b1 = kst & 1 ? bx[gi].w : bx[gi].y;
                    } else {
                        const int k = (Gk[gi] * 8 + kst) * 16 + 2 * tq;
                        b0 = bcol ? *(const uint32_t *)(xn + k) : 0u;
                        b1 = bcol ? *(const uint32_t *)(xn + k + 8) : 0u;
                    }
                    qf_mma(c[gi][kst % Q::NACC], A, b0, b1);
                    if (ZS && zfirst) {
                        const uint32_t ones[4] = {0x3C003C00u, 0x3C003C00u, 0x3C003C00u, 0x3C003C00u};
                        qf_mma(zsum[gi], ones, b0, b1);
                    }
                }
        }
#pragma unroll
        for (int gi = 0; gi < Q::GPW; gi++) {
            float t[4] = {c[gi][0][0], c[gi][0][1], c[gi][0][2], c[gi][0][3]};
            if (Q::NACC == 2)
#pragma unroll
                for (int e = 0; e < 4; e++) t[e] += c[gi][Q::NACC - 1][e];
            if (ZF) { /* the MMA summed (1024 + q) x (int4 rows gq + 8: (1024 + 16 q) x) */
                float2 S;
                if (ZS && zfirst) {
                    S = make_float2(zsum[gi][0], zsum[gi][1]);
                    *(float2 *)(gsum + Gk[gi] * 8 + 2 * tq) = S;
                } else {
                    S = *(const float2 *)(gsum + Gk[gi] * 8 + 2 * tq);
                }
                const float z0 = __half2float(__ushort_as_half((unsigned short)(sw[gi][0] >> 16)));
                const float z1 = __half2float(__ushort_as_half((unsigned short)(sw[gi][1] >> 16)));
                t[0] = fmaf(-z0, S.x, t[0]);
                t[1] = fmaf(-z0, S.y, t[1]);
                if (BITS == 4) {
                    t[2] = fmaf(-(z1 - 960.f), S.x, t[2] * 0.0625f);
                    t[3] = fmaf(-(z1 - 960.f), S.y, t[3] * 0.0625f);
                } else {
                    t[2] = fmaf(-z1, S.x, t[2]);
                    t[3] = fmaf(-z1, S.y, t[3]);
                }
            }
            acc[0] = fmaf(sc[gi][0], t[0], acc[0]);
            acc[1] = fmaf(sc[gi][0], t[1], acc[1]);
            acc[2] = fmaf(sc[gi][1], t[2], acc[2]);
            acc[3] = fmaf(sc[gi][1], t[3], acc[3]);
        }
        const bool last = j == NST - 1;
        const int buf = (rt - rt0) & 1;
        if (last) {
            const int tl = rt - rt0;
            if (FR && tl >= 2) mbar_wait(sptr(&rfree[buf]), ((tl >> 1) + 1) & 1); /* tile tl - 2 read */
            *(float4 *)red[buf][warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
            acc[0] = acc[1] = acc[2] = acc[3] = 0.f;
            if (FR) {
                __syncwarp();
                if (lane == 0) mbar_arrive(sptr(&tbar[buf]));
            }
        }
        if (ASYNC || (ER && !PW)) {
            if (last) pend = rt;
        } else if (!ER) {
            __syncthreads();
            if (tid == 0 && s + ns < nst) {
                fence_proxy_async();
                issue();
            }
            if (last) epi_q<NW>(a, red[buf], rt);
        }
        if (++slot == ns) slot = 0, par ^= 1u;
        if (++j == NST) j = 0, rt++;
    }
    if (ASYNC || (ER && !FR)) {
        __syncthreads();
        if (!PW && pend >= 0) epi_q<NW>(a, red[(pend - rt0) & 1], pend);
    }
}

/* ------------------------------------------------------------------ host: quantise and pack */
/* Packed layout (Kp = 128 NG, Mt = ceil(M / 16)): 16-byte chunk ((rt * NG + G) * CPG + ci) * 32 +
 * lane, CPG = 2 (int4) or 4 (int8) chunks per group; lane = 4 gq + tq holds, for each of its
 * k-steps (k0 = 16 ks), the mma A-fragment values
 *   e0 = W[r][k0+2tq] e1 = W[r][k0+2tq+1] e2 = W[r+8][k0+2tq] e3 = W[r+8][k0+2tq+1]
 *   e4 = W[r][k0+2tq+8] e5 = W[r][k0+2tq+9] e6 = W[r+8][k0+2tq+8] e7 = W[r+8][k0+2tq+9]
 * (r = 16 rt + gq): int8 as 8 bytes e0..e7; int4 as one word with e0,e1 at bits 0/16, e2,e3 at
 * 4/20, e4,e5 at 8/24, e6,e7 at 12/28. Scale words sz[(rt * NG + G) * 16 + r] = f16 bits of s |
 * f16 bits of (1024 + z) << 16. */
static void pack_q(const uint8_t *q, const uint16_t *s, const uint8_t *z, int M, int K, int bits,
                   uint8_t *out, uint32_t *sz) {
    const int NG = cdiv(K, GROUP), Kp = NG * GROUP, Mt = cdiv(M, 16);
    const int CPG = bits == 4 ? 2 : 4, KPC = 8 / CPG;
    for (int rt = 0; rt < Mt; rt++)
        for (int G = 0; G < NG; G++) {
            for (int r = 0; r < 16; r++) {
                const int row = rt * 16 + r;
                uint32_t s16 = 0, zz = 0;
                if (row < M) s16 = s[(size_t)row * NG + G], zz = z[(size_t)row * NG + G];
                sz[((size_t)rt * NG + G) * 16 + r] = s16 | ((uint32_t)host_f2h(1024.f + (float)zz) << 16);
            }
            for (int ci = 0; ci < CPG; ci++)
                for (int lane = 0; lane < 32; lane++) {
                    const int gq = lane >> 2, tq = lane & 3, ra = rt * 16 + gq, rb = ra + 8;
                    uint8_t *dst = out + ((((size_t)rt * NG + G) * CPG + ci) * 32 + lane) * 16;
                    memset(dst, 0, 16);
                    for (int jj = 0; jj < KPC; jj++) {
                        const int k0 = (G * 8 + ci * KPC + jj) * 16 + 2 * tq;
                        const int rr[8] = {ra, ra, rb, rb, ra, ra, rb, rb};
                        const int kk[8] = {0, 1, 0, 1, 8, 9, 8, 9};
                        uint32_t e[8];
                        for (int i = 0; i < 8; i++) e[i] = rr[i] < M ? q[(size_t)rr[i] * Kp + k0 + kk[i]] : 0u;
                        if (bits == 8) {
                            for (int i = 0; i < 8; i++) dst[8 * jj + i] = (uint8_t)e[i];
                        } else {
                            const int sh[8] = {0, 16, 4, 20, 8, 24, 12, 28};
                            uint32_t w = 0;
                            for (int i = 0; i < 8; i++) w |= (e[i] & 0xF) << sh[i];
                            memcpy(dst + 4 * jj, &w, 4);
                        }
                    }
                }
        }
}

/* ------------------------------------------------------------------ variants and launch */
struct variant {
    int id;
    int bits;       /* 16, 8 or 4: which formats it applies to (0: both INT formats) */
    const char *what;
};
static const variant VARIANTS[] = {
    {0, 16, "bf16 TMA 2 blocks/SM x 4 stages (production)"},
    {1, 16, "bf16 TMA 1 block/SM x 8 stages"},
    {2, 16, "bf16 cp.async 1 block/SM x 8 stages"},
    {3, 16, "bf16 TMA 3 blocks/SM <= 80 regs x 3 stages"},
    {10, 16, "bf16 GEMV, 2 rows/warp, 2 rounds in flight"},
    {11, 16, "bf16 GEMV, 2 rows/warp, 4 blocks/SM (unfused)"},
    {12, 16, "bf16 GEMV, 1 row/warp x 8 loads, 2 rounds"},
    {13, 16, "bf16 GEMV, 1 row/warp x 16 loads"},
    {0, 0, "v0 block barrier, thread 0 refills"},
    {1, 0, "v1 + early release"},
    {3, 0, "v3 + B-fragment order"},
    {7, 0, "v7 + one-shift int4"},
    {23, 0, "v23 + producer warp"},
    {55, 0, "v55 + free-running consumers"},
    {59, 0, "v59 v55 with folded zero point"},
    {123, 0, "v123 v59 with sums by an extra MMA"},
    {151, 0, "v151 v23 at 3 blocks/SM (72 regs)"},
    {1000, 0, "cp.async loader, v0, 1 block/SM x 8 stages"},
    {1055, 0, "v55 with 32 KiB stages"},
};

/* Shared memory of one block: stages + the input rows (+ INT group sums). */
static size_t stage_bytes(int bits, int sb) {
    if (bits == 16) return ST_BYTES;
    return (size_t)sb + (size_t)(sb / (bits == 4 ? 1024 : 2048)) * 64;
}
static size_t x_bytes(int K, int bits, int nb) {
    return bits == 16 ? (size_t)nb * K * 2 : (size_t)nb * cdiv(K, GROUP) * GROUP * 2 + (size_t)cdiv(K, GROUP) * 32;
}
/* Stages that fit beside the input rows for bps blocks per SM (each gets 1/bps of the 227 KiB
 * less its static part, <= 9 KiB), at most cap. */
static int n_stages(int K, int bits, int nb, int bps, int sb, int cap) {
    const size_t avail = bps > 1 ? (size_t)(227 - 9 * bps) / bps * 1024 : (size_t)ST_DYN_MAX;
    const size_t xb = x_bytes(K, bits, nb);
    if (xb >= avail) return 0;
    const size_t n = (avail - xb) / stage_bytes(bits, sb);
    return (int)(n > (size_t)cap ? (size_t)cap : n);
}

template <typename... KArgs>
static void launch_stream(void (*kernel)(KArgs...), int units, int bps, int ns, int sb, int nthreads,
                          const gemv_args &a) {
    static void (*set_for)(KArgs...) = nullptr;
    if (set_for != kernel) { /* all of L1 as shared memory, as production asks */
        cudaFuncAttributes fa;
        CK(cudaFuncGetAttributes(&fa, kernel));
        const int dyn_max = (int)((size_t)227 * 1024 - fa.sharedSizeBytes < (size_t)ST_DYN_MAX
                                      ? (size_t)227 * 1024 - fa.sharedSizeBytes
                                      : (size_t)ST_DYN_MAX);
        CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn_max));
        CK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, (int)cudaSharedmemCarveoutMaxShared));
        set_for = kernel;
    }
    const int grid = units < bps * sm_count() ? units : bps * sm_count();
    const size_t smem = (size_t)ns * stage_bytes(a.bits, sb) + x_bytes(a.K, a.bits, a.nb);
    kernel<<<grid, nthreads, smem, g_stream>>>(a, ns);
    CK_LAUNCH();
}

/* Launch variant id on a; returns 0 when it cannot run this shape (too little shared memory). */
template <int BITS>
static int launch_q(int id, const gemv_args &a) {
    const int units = cdiv(a.M, 16);
    int bps = 2, sb = ST_BYTES, cap = 4;
    if (id == 151) bps = 3;
    if (id == 1000) bps = 1, cap = ST_NSA;
    if (id == 1055) sb = 32768;
    const int ns = n_stages(a.K, BITS, a.nb, bps, sb, cap);
    if (ns < (id == 1000 ? ST_NSA : ST_NS_MIN)) return 0;
    switch (id) {
    case 0: launch_stream(k_stream_q<BITS, false, 1, ST_BYTES, 0>, units, bps, ns, sb, qthreads<0>::n, a); break;
    case 1: launch_stream(k_stream_q<BITS, false, 1, ST_BYTES, 1>, units, bps, ns, sb, qthreads<1>::n, a); break;
    case 3: launch_stream(k_stream_q<BITS, false, 1, ST_BYTES, 3>, units, bps, ns, sb, qthreads<3>::n, a); break;
    case 7: launch_stream(k_stream_q<BITS, false, 1, ST_BYTES, 7>, units, bps, ns, sb, qthreads<7>::n, a); break;
    case 23: launch_stream(k_stream_q<BITS, false, 1, ST_BYTES, 23>, units, bps, ns, sb, qthreads<23>::n, a); break;
    case 55: launch_stream(k_stream_q<BITS, false, 1, ST_BYTES, 55>, units, bps, ns, sb, qthreads<55>::n, a); break;
    case 59: launch_stream(k_stream_q<BITS, false, 1, ST_BYTES, 59>, units, bps, ns, sb, qthreads<59>::n, a); break;
    case 123: launch_stream(k_stream_q<BITS, false, 1, ST_BYTES, 123>, units, bps, ns, sb, qthreads<123>::n, a); break;
    case 151: launch_stream(k_stream_q<BITS, false, 3, ST_BYTES, 23>, units, bps, ns, sb, qthreads<23>::n, a); break;
    case 1000: launch_stream(k_stream_q<BITS, true>, units, bps, ns, sb, qthreads<0>::n, a); break;
    case 1055: launch_stream(k_stream_q<BITS, false, 2, 32768, 55>, units, bps, ns, sb, qthreads<55>::n, a); break;
    default: return 0;
    }
    return 1;
}
template <int R, int U, bool DB, int MINB>
static void launch_gemv(const gemv_args &a) {
    k_gemv_bf16<1, R, U, DB, MINB><<<cdiv(a.M, 8 * R), 256, 0, g_stream>>>(a);
    CK_LAUNCH();
}
static int launch_bf16(int id, const gemv_args &a) {
    switch (id) { /* the register GEMV (k_gemv.cu's variants 0-3) */
    case 10: launch_gemv<2, 4, true, 1>(a); return 1;
    case 11: launch_gemv<2, 4, false, 4>(a); return 1;
    case 12: launch_gemv<1, 8, true, 1>(a); return 1;
    case 13: launch_gemv<1, 16, false, 1>(a); return 1;
    default: break;
    }
    const int units = cdiv(a.M, 8);
    int bps = 2, cap = 4;
    if (id == 1) bps = 1, cap = 8;
    if (id == 2) bps = 1, cap = ST_NSA;
    if (id == 3) bps = 3, cap = 3;
    const int ns = n_stages(a.K, 16, 1, bps, ST_BYTES, cap);
    if (ns < (id == 2 ? ST_NSA : ST_NS_MIN)) return 0;
    switch (id) {
    case 0: launch_stream(k_stream_bf16<1, false>, units, bps, ns, ST_BYTES, 256, a); break;
    case 1: launch_stream(k_stream_bf16<1, false>, units, bps, ns, ST_BYTES, 256, a); break;
    case 2: launch_stream(k_stream_bf16<1, true>, units, bps, ns, ST_BYTES, 256, a); break;
    case 3: launch_stream(k_stream_bf16<1, false, 3>, units, bps, ns, ST_BYTES, 256, a); break;
    default: return 0;
    }
    return 1;
}
static int launch_variant(int id, const gemv_args &a) {
    if (a.bits == 16) return launch_bf16(id, a);
    return a.bits == 4 ? launch_q<4>(id, a) : launch_q<8>(id, a);
}

/* ------------------------------------------------------------------ problem, reference, run */
struct problem {
    int M, K, nb, bits;
    std::vector<float> ref;        /* [nb][M] */
    size_t wbytes, szbytes;        /* device bytes of W and of the scale words */
    void *W[16];                   /* weight copies (HBM rotation) */
    uint32_t *sz[16];
    int ncopy;
    uint16_t *x;                   /* device bf16 [nb][K] */
    float *out;                    /* device f32 [nb][M] */
};

/* Random weights and inputs, the CPU reference y = W x in double, device buffers. INT: plain
 * q, z uniform in [0, 2^bits), s = f16 in [0.5, 1.5) / 2^bits; w = (q - z) s exactly as the
 * kernels dequantise. */
static void make_problem(problem &p, uint64_t seed) {
    rng_t r = {seed};
    const int M = p.M, K = p.K, nb = p.nb;
    std::vector<uint16_t> xb((size_t)nb * K);
    std::vector<float> xf((size_t)nb * K);
    fill_bf16(&r, xb.data(), xf.data(), xb.size(), -1.f, 1.f);
    p.ref.assign((size_t)nb * M, 0.f);
    if (p.bits == 16) {
        std::vector<uint16_t> wb((size_t)M * K);
        std::vector<float> wf((size_t)M * K);
        fill_bf16(&r, wb.data(), wf.data(), wb.size(), -0.05f, 0.05f);
        for (int n = 0; n < nb; n++)
            for (int m = 0; m < M; m++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += (double)wf[(size_t)m * K + k] * xf[(size_t)n * K + k];
                p.ref[(size_t)n * M + m] = (float)s;
            }
        p.wbytes = wb.size() * 2;
        p.szbytes = 0;
        p.W[0] = dev_upload(wb.data(), p.wbytes);
        p.sz[0] = nullptr;
    } else {
        const int NG = cdiv(K, GROUP), Kp = NG * GROUP, qmax = (1 << p.bits) - 1;
        std::vector<uint8_t> q((size_t)M * Kp), z((size_t)M * NG);
        std::vector<uint16_t> s((size_t)M * NG);
        for (size_t i = 0; i < z.size(); i++) {
            z[i] = (uint8_t)(rng_u64(&r) % (uint64_t)(qmax + 1));
            s[i] = host_f2h(rng_uniform(&r, 0.5f, 1.5f) / (float)(qmax + 1) * 0.1f);
        }
        for (int m = 0; m < M; m++)
            for (int k = 0; k < Kp; k++)
                q[(size_t)m * Kp + k] = k < K ? (uint8_t)(rng_u64(&r) % (uint64_t)(qmax + 1)) : z[(size_t)m * NG + k / GROUP];
        for (int n = 0; n < nb; n++)
            for (int m = 0; m < M; m++) {
                double acc = 0;
                for (int G = 0; G < NG; G++) {
                    double g = 0;
                    for (int k = G * GROUP; k < (G + 1) * GROUP && k < K; k++)
                        g += ((double)q[(size_t)m * Kp + k] - (double)z[(size_t)m * NG + G]) * xf[(size_t)n * K + k];
                    acc += g * host_h2f(s[(size_t)m * NG + G]);
                }
                p.ref[(size_t)n * M + m] = (float)acc;
            }
        p.wbytes = (size_t)cdiv(M, 16) * NG * 16 * GROUP * p.bits / 8;
        p.szbytes = (size_t)cdiv(M, 16) * NG * 16 * 4;
        std::vector<uint8_t> packed(p.wbytes);
        std::vector<uint32_t> szw(p.szbytes / 4);
        pack_q(q.data(), s.data(), z.data(), M, K, p.bits, packed.data(), szw.data());
        p.W[0] = dev_upload(packed.data(), p.wbytes);
        p.sz[0] = (uint32_t *)dev_upload(szw.data(), p.szbytes);
    }
    /* copies so that the timed loop reads > 4x the L2 from HBM */
    p.ncopy = dev_copies(p.W[0], p.wbytes, (size_t)256 << 20, p.W);
    if (p.sz[0]) {
        void *c[16];
        dev_copies(p.sz[0], p.szbytes, p.szbytes * (size_t)p.ncopy, c);
        for (int i = 0; i < p.ncopy; i++) p.sz[i] = (uint32_t *)c[i];
    }
    p.x = (uint16_t *)dev_upload(xb.data(), xb.size() * 2);
    p.out = (float *)dev_alloc(p.ref.size() * 4);
}

struct timed { const problem *p; int id, tmap; };
static gemv_args args_for(const problem &p, int copy, int tmap) {
    gemv_args a;
    a.W = p.W[copy];
    a.sz = p.sz[copy];
    a.M = p.M, a.K = p.K, a.bits = p.bits;
    a.x = p.x, a.nb = p.nb, a.out = p.out, a.tmap = tmap;
    return a;
}
static void timed_launch(void *ctx, int iter) {
    const timed *t = (const timed *)ctx;
    launch_variant(t->id, args_for(*t->p, iter % t->p->ncopy, t->tmap));
}

/* Check and time variant v on p; returns 1 when it passed (or could not run this shape). */
static int run_variant(const problem &p, const variant &v, int tmap, int repeats, double copy_gbs) {
    char name[96];
    snprintf(name, sizeof name, "%s %dx%d nb=%d: %s", p.bits == 16 ? "bf16" : p.bits == 8 ? "int8" : "int4", p.M, p.K,
             p.nb, v.what);
    std::vector<float> got(p.ref.size());
    dev_poison(p.out, got.size() * 4);
    if (!launch_variant(v.id, args_for(p, 0, tmap))) {
        printf("%-52s skipped: does not fit this shape\n", name);
        return 1;
    }
    CK(cudaStreamSynchronize(g_stream));
    CK_LAUNCH();
    CK(cudaMemcpy(got.data(), p.out, got.size() * 4, cudaMemcpyDeviceToHost));
    /* bf16 and INT: the same products, fp32 accumulation in another order; the folded zero point
     * (8) subtracts sums ~1024 x larger, so it gets a looser tolerance */
    const bool zf = p.bits != 16 && (v.id & 8) && v.id < 1000;
    const check_t c = check_f32(p.ref.data(), got.data(), got.size(), zf ? 5e-3 : 1e-3, zf ? 5e-3 : 1e-3);
    timed t = {&p, v.id, tmap};
    const double us = time_us(timed_launch, &t, 3, repeats);
    const double bytes = (double)p.wbytes + (double)p.szbytes + (double)p.nb * p.K * 2 + (double)p.nb * p.M * 4;
    print_result(name, c, us, bytes, copy_gbs);
    return c.pass;
}

static void usage(void) {
    fprintf(stderr, "usage: stream_gemv [-f bf16|int8|int4] [-M rows] [-K cols] [-n batch] [-r repeats] [-t tilemap 0|1] [variant]\n");
    for (const variant &v : VARIANTS)
        fprintf(stderr, "  %-5d %-5s %s\n", v.id, v.bits == 16 ? "bf16" : "int", v.what);
    exit(2);
}

int main(int argc, char **argv) {
    int fmt = 0, M = 28672, K = 4096, nb = 1, repeats = 20, tmap = 0, want = -1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!strcmp(o, "-f") && val) {
            fmt = !strcmp(val, "bf16") ? 16 : !strcmp(val, "int8") ? 8 : !strcmp(val, "int4") ? 4 : -1;
            if (fmt < 0) usage();
            i++;
        } else if (!strcmp(o, "-M") && val) M = atoi(argv[++i]);
        else if (!strcmp(o, "-K") && val) K = atoi(argv[++i]);
        else if (!strcmp(o, "-n") && val) nb = atoi(argv[++i]);
        else if (!strcmp(o, "-r") && val) repeats = atoi(argv[++i]);
        else if (!strcmp(o, "-t") && val) tmap = atoi(argv[++i]) ? 1 : 0;
        else if (o[0] >= '0' && o[0] <= '9') want = atoi(o);
        else usage();
    }
    if (M < 16 || K < 128 || K % 8 || nb < 1 || nb > 8 || repeats < 1) usage();
    print_device();
    stream_init();
    const double copy_gbs = copy_rate_gbs();
    printf("# device copy %.0f GB/s (read + write); shape %d x %d, %d input row(s), %d repeats\n", copy_gbs, M, K, nb, repeats);
    int fails = 0, ran = 0;
    const int fmts[3] = {16, 8, 4};
    for (int f : fmts) {
        if (fmt && f != fmt) continue;
        if (f == 16 && nb != 1) {
            printf("# bf16 variants are instantiated for one input row only (decode b=1); skipped\n");
            continue;
        }
        problem p;
        p.M = M, p.K = K, p.nb = nb, p.bits = f;
        make_problem(p, 1234 + (uint64_t)f);
        for (const variant &v : VARIANTS) {
            if ((f == 16) != (v.bits == 16) || (want >= 0 && v.id != want)) continue;
            fails += !run_variant(p, v, tmap, repeats, copy_gbs);
            ran++;
        }
        for (int i = 0; i < p.ncopy; i++) {
            CK(cudaFree(p.W[i]));
            if (p.sz[i]) CK(cudaFree(p.sz[i]));
        }
        CK(cudaFree(p.x));
        CK(cudaFree(p.out));
    }
    if (!ran) {
        fprintf(stderr, "no variant %d for this format\n", want);
        usage();
    }
    printf("# %d variant(s), %d failed\n", ran, fails);
    return fails ? 1 : 0;
}

/* k_stream.cu — the decode step's linear layers as weight streams (frk_gemv_stream; kernels.h).
 *
 * Batch-1 decode reads every weight once per token, so each linear layer is a stream from HBM
 * and the step is fast only if HBM never waits: not inside a kernel (enough bytes in flight),
 * not between kernels (ramp and tail), not during the small operations around the products.
 *
 *   - Blocks of 8 warps (INT: + a producer warp; two blocks per SM, three for FRK_QC_PW3) each
 *     own a contiguous range of rows. Weights arrive through the bulk-copy engine
 *     (cp.async.bulk global -> shared, completion counted in bytes on an mbarrier per stage),
 *     4 stages of 16 KiB in flight per block, no registers held by loads. bf16: warps compute
 *     from shared memory; one __syncthreads per stage releases a slot, and thread 0 refills it
 *     (INT: see below). Slot, row group / tile, k-tile and mbarrier parity advance by
 *     increments: a few divisions per stage cost 5-6 % (bench/gpu/NOTES.md §2).
 *   - A block signals its dependents (griddepcontrol.launch_dependents) when its last stages
 *     are in flight; the first plan.prewait stages are issued before griddepcontrol.wait
 *     (weights never depend on the previous kernel), the rest right after the prologue.
 *   - The operations around the product are fused in: RMSNorm of the residual rows in the
 *     prologue (every block normalises the few rows itself, into shared memory); SwiGLU, the
 *     residual add, or bias + rotary embedding + K/V store in the epilogue.
 *
 * BF16 weights (nb <= 4): a stage is 8 rows x 1024 columns (one row per warp); each lane does
 * 16-byte shared loads and fp32 FMAs, one warp reduction per row at the row's last stage.
 * INT8 / INT4 (nb <= 8): a stage is 8 / 16 groups of one 16-row tile in the packed fragment
 * layout of k_quant.cu (plus their scale words); each of 8 consumer warps takes 1 / 2 groups side
 * by side, two accumulator chains each, dequantises with prmt / lop3 (+ hsub2 / hfma2) and
 * multiplies on the tensor cores (mma.sync m16n8k16 f16, the batch as the N dimension) against
 * the activations held in shared memory as f16 in B-fragment order (one 16-byte load per two
 * MMAs); the 8 warps' tile partials meet in shared memory at the tile's last stage. A ninth,
 * producer warp issues the bulk copies and runs the tile epilogues. The consumers (kernels.h
 * frk_qcons, chosen per product by plan.cu) differ in how a slot is released (a block barrier per
 * stage, or per-slot "empty" mbarriers), in the INT4 dequantisation (one shift per word, or the
 * zero point folded out) and in the blocks per SM. The timeline probes (frk_gemv_args.trace) live
 * in a separate instantiation. The INT kernel is a list of named steps (q_*), forced inline; a
 * restructuring must leave its SASS byte-identical (dev/cuda/sass_diff.py).
 *
 * Instances: k_stream_bf16 for nb 1-4; k_stream_q for (INT4: PW, FREE_ZF) and (INT8: PW, FREE,
 * PW3); each with and without the probes.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_frag.cuh"
#include "backend/cuda/rope_kv.cuh"

#define ST_BYTES 16384 /* bytes of weights per stage */
#define ST_NS_MAX 12   /* mbarriers per block (stages in flight at most) */
#define ST_NS_CAP 4    /* stages in flight per block (4 x 2 blocks per SM measured best, NOTES §2) */
#define ST_NS_MIN 2
#define ST_BPS 2       /* blocks per SM (measured best on an H200, bench/gpu/NOTES.md §2) */
#define ST_KC 1024     /* bf16: columns per stage row */
#define ST_DYN_MAX (216 * 1024) /* + the static 8.5 KiB stays under the 227 KiB per block */
/* Bytes of dynamic shared memory past an INT kernel's activations and group sums that every
 * launch reserves: the launch geometry (dynamic shared memory, and with it the stages that fit
 * and what fits beside a block on an SM) was measured with this reserve, once a buffer of
 * prepared RoPE pairs (2 tiles x 16 pairs x 40 bytes). */
#define ST_X_RESERVE 1280

/* First unit (row group / tile) of block b of G over N units (frk_stream_plan.tmap); block b's
 * range is [unit_lo(b), unit_lo(b + 1)). */
static __device__ __forceinline__ int unit_lo(int b, int G, int N, int m) {
    if (!m) return (int)((long)b * N / G);
    const int base = N / G, extra = N - base * G;
    return b < extra ? b * (base + 1) : extra * (base + 1) + (b - extra) * base;
}
/* Stages a block issues before its dependency wait (frk_stream_plan.prewait; the rest right
 * after its prologue). */
static __device__ __forceinline__ int n_prewait(const frk_gemv_args &a, int ns) {
    return a.plan.prewait > 0 && a.plan.prewait < ns ? a.plan.prewait : ns;
}
/* Whether the stages held back past the dependency wait are still to be issued. */
static __device__ __forceinline__ bool held_back(const frk_gemv_args &a, int ns) {
    return a.plan.prewait > 0 && a.plan.prewait < ns;
}

/* ------------------------------------------------------------------ PTX helpers */
static __device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
static __device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint32_t bar) { /* release, CTA scope */
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
/* global -> shared bulk copy; bytes % 16 == 0, both addresses 16-byte aligned */
static __device__ __forceinline__ void bulk_g2s(uint32_t dst, const void *src, uint32_t bytes,
                                                uint32_t bar, uint64_t pol) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1], %2, [%3], %4;" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar), "l"(pol)
                 : "memory");
}
static __device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
static __device__ __forceinline__ void fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
/* Thread 0, before the first bulk copy: one mbarrier per stage (one arrival each), made visible
 * to the copy engine; returns the L2 evict-first policy for the weight stream. */
static __device__ __forceinline__ uint64_t tma_begin(uint64_t *bar, int ns) {
    for (int i = 0; i < ns; i++) mbar_init(sptr(&bar[i]), 1);
    fence_mbar_init();
    fence_proxy_async();
    return policy_evict_first();
}

/* ------------------------------------------------------------------ prologue: the input rows */
/* The f16 activations in the INT kernels' B-fragment order (PX): within each 32 columns (two
 * k-steps), lane tq's four words b0, b1 of k-step 0 and b0, b1 of k-step 1 (columns 2tq + {0, 1},
 * 8 + 2tq + {0, 1}, then + 16) are 16 contiguous bytes, one shared load for two MMAs. */
static __device__ __forceinline__ int xperm(int k) {
    return (k & ~31) | ((k & 7) >> 1) << 3 | (k >> 4 & 1) << 2 | (k >> 3 & 1) << 1 | (k & 1);
}
/* One row normalised with its values and norm weights in registers: thread tid's
 * k = 4 tid + 1024 it, it < 4. */
static __device__ __forceinline__ bool xkeep_row(const frk_gemv_args &a, int nb) {
    return a.xf && nb == 1 && a.K <= 4096;
}
/* stage_x for one row of K <= 4096: its values and the norm weights stay in registers between the
 * sum of squares and the scaling (one trip to L2 instead of two; the same arithmetic in the same
 * order). Not inlined: its 32 live values would otherwise raise the whole kernel's register
 * count (and with it what fits beside the kernel on an SM). */
template <bool F16, bool PX>
static __device__ __noinline__ void stage_x_row(const float *xr, const float *nw, int K, float eps, void *xs,
                                                float (*wsum)[8], float *inv) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int kend = tid < 256 ? K : 0;
    float4 v[4], g[4];
#pragma unroll
    for (int it = 0; it < 4; it++) {
        const int k = tid * 4 + it * 1024;
        v[it] = g[it] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (k < kend) {
            v[it] = *(const float4 *)(xr + k);
            g[it] = *(const float4 *)(nw + k);
        }
    }
    float ss = 0.f;
#pragma unroll
    for (int it = 0; it < 4; it++)
        if (tid * 4 + it * 1024 < kend)
            ss += v[it].x * v[it].x + v[it].y * v[it].y + v[it].z * v[it].z + v[it].w * v[it].w;
    ss = warp_sum(ss);
    if (lane == 0 && warp < 8) wsum[0][warp] = ss;
    __syncthreads();
    if (tid == 0) {
        float t = 0.f;
#pragma unroll
        for (int w = 0; w < 8; w++) t += wsum[0][w];
        inv[0] = rsqrtf(t / (float)K + eps);
    }
    __syncthreads();
    const float iv = inv[0];
#pragma unroll
    for (int it = 0; it < 4; it++) {
        const int k = tid * 4 + it * 1024;
        if (k >= kend) continue;
        const bf162 p0 = __floats2bfloat162_rn(v[it].x * iv * g[it].x, v[it].y * iv * g[it].y);
        const bf162 p1 = __floats2bfloat162_rn(v[it].z * iv * g[it].z, v[it].w * iv * g[it].w);
        if (F16) {
            half *xr16 = (half *)xs;
            *(half2 *)(xr16 + (PX ? xperm(k) : k)) = __floats2half2_rn(__low2float(p0), __high2float(p0));
            *(half2 *)(xr16 + (PX ? xperm(k + 2) : k + 2)) = __floats2half2_rn(__low2float(p1), __high2float(p1));
        } else {
            bf162 *d = (bf162 *)((bf16 *)xs + k);
            d[0] = p0;
            d[1] = p1;
        }
    }
}
/* xs[n][0..Kp) = the n-th input row (bf16, or f16 when F16; in xperm order when PX), zero beyond
 * K; with a.xf, the RMSNorm of residual row rows[n] rounded to bf16 as k_rmsnorm rounds it. Ends
 * synchronised. */
template <bool F16, bool PX = false>
static __device__ __forceinline__ void stage_x(const frk_gemv_args &a, int nb, int Kp, void *xs,
                                               float (*wsum)[8], float *inv) {
    const int K = a.K, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int kend = tid < 256 ? K : 0; /* the 256 worker threads (a producer warp beyond them idles) */
    if (xkeep_row(a, nb)) {
        stage_x_row<F16, PX>(a.xf + (size_t)(a.rows ? a.rows[0] : 0) * K, a.nw, K, a.eps, xs, wsum, inv);
    } else if (a.xf) {
        for (int n = 0; n < nb; n++) {
            const float *xr = a.xf + (size_t)(a.rows ? a.rows[n] : n) * K;
            float ss = 0.f;
            for (int k = tid * 4; k < kend; k += 1024) {
                const float4 v = *(const float4 *)(xr + k);
                ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            }
            ss = warp_sum(ss);
            if (lane == 0 && warp < 8) wsum[n][warp] = ss;
        }
        __syncthreads();
        if (tid < nb) {
            float t = 0.f;
#pragma unroll
            for (int w = 0; w < 8; w++) t += wsum[tid][w];
            inv[tid] = rsqrtf(t / (float)K + a.eps);
        }
        __syncthreads();
        for (int n = 0; n < nb; n++) {
            const float *xr = a.xf + (size_t)(a.rows ? a.rows[n] : n) * K;
            const float iv = inv[n];
            for (int k = tid * 4; k < kend; k += 1024) {
                const float4 v = *(const float4 *)(xr + k);
                const float4 g = *(const float4 *)(a.nw + k);
                const bf162 p0 = __floats2bfloat162_rn(v.x * iv * g.x, v.y * iv * g.y);
                const bf162 p1 = __floats2bfloat162_rn(v.z * iv * g.z, v.w * iv * g.w);
                if (F16) {
                    half *xr16 = (half *)xs + (size_t)n * Kp;
                    *(half2 *)(xr16 + (PX ? xperm(k) : k)) = __floats2half2_rn(__low2float(p0), __high2float(p0));
                    *(half2 *)(xr16 + (PX ? xperm(k + 2) : k + 2)) = __floats2half2_rn(__low2float(p1), __high2float(p1));
                } else {
                    bf162 *d = (bf162 *)((bf16 *)xs + (size_t)n * Kp + k);
                    d[0] = p0;
                    d[1] = p1;
                }
            }
        }
    } else {
        for (int n = 0; n < nb; n++) {
            const bf16 *xr = (const bf16 *)a.x + (size_t)n * a.ldx;
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
    }
    if (F16)
        for (int n = 0; n < nb; n++)
            for (int k = K + tid; k < Kp; k += blockDim.x) ((half *)xs)[(size_t)n * Kp + (PX ? xperm(k) : k)] = __float2half(0.f);
    __syncthreads();
}

/* The INT kernels' activations with their group sums (ZF): stage_x<true, PX>, then gsum[g][n] =
 * the sum over group g (128 columns) of row n's f16 values (n < nb; 0 for nb <= n < 8), in fp32:
 * one thread per (row, group) reads the group's 256 contiguous bytes (in either layout) with a
 * rotated start, so the 16-byte loads of a warp spread over the banks. */
template <bool PX>
static __device__ void stage_x_zf(const frk_gemv_args &a, int nb, int Kp, half *xs, float *gsum,
                                  float (*wsum)[8], float *inv) {
    stage_x<true, PX>(a, nb, Kp, xs, wsum, inv);
    const int NG = Kp / FRK_GROUP;
    for (int i = threadIdx.x; i < NG * nb; i += blockDim.x) {
        const int n = i / NG, g = i - n * NG;
        float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
        const uint4 *p = (const uint4 *)(xs + (size_t)n * Kp + (size_t)g * FRK_GROUP);
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

/* ------------------------------------------------------------------ epilogues */
static __device__ __forceinline__ float silu_f(float g) { return g / (1.f + __expf(-g)); }

/* Rows (row, row + 1) of the pair-ordered qkv output for token n, in two halves: rope_prep does
 * every load (position, block table, cos / sin, bias), rope_apply adds the bias, rotates and
 * stores (the arithmetic of k_rope_kv). A V pair is stored unrotated. */
struct rope_pre {
    bf16 *d;         /* y0 -> d[j0], y1 -> d[j1] */
    float c, s, b0, b1;
    int j0, j1, v;   /* v: a V pair (no rotation) */
};
static __device__ __forceinline__ void rope_prep(const frk_rope_args &r, int n, int row, rope_pre &o) {
    const int D = r.D, half_d = D / 2, NQ = r.H * D, NK = r.Hkv * D;
    const int p = r.pos[n];
    bf16 *kdst, *vdst;
    size_t hs;
    rope_kv_dest(r, n, p, &kdst, &vdst, &hs);
    if (row < NQ + NK) {
        const int h = row / D, rr = row % D, i = rr / 2, off = h * D;
        o.j0 = r.interleaved ? rr : i;
        o.j1 = r.interleaved ? rr + 1 : i + half_d;
        o.b0 = r.bias ? r.bias[off + o.j0] : 0.f;
        o.b1 = r.bias ? r.bias[off + o.j1] : 0.f;
        o.c = r.cos_tab[(size_t)p * half_d + i];
        o.s = r.sin_tab[(size_t)p * half_d + i];
        o.d = h < r.H ? (bf16 *)r.qout + (size_t)n * NQ + off : kdst + (size_t)(h - r.H) * hs;
        o.v = 0;
    } else {
        const int idx = row - NQ - NK, hv = idx / D, dd = idx % D;
        o.b0 = r.bias ? r.bias[NQ + NK + idx] : 0.f;
        o.b1 = r.bias ? r.bias[NQ + NK + idx + 1] : 0.f;
        o.c = 1.f, o.s = 0.f;
        o.d = vdst + (size_t)hv * hs + dd;
        o.j0 = 0, o.j1 = 1, o.v = 1;
    }
}
static __device__ __forceinline__ void rope_apply(const rope_pre &o, float v0, float v1) {
    const float x0 = v0 + o.b0, x1 = v1 + o.b1;
    if (o.v) {
        o.d[0] = __float2bfloat16(x0);
        o.d[1] = __float2bfloat16(x1);
    } else {
        o.d[o.j0] = __float2bfloat16(x0 * o.c - x1 * o.s);
        o.d[o.j1] = __float2bfloat16(x0 * o.s + x1 * o.c);
    }
}
static __device__ void rope_pair(const frk_rope_args &r, int n, int row, float v0, float v1) {
    rope_pre o;
    rope_prep(r, n, row, o);
    rope_apply(o, v0, v1);
}
static __device__ __forceinline__ bool pair_mode(int mode) {
    return mode == FRK_OUT_SWIGLU || mode == FRK_OUT_ROPE;
}
static __device__ __forceinline__ void epi_one(const frk_gemv_args &a, int row, int n, float v) {
    float *o = (float *)a.out + (size_t)n * a.ldo + row;
    if (a.mode == FRK_OUT_ACC)
        *o += v;
    else
        *o = v;
}
static __device__ __forceinline__ void epi_pair(const frk_gemv_args &a, int row, int n, float v0,
                                                float v1) {
    if (a.mode == FRK_OUT_SWIGLU)
        ((bf16 *)a.out)[(size_t)n * a.ldo + row / 2] = __float2bfloat16(silu_f(v0) * v1);
    else
        rope_pair(a.rope, n, row, v0, v1);
}


/* ------------------------------------------------------------------ bf16 */
/* Output of row group rg (8 rows) from red (per row, per input). */
template <int NB>
static __device__ __forceinline__ void epi_bf16(const frk_gemv_args &a, const float (*red)[NB], int rg) {
    const int tid = threadIdx.x;
    if (!pair_mode(a.mode)) {
        if (tid < 8 * NB) {
            const int r = tid % 8, n = tid / 8, row = rg * 8 + r;
            if (row < a.M) epi_one(a, row, n, red[r][n]);
        }
    } else if (tid < 4 * NB) {
        const int j = tid % 4, n = tid / 4, row = rg * 8 + 2 * j;
        if (row + 1 < a.M) epi_pair(a, row, n, red[2 * j][n], red[2 * j + 1][n]);
    }
}

template <int NB, bool TR = false>
__global__ void __launch_bounds__(256, 1) k_stream_bf16(const frk_gemv_args a, int ns) {
    extern __shared__ __align__(128) unsigned char dsm[];
    __shared__ __align__(8) uint64_t bar[ST_NS_MAX];
    __shared__ float red[2][8][NB];
    __shared__ float wsum[8][8], inv[8];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int M = a.M, K = a.K;
    const int NRG = (M + 7) / 8, NKT = (K + ST_KC - 1) / ST_KC;
    const int rg0 = unit_lo(blockIdx.x, gridDim.x, NRG, a.plan.tmap);
    const int rg1 = unit_lo(blockIdx.x + 1, gridDim.x, NRG, a.plan.tmap);
    const int nst = (rg1 - rg0) * NKT;
    unsigned char *stg = dsm;
    bf16 *xs = (bf16 *)(dsm + (size_t)ns * ST_BYTES);
    const bf16 *W = (const bf16 *)a.W;
    uint64_t pol = 0;
    /* stage indices advance incrementally (no division per stage): the issuer's (thread 0) and
     * the consumers' */
    int i_slot = 0, i_rg = rg0, i_kt = 0;
    auto issue = [&]() { /* thread 0, stages in order */
        const int kc = min(ST_KC, K - i_kt * ST_KC), nr = min(8, M - i_rg * 8);
        const uint32_t b = sptr(&bar[i_slot]);
        mbar_expect_tx(b, (uint32_t)(nr * kc * 2));
        for (int r = 0; r < nr; r++)
            bulk_g2s(sptr(stg + i_slot * ST_BYTES + r * ST_KC * 2),
                     W + (size_t)(i_rg * 8 + r) * K + (size_t)i_kt * ST_KC, (uint32_t)(kc * 2), b, pol);
        if (++i_slot == ns) i_slot = 0;
        if (++i_kt == NKT) i_kt = 0, i_rg++;
    };
    if (tid == 0) {
        pol = tma_begin(bar, ns);
        const int npre = n_prewait(a, ns); /* the rest after the prologue */
        for (int s = 0; s < npre && s < nst; s++) issue();
    }
    const int trig = nst > ns ? nst - ns : 0;
    if (trig == 0) pdl_trigger();
    tl_mark(TR ? a.trace : nullptr, 0);
    pdl_wait();
    tl_mark(TR ? a.trace : nullptr, 1);
    stage_x<false>(a, NB, K, xs, wsum, inv); /* ends with __syncthreads (also publishes the barriers) */
    tl_mark(TR ? a.trace : nullptr, 3);
    if (held_back(a, ns) && tid == 0) /* the stages held back until now */
        for (int s = a.plan.prewait; s < ns && s < nst; s++) issue();
    float acc[NB];
#pragma unroll
    for (int n = 0; n < NB; n++) acc[n] = 0.f;
    int slot = 0, rg = rg0, kt = 0;
    uint32_t par = 0; /* (s / ns) & 1 */
    for (int s = 0; s < nst; s++) {
        if (s == trig && s > 0) pdl_trigger();
        const int kc = min(ST_KC, K - kt * ST_KC);
        mbar_wait(sptr(&bar[slot]), par);
        if (TR && s == nst - 1) tl_mark(a.trace, 4);
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
        __syncthreads();
        if (tid == 0 && s + ns < nst) {
            fence_proxy_async();
            issue();
        }
        if (last) epi_bf16<NB>(a, red[buf], rg);
        if (++slot == ns) slot = 0, par ^= 1u;
        if (++kt == NKT) kt = 0, rg++;
    }
    tl_mark(TR ? a.trace : nullptr, 2);
}

/* ------------------------------------------------------------------ INT8 / INT4 */
#define Q_NW 8 /* consumer warps */
template <int BITS>
struct qgeom {
    static constexpr int CPG = BITS == 4 ? 2 : 4; /* 16-byte chunks per lane per group */
    static constexpr int KPC = 8 / CPG;           /* k-steps per chunk */
    static constexpr int GBYTES = CPG * 512;      /* bytes per (tile, group) */
    static constexpr int GPS = ST_BYTES / GBYTES; /* groups per stage */
    static constexpr int GPW = GPS / Q_NW;        /* groups per warp per stage */
    static constexpr int SZB = GPS * 64;          /* scale bytes per stage */
    static constexpr int NACC = GPW >= 4 ? 1 : 2; /* accumulator chains per group */
};

/* Output of row tile rt (16 rows) from the 8 warps' fragment partials red[w][lane][e]; output i
 * (row i % 16, batch column i / 16) by the producer warp's lane with lane + 32 k = i. ACC mode:
 * `pre` is the lane's residual value of its first output, loaded when the tile started (each row
 * belongs to one block, so it cannot change meanwhile) to keep the read off the epilogue. */
static __device__ __forceinline__ void epi_q_from(const frk_gemv_args &a, const float (*red)[32][4], int rt,
                                                  float pre, int i0, int step) {
    const bool pm = pair_mode(a.mode);
    for (int i = i0; i < 16 * a.nb; i += step) {
        const int r = i % 16, n = i / 16, row = rt * 16 + r;
        if (pm && (r & 1)) continue;
        if (row >= a.M || (pm && row + 1 >= a.M)) continue;
        float v0 = 0.f, v1 = 0.f;
        {
            const int ln = (r % 8) * 4 + n / 2, e = (r / 8) * 2 + (n % 2);
#pragma unroll
            for (int w = 0; w < Q_NW; w++) v0 += red[w][ln][e];
        }
        if (pm) {
            const int r1 = r + 1, ln = (r1 % 8) * 4 + n / 2, e = (r1 / 8) * 2 + (n % 2);
#pragma unroll
            for (int w = 0; w < Q_NW; w++) v1 += red[w][ln][e];
            epi_pair(a, row, n, v0, v1);
        } else if (a.mode == FRK_OUT_ACC && i == i0) {
            ((float *)a.out)[(size_t)n * a.ldo + row] = pre + v0;
        } else {
            epi_one(a, row, n, v0);
        }
    }
}
/* The residual value of output i of tile rt for epi_q_from (ACC mode, i < 16 nb; else 0). */
static __device__ __forceinline__ float acc_pre_at(const frk_gemv_args &a, int rt, int i) {
    const int r = i % 16, n = i / 16, row = rt * 16 + r;
    if (a.mode != FRK_OUT_ACC || i >= 16 * a.nb || row >= a.M) return 0.f;
    return ((const float *)a.out)[(size_t)n * a.ldo + row];
}

/* The INT kernel's steps. Each is forced inline into k_stream_q, and the kernel must compile to
 * the same code as when they were one body (check: dev/cuda/sass_diff.py). nvcc optimises a step
 * on its own before inlining it, so two habits keep the code the same: a stage's loop state (slot,
 * tile, stage in the tile, parity) stays in the kernel's loops, passed in by value; and a step
 * that fills arrays of its caller computes into its own locals first and stores them at its end
 * (dev/cuda/README.md, "Restructuring a kernel"). */

/* Thread ITID, first: one mbarrier per slot (FR: also empty per slot, and tbar / rfree per tile
 * partial buffer) made visible to the copy engine; returns the weight stream's L2 policy. */
template <bool FR>
static __device__ __forceinline__ uint64_t q_barriers_init(uint64_t *bar, uint64_t *empty, uint64_t *tbar,
                                                           uint64_t *rfree, int ns) {
    if (FR) {
        for (int i = 0; i < ns; i++) mbar_init(sptr(&empty[i]), Q_NW);
        for (int b = 0; b < 2; b++) mbar_init(sptr(&tbar[b]), Q_NW), mbar_init(sptr(&rfree[b]), 1);
    }
    return tma_begin(bar, ns); /* (its fence publishes the inits above too) */
}

/* The producer warp, free-running consumers: once all eight consumer warps have released slot
 * esl (its empty mbarrier, phase epar), lane 0 refills it with the next stage in order. */
template <typename Issue>
static __device__ __forceinline__ void q_refill_free(uint64_t *empty, int esl, uint32_t epar, int lane, Issue &issue) {
    mbar_wait(sptr(&empty[esl]), epar); /* all eight consumer warps hold stage s */
    if (lane == 0) {
        fence_proxy_async();
        issue();
    }
}
/* The producer warp, free-running consumers, at tile rt's last stage (local tile index t): waits
 * for the eight warps' partials (tbar), runs the tile's epilogue, then frees the buffer (rfree). */
static __device__ __forceinline__ void q_tile_epi_free(const frk_gemv_args &a, uint64_t *tbar, uint64_t *rfree,
                                                       float (*red)[Q_NW][32][4], int rt, float pre, int lane,
                                                       int t) {
    mbar_wait(sptr(&tbar[t & 1]), (t >> 1) & 1);
    epi_q_from(a, red[t & 1], rt, pre, lane, 32);
    __syncwarp();
    if (lane == 0) mbar_arrive(sptr(&rfree[t & 1]));
}
/* The producer warp with one block barrier per stage, as the consumers: after stage s's barrier
 * (every consumer holds it in registers, so its slot is free) lane 0 refills the slot, then the
 * warp runs the epilogue of the tile whose partials the barrier published, while the consumers
 * do the next stage's MMAs. ACC mode: `pre` is loaded at each tile's first stage (acc_pre_at). */
template <typename Issue>
static __device__ __forceinline__ void q_producer_sync(const frk_gemv_args &a, int nst, int ns, int NST, int rt0,
                                                       int trig, int lane, float (*red)[Q_NW][32][4],
                                                       Issue &issue) {
    int rt = rt0, j = 0;
    float pre = 0.f;
    int pend = -1; /* the tile whose epilogue waits for the next barrier */
    for (int s = 0; s < nst; s++) {
        if (s == trig && s > 0) pdl_trigger();
        __syncthreads(); /* every consumer holds stage s in registers: the slot is free */
        if (lane == 0 && s + ns < nst) {
            fence_proxy_async();
            issue();
        }
        if (pend >= 0) epi_q_from(a, red[(pend - rt0) & 1], pend, pre, lane, 32);
        pend = -1;
        if (j == 0) pre = acc_pre_at(a, rt, lane);
        if (j == NST - 1) pend = rt;
        if (++j == NST) j = 0, rt++;
    }
    __syncthreads();
    if (pend >= 0) epi_q_from(a, red[(pend - rt0) & 1], pend, pre, lane, 32);
}

/* Consumer, load: the warp's scale words (rows gq and gq + 8 of each of its GPW groups) and
 * packed fragments of the stage in slot `slot` into registers. A group past the stage's end
 * (ng groups in it: a partial last stage) gets scale 0 and zero point 1024. */
template <int BITS>
static __device__ __forceinline__ void q_load(const unsigned char *stg, const uint32_t *ssz, int slot, int ng,
                                              int warp, int lane, int gq, uint32_t (&sw)[qgeom<BITS>::GPW][2],
                                              uint4 (&ch)[qgeom<BITS>::GPW][qgeom<BITS>::CPG]) {
    typedef qgeom<BITS> Q;
    uint32_t w[Q::GPW][2]; /* (filled here, stored to sw at the end: see above) */
#pragma unroll
    for (int gi = 0; gi < Q::GPW; gi++) {
        const int gl = warp * Q::GPW + gi;
        const bool ok = gl < ng;
        w[gi][0] = ok ? ssz[slot * (Q::SZB / 4) + gl * 16 + gq] : 0x64000000u;
        w[gi][1] = ok ? ssz[slot * (Q::SZB / 4) + gl * 16 + gq + 8] : 0x64000000u;
    }
#pragma unroll
    for (int gi = 0; gi < Q::GPW; gi++) sw[gi][0] = w[gi][0], sw[gi][1] = w[gi][1];
#pragma unroll
    for (int gi = 0; gi < Q::GPW; gi++)
#pragma unroll
        for (int ci = 0; ci < Q::CPG; ci++)
            ch[gi][ci] = *(const uint4 *)(stg + slot * ST_BYTES + ((warp * Q::GPW + gi) * Q::CPG + ci) * 512 + lane * 16);
}
/* Consumer, release: the warp holds its share of the stage, so the slot may be refilled during
 * the arithmetic. FR: the warp's arrival on the slot's empty mbarrier; else the block barrier
 * that the producer warp joins. */
template <bool FR>
static __device__ __forceinline__ void q_release(uint64_t *empty, int slot, int lane) {
    if (FR) {
        __syncwarp();
        if (lane == 0) mbar_arrive(sptr(&empty[slot])); /* this warp is done with the slot */
    } else {
        __syncthreads(); /* the slot is free: the producer refills it during the arithmetic */
    }
}
/* Consumer, unpack: from the scale words the zero points as f16 pairs (zz; D4S: nz = 960 -
 * (1024 + z) for the one-shift INT4 dequantisation) and the scales in fp32 (sc); each group's
 * index in the row (Gk: 0 for a group past the stage's end, so it reads column 0); the
 * accumulator chains cleared. */
template <int BITS, bool D4S>
static __device__ __forceinline__ void q_unpack(int g0, int ng, int warp, const uint32_t (&sw)[qgeom<BITS>::GPW][2],
                                                uint32_t (&zz)[qgeom<BITS>::GPW][2], uint32_t (&nz)[qgeom<BITS>::GPW],
                                                float (&sc)[qgeom<BITS>::GPW][2], int (&Gk)[qgeom<BITS>::GPW],
                                                float (&c)[qgeom<BITS>::GPW][qgeom<BITS>::NACC][4]) {
    typedef qgeom<BITS> Q;
#pragma unroll
    for (int gi = 0; gi < Q::GPW; gi++) {
        const int gl = warp * Q::GPW + gi;
        zz[gi][0] = __byte_perm(sw[gi][0], sw[gi][0], 0x3232);
        zz[gi][1] = __byte_perm(sw[gi][1], sw[gi][1], 0x3232);
        if (D4S) nz[gi] = qf_hsub2(0x63806380u, zz[gi][1]); /* f16 960 - (1024 + z) */
        sc[gi][0] = __half2float(__ushort_as_half((unsigned short)(sw[gi][0] & 0xffffu)));
        sc[gi][1] = __half2float(__ushort_as_half((unsigned short)(sw[gi][1] & 0xffffu)));
        Gk[gi] = gl < ng ? g0 + gl : 0;
#pragma unroll
        for (int h = 0; h < Q::NACC; h++)
#pragma unroll
            for (int e = 0; e < 4; e++) c[gi][h][e] = 0.f;
    }
}
/* Consumer, dequantise and multiply: per k-step and group, the A fragment dequantised from the
 * packed words (ZF: raw 1024 + q; D4S: one shift; else minus the zero point), the B fragment
 * from the activations (one 16-byte shared load per two k-steps) and one m16n8k16 MMA into the
 * group's chain of the k-step's parity. */
template <int BITS, bool ZF, bool D4S>
static __device__ __forceinline__ void q_mma(const half *xn, int tq, const uint4 (&ch)[qgeom<BITS>::GPW][qgeom<BITS>::CPG],
                                             const uint32_t (&zz)[qgeom<BITS>::GPW][2],
                                             const uint32_t (&nz)[qgeom<BITS>::GPW], const int (&Gk)[qgeom<BITS>::GPW],
                                             float (&c)[qgeom<BITS>::GPW][qgeom<BITS>::NACC][4]) {
    typedef qgeom<BITS> Q;
#pragma unroll
    for (int ci = 0; ci < Q::CPG; ci++) {
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
                if (!(kst & 1)) bx[gi] = *(const uint4 *)(xn + Gk[gi] * FRK_GROUP + (kst >> 1) * 32 + tq * 8);
                const uint32_t b0 = kst & 1 ? bx[gi].z : bx[gi].x;
                const uint32_t b1 = kst & 1 ? bx[gi].w : bx[gi].y;
                qf_mma(c[gi][kst % Q::NACC], A, b0, b1);
            }
    }
}
/* Consumer, fold: each group's chains summed, (ZF) its zero point taken out with the
 * activations' group sums, times its scales, into the warp's tile accumulator acc. */
template <int BITS, bool ZF>
static __device__ __forceinline__ void q_fold(const float *gsum, int tq, const uint32_t (&sw)[qgeom<BITS>::GPW][2],
                                              const float (&sc)[qgeom<BITS>::GPW][2], const int (&Gk)[qgeom<BITS>::GPW],
                                              const float (&c)[qgeom<BITS>::GPW][qgeom<BITS>::NACC][4],
                                              float (&acc)[4]) {
    typedef qgeom<BITS> Q;
#pragma unroll
    for (int gi = 0; gi < Q::GPW; gi++) {
        float t[4] = {c[gi][0][0], c[gi][0][1], c[gi][0][2], c[gi][0][3]};
        if (Q::NACC == 2)
#pragma unroll
            for (int e = 0; e < 4; e++) t[e] += c[gi][Q::NACC - 1][e];
        if (ZF) { /* the MMA summed (1024 + q) x (int4 rows gq + 8: (1024 + 16 q) x) */
            const float2 S = *(const float2 *)(gsum + Gk[gi] * 8 + 2 * tq);
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
}
/* One consumer warp's stage, after its slot has filled: load, release the slot, unpack,
 * dequantise and multiply, fold into acc. The warp's GPW groups side by side, each with two
 * accumulator chains (even / odd k-steps), so four (int4) or two (int8) independent MMA chains
 * are in flight rather than one chain of 16 / 8 dependent MMAs. A group past the stage's end
 * runs on column 0 with scale 0 and zero point 1024, adding exactly 0. */
template <int BITS, bool FR, bool ZF, bool D4S>
static __device__ __forceinline__ void q_stage(const unsigned char *stg, const uint32_t *ssz, uint64_t *empty,
                                               const half *xn, const float *gsum, int slot, int g0, int ng, int warp,
                                               int lane, int gq, int tq, float (&acc)[4]) {
    typedef qgeom<BITS> Q;
    uint32_t sw[Q::GPW][2];
    uint4 ch[Q::GPW][Q::CPG];
    q_load<BITS>(stg, ssz, slot, ng, warp, lane, gq, sw, ch);
    q_release<FR>(empty, slot, lane);
    uint32_t zz[Q::GPW][2], nz[Q::GPW];
    float sc[Q::GPW][2], c[Q::GPW][Q::NACC][4];
    int Gk[Q::GPW];
    q_unpack<BITS, D4S>(g0, ng, warp, sw, zz, nz, sc, Gk, c);
    q_mma<BITS, ZF, D4S>(xn, tq, ch, zz, nz, Gk, c);
    q_fold<BITS, ZF>(gsum, tq, sw, sc, Gk, c, acc);
}
/* Consumer, at a tile's last stage: the warp's tile partials into buffer tl & 1 of red (local
 * tile index tl; FR: once the producer has read tile tl - 2 from it, then signalled on tbar) and
 * the accumulator cleared. */
template <bool FR>
static __device__ __forceinline__ void q_tile_out(float (*red)[Q_NW][32][4], uint64_t *tbar, uint64_t *rfree, int tl,
                                                  int warp, int lane, float (&acc)[4]) {
    const int buf = tl & 1;
    if (FR && tl >= 2) mbar_wait(sptr(&rfree[buf]), ((tl >> 1) + 1) & 1); /* tile tl - 2 read */
    *(float4 *)red[buf][warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    acc[0] = acc[1] = acc[2] = acc[3] = 0.f;
    if (FR) {
        __syncwarp();
        if (lane == 0) mbar_arrive(sptr(&tbar[buf]));
    }
}

/* V (bits) is the consumer (kernels.h frk_qcons; the numbers are those of the experiments in
 * bench/gpu/NOTES.md §3):
 *   1  early release: a stage's fragments and scale words go to registers first, then the slot
 *      is released, then the MMAs (a slot is held for its load, not for its arithmetic);
 *   2  the activations in xperm order (one 16-byte shared load per two k-steps, no per-load
 *      select: the batch columns past nb repeat column 0 and are never stored);
 *   4  the INT4 dequantisation with one shift (qf_frag4s);
 *   8  the zero point folded out (the MMA sums raw (1024 + q) x, stage_x_zf's group sums remove
 *      the offsets once per group);
 *   16 a ninth, producer warp: it joins each stage's block barrier, then refills the slot (its
 *      lane 0) and runs the previous tile's epilogue while the eight consumer warps do the MMAs,
 *      so neither the bulk-copy issue nor the epilogue sits on a consumer warp's path to the next
 *      barrier (ncu: a third of the INT4 consumers' stall cycles were at that barrier);
 *   32 no block barrier per stage at all: consumers arrive on per-slot "empty" mbarriers, tile
 *      partials go to the producer through mbarriers;
 *   128 the register cap for three blocks per SM (at most 72 registers).
 * FRK_QC_PW = 23 (1+2+4+16), FREE = 55 (23+32), FREE_ZF = 59 (1+2+8+16+32), PW3 = 151 (23+128). */
#define Q_THREADS (32 * Q_NW + 32)
template <int BITS, bool TR, int V>
__global__ void __launch_bounds__(Q_THREADS, (V & 128) ? 3 : 1) k_stream_q(const __grid_constant__ frk_gemv_args a, int ns) {
    static_assert((V & 1) && (V & 2) && (V & 16), "every consumer: early release, B-fragment order, producer warp");
    constexpr bool ZF = (V & 8) != 0;
    constexpr bool FR = (V & 32) != 0; /* no block barrier per stage: per-slot "empty" mbarriers */
    constexpr int NW = Q_NW;
    constexpr int ITID = 32 * NW; /* the thread that issues the bulk copies (the producer's lane 0) */
    constexpr bool D4S = BITS == 4 && (V & 4) != 0 && !ZF;
    typedef qgeom<BITS> Q;
    extern __shared__ __align__(128) unsigned char dsm[];
    __shared__ __align__(8) uint64_t bar[ST_NS_MAX];
    /* FR: empty[slot] (8 consumer warps released it), tbar[b] (8 warps wrote tile partials b),
     * rfree[b] (the producer's epilogue has read them) */
    __shared__ __align__(8) uint64_t empty[FR ? ST_NS_MAX : 1], tbar[2], rfree[2];
    __shared__ __align__(16) float red[2][NW][32][4];
    __shared__ float wsum[8][8], inv[8];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, tq = lane & 3;
    const int M = a.M, K = a.K, nb = a.nb, NG = (K + FRK_GROUP - 1) / FRK_GROUP, Kp = NG * FRK_GROUP;
    const int NRT = (M + 15) / 16, NST = (NG + Q::GPS - 1) / Q::GPS;
    const int rt0 = unit_lo(blockIdx.x, gridDim.x, NRT, a.plan.tmap);
    const int rt1 = unit_lo(blockIdx.x + 1, gridDim.x, NRT, a.plan.tmap);
    const int nst = (rt1 - rt0) * NST;
    unsigned char *stg = dsm;
    uint32_t *ssz = (uint32_t *)(dsm + (size_t)ns * ST_BYTES);
    half *xs = (half *)(dsm + (size_t)ns * (ST_BYTES + Q::SZB));
    float *gsum = (float *)(xs + (size_t)nb * Kp); /* ZF: [NG][8] group sums of the activations */
    const unsigned char *Wp = (const unsigned char *)a.W;
    uint64_t pol = 0;
    int i_slot = 0, i_rt = rt0, i_j = 0; /* the issuer's stage indices (incremental) */
    auto issue = [&]() { /* the next stage: weights and scale words onto the slot's mbarrier */
        const int g0 = i_j * Q::GPS, ng = min(Q::GPS, NG - g0);
        const uint32_t b = sptr(&bar[i_slot]);
        mbar_expect_tx(b, (uint32_t)(ng * (Q::GBYTES + 64)));
        bulk_g2s(sptr(stg + i_slot * ST_BYTES), Wp + ((size_t)i_rt * NG + g0) * Q::GBYTES,
                 (uint32_t)(ng * Q::GBYTES), b, pol);
        bulk_g2s(sptr(ssz + i_slot * (Q::SZB / 4)), a.sz + ((size_t)i_rt * NG + g0) * 16,
                 (uint32_t)(ng * 64), b, pol);
        if (++i_slot == ns) i_slot = 0;
        if (++i_j == NST) i_j = 0, i_rt++;
    };
    if (tid == ITID) {
        pol = q_barriers_init<FR>(bar, empty, tbar, rfree, ns);
        const int npre = n_prewait(a, ns); /* the rest after the prologue */
        for (int s = 0; s < npre && s < nst; s++) issue();
    }
    const int trig = nst > ns ? nst - ns : 0;
    if (trig == 0) pdl_trigger();
    tl_mark(TR ? a.trace : nullptr, 0);
    pdl_wait();
    tl_mark(TR ? a.trace : nullptr, 1);
    if (ZF) stage_x_zf<true>(a, nb, Kp, xs, gsum, wsum, inv); /* the prologue: the activations */
    else stage_x<true, true>(a, nb, Kp, xs, wsum, inv);
    tl_mark(TR ? a.trace : nullptr, 3);
    if (held_back(a, ns) && tid == ITID) /* the stages held back until now */
        for (int s = a.plan.prewait; s < ns && s < nst; s++) issue();
    const half *xn = xs + (size_t)(gq < nb ? gq : 0) * Kp;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    int slot = 0, rt = rt0, j = 0; /* the stage indices of the loops below (incremental) */
    uint32_t par = 0;              /* (s / ns) & 1 */
    float pre = 0.f;               /* the producer, ACC: this lane's residual of the current tile */
    if (FR && warp == NW) { /* the producer warp, free-running consumers */
        uint32_t epar = 0;
        int esl = 0, t = 0; /* slot of stage s, local tile index */
        for (int s = 0; s < nst; s++) {
            if (s == trig && s > 0) pdl_trigger();
            if (s + ns < nst) q_refill_free(empty, esl, epar, lane, issue);
            if (j == 0) pre = acc_pre_at(a, rt, lane);
            if (j == NST - 1) { /* the tile's partials, then its epilogue, then the buffer is free */
                q_tile_epi_free(a, tbar, rfree, red, rt, pre, lane, t);
                t++;
            }
            if (++esl == ns) esl = 0, epar ^= 1u;
            if (++j == NST) j = 0, rt++;
        }
        tl_mark_by(TR ? a.trace : nullptr, 2, lane == 0); /* the block's last epilogue ends here */
        return;
    }
    if (warp == NW) { /* the producer warp: one barrier per stage, as the consumers */
        q_producer_sync(a, nst, ns, NST, rt0, trig, lane, red, issue);
        tl_mark_by(TR ? a.trace : nullptr, 2, lane == 0);
        return;
    }
    for (int s = 0; s < nst; s++) { /* the consumer warps */
        if (s == trig && s > 0) pdl_trigger();
        const int g0 = j * Q::GPS;
        const int ng = min(Q::GPS, NG - g0);
        mbar_wait(sptr(&bar[slot]), par);
        q_stage<BITS, FR, ZF, D4S>(stg, ssz, empty, xn, gsum, slot, g0, ng, warp, lane, gq, tq, acc);
        if (j == NST - 1) q_tile_out<FR>(red, tbar, rfree, rt - rt0, warp, lane, acc); /* to the producer */
        if (++slot == ns) slot = 0, par ^= 1u;
        if (++j == NST) j = 0, rt++;
    }
    if (!FR) __syncthreads(); /* the producer's last barrier */
    tl_mark(TR ? a.trace : nullptr, 2);
}

/* ------------------------------------------------------------------ host */
static size_t stage_bytes(int bits) {
    return bits == 16 ? ST_BYTES : ST_BYTES + (size_t)(bits == 4 ? qgeom<4>::SZB : qgeom<8>::SZB);
}
static size_t x_bytes(int K, int bits, int nb) { /* INT: f16 rows + the group sums [NG][8] + the reserve */
    return bits == 16 ? (size_t)nb * K * 2
                      : (size_t)nb * fr_cdiv(K, FRK_GROUP) * FRK_GROUP * 2 + (size_t)fr_cdiv(K, FRK_GROUP) * 32 +
                            ST_X_RESERVE;
}
/* Stages that fit beside the input rows at bps blocks per SM, up to ST_NS_MAX (0: none). */
static int n_stages(int K, int bits, int nb, int bps = ST_BPS) {
    /* n blocks per SM: each gets 1/n of the 227 KiB less its static part (<= 9 KiB) */
    const size_t avail = bps > 1 ? (size_t)(227 - 9 * bps) / bps * 1024 : (size_t)ST_DYN_MAX;
    const size_t xb = x_bytes(K, bits, nb);
    if (xb >= avail) return 0;
    const size_t n = (avail - xb) / stage_bytes(bits);
    return n > ST_NS_MAX ? ST_NS_MAX : (int)n;
}

extern "C" int frk_gemv_stream_supported(int M, int K, int bits, int nb) {
    if (M < 1 || K < 8 || K % 8 || nb < 1) return 0;
    if (bits == 16 ? nb > 4 : (bits == 8 || bits == 4) ? nb > 8 : 1) return 0;
    return n_stages(K, bits, nb) >= ST_NS_MIN;
}

extern "C" int frk_stream_qcons_supported(int bits, int qcons) {
    if (bits == 4) return qcons == FRK_QC_PW || qcons == FRK_QC_FREE_ZF;
    if (bits == 8) return qcons == FRK_QC_PW || qcons == FRK_QC_FREE || qcons == FRK_QC_PW3;
    return 0;
}

/* Per-device caches (the same facts for every decoder on a device; devices 0..63): the SM count,
 * and which kernels have had their attributes set (cudaFuncSetAttribute applies per device). */
static int sm_count(void) {
    static int n[64];
    int dev = 0;
    FR_CK(cudaGetDevice(&dev));
    if (dev < 0 || dev >= 64) return 132;
    if (!n[dev]) FR_CK(cudaDeviceGetAttribute(&n[dev], cudaDevAttrMultiProcessorCount, dev));
    return n[dev];
}
/* 1 the first time on the current device for the kernel owning *done (a per-kernel bit set). */
static bool first_on_device(unsigned long long *done) {
    int dev = 0;
    FR_CK(cudaGetDevice(&dev));
    const unsigned long long bit = 1ull << (dev & 63);
    if (*done & bit) return false;
    *done |= bit;
    return true;
}

template <typename... KArgs>
static void launch_stream(void (*kernel)(KArgs...), unsigned long long *attr_done, int units, int ns,
                          const frk_gemv_args *a, cudaStream_t st, int nthreads, int bps) {
    if (first_on_device(attr_done)) {
        cudaFuncAttributes fa;
        FR_CK(cudaFuncGetAttributes(&fa, kernel));
        const int dyn_max = (int)FR_MIN_SZ((size_t)ST_DYN_MAX, (size_t)227 * 1024 - fa.sharedSizeBytes);
        FR_CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn_max));
        /* the whole unified L1 as shared memory: an SM set up for just two of these blocks has no
         * room left for the next kernel's blocks, which then start only as these leave */
        FR_CK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                   (int)cudaSharedmemCarveoutMaxShared));
    }
    const int grid = units < bps * sm_count() ? units : bps * sm_count();
    const size_t smem = (size_t)ns * stage_bytes(a->bits) + x_bytes(a->K, a->bits, a->nb);
    frk_launch(kernel, dim3(grid), dim3(nthreads), smem, st, *a, ns);
}

template <int NB>
static void launch_bf16(int units, int ns, const frk_gemv_args *a, cudaStream_t st) {
    static unsigned long long done[2];
    if (a->trace) launch_stream(k_stream_bf16<NB, true>, &done[1], units, ns, a, st, 256, ST_BPS);
    else launch_stream(k_stream_bf16<NB, false>, &done[0], units, ns, a, st, 256, ST_BPS);
}
/* Consumer V at two blocks per SM. */
template <int BITS, int V>
static void launch_qv(int units, int ns, const frk_gemv_args *a, cudaStream_t st) {
    static unsigned long long done[2];
    if (a->trace) launch_stream(k_stream_q<BITS, true, V>, &done[1], units, ns, a, st, Q_THREADS, ST_BPS);
    else launch_stream(k_stream_q<BITS, false, V>, &done[0], units, ns, a, st, Q_THREADS, ST_BPS);
}
/* Consumer V at three blocks per SM (V | 128: registers capped at 72, as many stages as fit
 * beside them, at most ST_NS_CAP), for products with fewer row tiles than two blocks per SM take
 * in one round (the qkv product: 384 tiles), so that no block streams two; V at two blocks per
 * SM where three blocks' stages do not fit. */
template <int BITS, int V>
static void launch_qv3(int units, int ns, const frk_gemv_args *a, cudaStream_t st) {
    constexpr int VB = V | 128;
    static unsigned long long done[2];
    int nsb = n_stages(a->K, BITS, a->nb, 3);
    if (nsb > ST_NS_CAP) nsb = ST_NS_CAP;
    if (nsb < ST_NS_MIN) {
        launch_qv<BITS, V>(units, ns, a, st);
        return;
    }
    if (a->trace) launch_stream(k_stream_q<BITS, true, VB>, &done[1], units, nsb, a, st, Q_THREADS, 3);
    else launch_stream(k_stream_q<BITS, false, VB>, &done[0], units, nsb, a, st, Q_THREADS, 3);
}
/* The consumers of the plan table (plan.cu), per format. */
static void launch_q4(int units, int ns, const frk_gemv_args *a, cudaStream_t st) {
    switch (a->plan.qcons) {
    case FRK_QC_PW: launch_qv<4, 23>(units, ns, a, st); break;
    case FRK_QC_FREE_ZF: launch_qv<4, 59>(units, ns, a, st); break;
    default: FR_DEV_ASSERT(!"INT4 streamed product: consumer not built");
    }
}
static void launch_q8(int units, int ns, const frk_gemv_args *a, cudaStream_t st) {
    switch (a->plan.qcons) {
    case FRK_QC_PW: launch_qv<8, 23>(units, ns, a, st); break;
    case FRK_QC_FREE: launch_qv<8, 55>(units, ns, a, st); break;
    case FRK_QC_PW3: launch_qv3<8, 23>(units, ns, a, st); break;
    default: FR_DEV_ASSERT(!"INT8 streamed product: consumer not built");
    }
}

extern "C" void frk_gemv_stream(const frk_gemv_args *a, cudaStream_t st) {
    if (a->nb <= 0 || a->M <= 0) return;
    FR_DEV_ASSERT(frk_gemv_stream_supported(a->M, a->K, a->bits, a->nb));
    FR_DEV_ASSERT(a->xf ? (a->nw != nullptr && a->K % 4 == 0) : (a->x != nullptr && a->ldx % 8 == 0));
    FR_DEV_ASSERT(!(a->mode == FRK_OUT_SWIGLU || a->mode == FRK_OUT_ROPE) || a->M % 2 == 0);
    FR_DEV_ASSERT(a->mode != FRK_OUT_ROPE ||
                  (a->rope.cos_tab && a->rope.sin_tab && a->rope.pos && a->rope.D % 2 == 0 &&
                   a->M == (a->rope.H + 2 * a->rope.Hkv) * a->rope.D &&
                   (a->rope.kc ? (a->rope.vc && a->rope.block_tables && a->rope.tok_seq) : a->rope.kvnew != nullptr)));
    int ns = n_stages(a->K, a->bits, a->nb);
    if (ns > ST_NS_CAP) ns = ST_NS_CAP;
    if (a->bits == 16) {
        const int units = fr_cdiv(a->M, 8);
        switch (a->nb) {
        case 1: launch_bf16<1>(units, ns, a, st); break;
        case 2: launch_bf16<2>(units, ns, a, st); break;
        case 3: launch_bf16<3>(units, ns, a, st); break;
        default: launch_bf16<4>(units, ns, a, st); break;
        }
    } else {
        const int units = fr_cdiv(a->M, 16);
        if (a->bits == 4) launch_q4(units, ns, a, st);
        else launch_q8(units, ns, a, st);
    }
}

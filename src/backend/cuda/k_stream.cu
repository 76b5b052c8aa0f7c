/* k_stream.cu — the decode step's linear layers as weight streams (frk_gemv_stream; kernels.h).
 *
 * Batch-1 decode reads every weight once per token, so each linear layer is a stream from HBM
 * and the step is fast only if HBM never waits: not inside a kernel (enough bytes in flight),
 * not between kernels (ramp and tail), not during the small operations around the products.
 *
 *   - One block of 16 warps per SM owns a contiguous range of 16-row tiles. Its weights arrive
 *     in 8 stages of 16 KiB in flight (cp.async.cg by every thread, one commit group per stage;
 *     cp.async.wait_group + __syncthreads publish a stage, and the slot consumed in the previous
 *     iteration is refilled), so loads hold no registers and ~128 KiB per SM are in flight.
 *   - Every format multiplies on the tensor cores (mma.sync m16n8k16, fp32 accumulation, the
 *     batch as the N dimension): bf16 weight tiles come from shared memory through ldmatrix;
 *     INT8 / INT4 tiles are stored in fragment order (k_gemv.cu) and dequantised with lop3 / prmt
 *     + hsub2 into f16. A CUDA-core dot product spends ~3 instructions per weight and, with the
 *     few warps a streaming block can keep, ran at 2.2-2.8 TB/s issue-bound (ncu: 38 % SM
 *     throughput, ~5 cycles per issued instruction); the MMA needs ~0.05 (bf16).
 *   - The first stages are issued before griddepcontrol.wait (weights never depend on the
 *     previous kernel); dependents are released when the last stages are in flight.
 *   - The operations around the product are fused in: RMSNorm of the residual rows in the
 *     prologue (every block normalises the few rows itself, into shared memory); SwiGLU, the
 *     residual add, or bias + rotary embedding + K/V store in the epilogue.
 *
 * Tiles and stages: bf16 — a stage is 16 rows x 512 columns (rows padded by 16 bytes so ldmatrix
 * is conflict-free), each warp two 16-column k-steps; INT4 / INT8 — a stage is 16 / 8 groups of
 * 128 columns of one 16-row tile plus their scale words, each warp two 512-byte fragment chunks.
 * The 16 warps' fragment partials of a tile meet in shared memory at its last stage.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"

#define ST_THREADS 512
#define ST_NW (ST_THREADS / 32)
#define ST_NSA 8               /* stages in flight */
#define ST_KT16 512            /* bf16: columns per stage */
#define ST_ROWB16 (ST_KT16 * 2 + 16) /* bf16: padded shared-memory row */
#define ST_DYN_MAX (200 * 1024) /* + ~17 KiB static stays under the 227 KiB per block */

static int l2pf_bytes = 0;
extern "C" void frk_set_stream_l2pf(int bytes) { l2pf_bytes = bytes < 0 ? 0 : (bytes & ~15); }
extern "C" int frk_get_stream_l2pf(void) { return l2pf_bytes; }

/* ------------------------------------------------------------------ PTX helpers */
static __device__ __forceinline__ uint32_t sptr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void l2_prefetch(const void *p, uint32_t bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}
static __device__ void prefetch_range(const unsigned char *p, size_t len, int l2pf) {
    if (l2pf <= 0) return;
    if (len > (size_t)l2pf) len = (size_t)l2pf;
    len &= ~(size_t)15;
    for (size_t off = 0; off < len; off += 16384)
        l2_prefetch(p + off, (uint32_t)(len - off < 16384 ? len - off : 16384));
}
/* 16-byte global -> shared copy; src_bytes 0 writes zeros (nothing is read) */
static __device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes = 16) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}
static __device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
static __device__ __forceinline__ void cp_wait_stages() {
    asm volatile("cp.async.wait_group %0;" ::"n"(ST_NSA - 2) : "memory");
}
static __device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
static __device__ __forceinline__ void ldsm_x4(uint32_t a[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(addr));
}
static __device__ __forceinline__ uint32_t lop3_and_or_s(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r; /* (a & b) | c */
    asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}
static __device__ __forceinline__ uint32_t hsub2_s(uint32_t a, uint32_t b) {
    half2 r = __hsub2(*(const half2 *)&a, *(const half2 *)&b);
    return *(uint32_t *)&r;
}
template <bool BF>
static __device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    if (BF)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* ------------------------------------------------------------------ prologue: the input rows */
/* xs[n][0..Kp) = the n-th input row (bf16, or f16 when F16), zero beyond K; with a.xf, the
 * RMSNorm of residual row rows[n] rounded to bf16 as k_rmsnorm rounds it. Ends synchronised. */
template <bool F16>
static __device__ void stage_x(const frk_gemv_args &a, int nb, int Kp, void *xs,
                               float (*wsum)[ST_NW], float *inv) {
    const int K = a.K, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (a.xf) {
        for (int n = 0; n < nb; n++) {
            const float *xr = a.xf + (size_t)(a.rows ? a.rows[n] : n) * K;
            float ss = 0.f;
            for (int k = tid * 4; k < K; k += ST_THREADS * 4) {
                const float4 v = *(const float4 *)(xr + k);
                ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            }
            ss = warp_sum(ss);
            if (lane == 0) wsum[n][warp] = ss;
        }
        __syncthreads();
        if (tid < nb) {
            float t = 0.f;
#pragma unroll
            for (int w = 0; w < ST_NW; w++) t += wsum[tid][w];
            inv[tid] = rsqrtf(t / (float)K + a.eps);
        }
        __syncthreads();
        for (int n = 0; n < nb; n++) {
            const float *xr = a.xf + (size_t)(a.rows ? a.rows[n] : n) * K;
            const float iv = inv[n];
            for (int k = tid * 4; k < K; k += ST_THREADS * 4) {
                const float4 v = *(const float4 *)(xr + k);
                const float4 g = *(const float4 *)(a.nw + k);
                const bf162 p0 = __floats2bfloat162_rn(v.x * iv * g.x, v.y * iv * g.y);
                const bf162 p1 = __floats2bfloat162_rn(v.z * iv * g.z, v.w * iv * g.w);
                if (F16) {
                    half2 *d = (half2 *)((half *)xs + (size_t)n * Kp + k);
                    d[0] = __floats2half2_rn(__low2float(p0), __high2float(p0));
                    d[1] = __floats2half2_rn(__low2float(p1), __high2float(p1));
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
            for (int k = tid * 8; k < K; k += ST_THREADS * 8) {
                const uint4 v = *(const uint4 *)(xr + k);
                if (F16) {
                    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
                    half2 *d = (half2 *)((half *)xs + (size_t)n * Kp + k);
#pragma unroll
                    for (int e = 0; e < 4; e++) d[e] = __floats2half2_rn(bf_lo(w[e]), bf_hi(w[e]));
                } else {
                    *(uint4 *)((bf16 *)xs + (size_t)n * Kp + k) = v;
                }
            }
        }
    }
    for (int n = 0; n < nb; n++) /* zero padding up to Kp */
        for (int k = K + tid; k < Kp; k += ST_THREADS) {
            if (F16)
                ((half *)xs)[(size_t)n * Kp + k] = __float2half(0.f);
            else
                ((bf16 *)xs)[(size_t)n * Kp + k] = __float2bfloat16(0.f);
        }
    __syncthreads();
}

/* ------------------------------------------------------------------ epilogues */
static __device__ __forceinline__ float silu_f(float g) { return g / (1.f + __expf(-g)); }

/* Rows (row, row + 1) of the pair-ordered qkv output for token n: bias, rotation, store (the
 * arithmetic of k_rope_kv). */
static __device__ void rope_pair(const frk_rope_args &r, int n, int row, float v0, float v1) {
    const int D = r.D, half_d = D / 2, NQ = r.H * D, NK = r.Hkv * D;
    const int p = r.pos[n];
    bf16 *kdst, *vdst;
    size_t hs;
    if (r.kc) {
        const int blk = r.block_tables[(size_t)r.tok_seq[n] * r.bt_stride + p / FRK_BLOCK];
        const size_t base = (((size_t)blk * r.n_layer + r.layer) * r.Hkv) * FRK_BLOCK * D +
                            (size_t)(p % FRK_BLOCK) * D;
        kdst = (bf16 *)r.kc + base;
        vdst = (bf16 *)r.vc + base;
        hs = (size_t)FRK_BLOCK * D;
    } else {
        kdst = (bf16 *)r.kvnew + (size_t)n * 2 * NK;
        vdst = kdst + NK;
        hs = D;
    }
    if (row < NQ + NK) {
        const int h = row / D, rr = row % D, i = rr / 2, off = h * D;
        const int i0 = r.interleaved ? rr : i, i1 = r.interleaved ? rr + 1 : i + half_d;
        float x0 = v0, x1 = v1;
        if (r.bias) {
            x0 += r.bias[off + i0];
            x1 += r.bias[off + i1];
        }
        const float c = r.cos_tab[(size_t)p * half_d + i], s = r.sin_tab[(size_t)p * half_d + i];
        const float y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
        bf16 *d = h < r.H ? (bf16 *)r.qout + (size_t)n * NQ + off : kdst + (size_t)(h - r.H) * hs;
        d[i0] = __float2bfloat16(y0);
        d[i1] = __float2bfloat16(y1);
    } else {
        const int idx = row - NQ - NK, hv = idx / D, d = idx % D;
        float x0 = v0, x1 = v1;
        if (r.bias) {
            x0 += r.bias[NQ + NK + idx];
            x1 += r.bias[NQ + NK + idx + 1];
        }
        vdst[(size_t)hv * hs + d] = __float2bfloat16(x0);
        vdst[(size_t)hv * hs + d + 1] = __float2bfloat16(x1);
    }
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

/* ------------------------------------------------------------------ geometry */
template <int BITS>
struct sgeom {
    static constexpr bool BF = BITS == 16;
    static constexpr int CPG = BITS == 4 ? 2 : 4;             /* INT: 512-byte chunks per (tile, group) */
    static constexpr int KPC = 8 / CPG;                       /* INT: k-steps per 16-byte lane chunk */
    static constexpr int GBYTES = CPG * 512;                  /* INT: bytes per (tile, group) */
    static constexpr int GPS = BF ? 1 : 16384 / GBYTES;       /* INT: groups per stage */
    static constexpr int SZB = BF ? 0 : GPS * 64;             /* INT: scale bytes per stage */
    static constexpr int WB = BF ? 16 * ST_ROWB16 : 16384;    /* weight bytes per stage in shared memory */
    static constexpr int STAGE = WB + SZB;
};

/* Output of row tile rt (16 rows) from the warps' fragment partials red[w][lane][e]. */
static __device__ void epi_tile(const frk_gemv_args &a, const float (*red)[32][4], int rt) {
    const bool pm = pair_mode(a.mode);
    for (int i = threadIdx.x; i < 16 * a.nb; i += ST_THREADS) {
        const int r = i % 16, n = i / 16, row = rt * 16 + r;
        if (pm && (r & 1)) continue;
        if (row >= a.M || (pm && row + 1 >= a.M)) continue;
        float v0 = 0.f, v1 = 0.f;
        {
            const int ln = (r % 8) * 4 + n / 2, e = (r / 8) * 2 + (n % 2);
#pragma unroll
            for (int w = 0; w < ST_NW; w++) v0 += red[w][ln][e];
        }
        if (pm) {
            const int r1 = r + 1, ln = (r1 % 8) * 4 + n / 2, e = (r1 / 8) * 2 + (n % 2);
#pragma unroll
            for (int w = 0; w < ST_NW; w++) v1 += red[w][ln][e];
            epi_pair(a, row, n, v0, v1);
        } else {
            epi_one(a, row, n, v0);
        }
    }
}

/* ------------------------------------------------------------------ the kernel */
template <int BITS>
__global__ void __launch_bounds__(ST_THREADS, 1) k_stream(const frk_gemv_args a, int l2pf) {
    typedef sgeom<BITS> S;
    extern __shared__ __align__(128) unsigned char dsm[];
    __shared__ __align__(16) float red[2][ST_NW][32][4];
    __shared__ float wsum[8][ST_NW], inv[8];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, tq = lane & 3;
    const int M = a.M, K = a.K, nb = a.nb;
    /* k-extent: bf16 tiles of 512 columns; INT groups of 128 */
    const int NG = S::BF ? (K + ST_KT16 - 1) / ST_KT16 : (K + FRK_GROUP - 1) / FRK_GROUP;
    const int Kp = S::BF ? (K + 15) / 16 * 16 : NG * FRK_GROUP;
    const int NRT = (M + 15) / 16, NST = S::BF ? NG : (NG + S::GPS - 1) / S::GPS;
    const int rt0 = (int)((long)blockIdx.x * NRT / gridDim.x);
    const int rt1 = (int)((long)(blockIdx.x + 1) * NRT / gridDim.x);
    const int nst = (rt1 - rt0) * NST;
    unsigned char *stg = dsm;
    void *xs = dsm + (size_t)ST_NSA * S::STAGE;
    const unsigned char *Wb = (const unsigned char *)a.W;
    auto load = [&](int s) { /* every thread: its 16-byte pieces of stage s, one commit group */
        if (s < nst) {
            const int slot = s % ST_NSA, rt = rt0 + s / NST, j = s % NST;
            unsigned char *dst = stg + (size_t)slot * S::STAGE;
            if (S::BF) {
                const int kc = min(ST_KT16, K - j * ST_KT16);
#pragma unroll
                for (int i = 0; i < 1024 / ST_THREADS; i++) {
                    const int c = tid + ST_THREADS * i, r = c >> 6, v = c & 63, row = rt * 16 + r;
                    const bool ok = row < M && v * 8 < kc;
                    cp_async16(sptr(dst + r * ST_ROWB16 + v * 16),
                               ok ? Wb + ((size_t)row * K + (size_t)j * ST_KT16 + v * 8) * 2 : Wb, ok ? 16 : 0);
                }
            } else {
                const int g0 = j * S::GPS, ng = min(S::GPS, NG - g0);
                const unsigned char *src = Wb + ((size_t)rt * NG + g0) * S::GBYTES;
#pragma unroll
                for (int i = 0; i < 1024 / ST_THREADS; i++) {
                    const int c = tid + ST_THREADS * i;
                    if (c * 16 < ng * S::GBYTES) cp_async16(sptr(dst + c * 16), src + c * 16);
                }
                if (tid < ng * 4)
                    cp_async16(sptr(dst + S::WB + tid * 16), a.sz + ((size_t)rt * NG + g0) * 16 + tid * 4);
            }
        }
        cp_commit();
    };
    for (int s = 0; s < ST_NSA - 1; s++) load(s);
    if (tid == 0) {
        const size_t tile_bytes = S::BF ? (size_t)16 * K * 2 : (size_t)NG * S::GBYTES;
        prefetch_range(Wb + (size_t)rt0 * tile_bytes, (size_t)(rt1 - rt0) * tile_bytes, l2pf);
    }
    const int trig = nst > ST_NSA ? nst - ST_NSA : 0;
    if (trig == 0) pdl_trigger();
    pdl_wait();
    stage_x<!S::BF>(a, nb, Kp, xs, wsum, inv);
    /* B fragments: column n = gq of the batch (zero for gq >= nb) */
    const bool bcol = gq < nb;
    const uint16_t *xn = (const uint16_t *)xs + (size_t)(bcol ? gq : 0) * Kp;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    int pend = -1; /* row tile whose epilogue waits for the next __syncthreads */
    for (int s = 0; s < nst; s++) {
        if (s == trig && s > 0) pdl_trigger();
        const int slot = s % ST_NSA, rt = rt0 + s / NST, j = s % NST;
        cp_wait_stages();
        __syncthreads();
        if (pend >= 0) epi_tile(a, red[(pend - rt0) & 1], pend);
        pend = -1;
        load(s + ST_NSA - 1);
        const unsigned char *st8 = stg + (size_t)slot * S::STAGE;
        if (S::BF) {
            const int kc = min(ST_KT16, K - j * ST_KT16);
#pragma unroll
            for (int q = 0; q < 2; q++) {
                const int kk = (warp * 2 + q) * 16; /* column within the stage */
                if (kk >= kc) break;
                uint32_t A[4];
                const int m = lane >> 3, r = (m & 1) * 8 + (lane & 7), col = kk + (m >> 1) * 8;
                ldsm_x4(A, sptr(st8 + r * ST_ROWB16 + col * 2));
                const int k = j * ST_KT16 + kk + 2 * tq;
                const uint32_t b0 = bcol ? *(const uint32_t *)(xn + k) : 0u;
                const uint32_t b1 = bcol ? *(const uint32_t *)(xn + k + 8) : 0u;
                mma16816<true>(acc, A, b0, b1);
            }
        } else {
            const int g0 = j * S::GPS, ng = min(S::GPS, NG - g0);
            const int c0 = warp * 2, gl = c0 / S::CPG, G = g0 + gl; /* two chunks of one group */
            if (gl < ng) {
                const uint32_t *ssz = (const uint32_t *)(st8 + S::WB);
                const uint32_t s0 = ssz[gl * 16 + gq], s1 = ssz[gl * 16 + gq + 8];
                const uint32_t zz0 = __byte_perm(s0, s0, 0x3232), zz1 = __byte_perm(s1, s1, 0x3232);
                const float sc0 = __half2float(__ushort_as_half((unsigned short)(s0 & 0xffffu)));
                const float sc1 = __half2float(__ushort_as_half((unsigned short)(s1 & 0xffffu)));
                float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    const int ci = (c0 + q) % S::CPG;
                    const uint4 ch = *(const uint4 *)(st8 + (gl * S::CPG + ci) * 512 + lane * 16);
                    const uint32_t wd[4] = {ch.x, ch.y, ch.z, ch.w};
#pragma unroll
                    for (int jj = 0; jj < S::KPC; jj++) {
                        uint32_t A[4];
                        if (BITS == 4) {
                            const uint32_t w = wd[jj];
                            A[0] = lop3_and_or_s(w, 0x000F000Fu, 0x64006400u);
                            A[1] = lop3_and_or_s(w >> 4, 0x000F000Fu, 0x64006400u);
                            A[2] = lop3_and_or_s(w >> 8, 0x000F000Fu, 0x64006400u);
                            A[3] = lop3_and_or_s(w >> 12, 0x000F000Fu, 0x64006400u);
                        } else {
                            const uint32_t w0 = wd[2 * jj], w1 = wd[2 * jj + 1];
                            A[0] = __byte_perm(w0, 0x64646464u, 0x4140);
                            A[1] = __byte_perm(w0, 0x64646464u, 0x4342);
                            A[2] = __byte_perm(w1, 0x64646464u, 0x4140);
                            A[3] = __byte_perm(w1, 0x64646464u, 0x4342);
                        }
                        A[0] = hsub2_s(A[0], zz0);
                        A[1] = hsub2_s(A[1], zz1);
                        A[2] = hsub2_s(A[2], zz0);
                        A[3] = hsub2_s(A[3], zz1);
                        const int k = (G * 8 + ci * S::KPC + jj) * 16 + 2 * tq;
                        const uint32_t b0 = bcol ? *(const uint32_t *)(xn + k) : 0u;
                        const uint32_t b1 = bcol ? *(const uint32_t *)(xn + k + 8) : 0u;
                        mma16816<false>(c, A, b0, b1);
                    }
                }
                acc[0] = fmaf(sc0, c[0], acc[0]);
                acc[1] = fmaf(sc0, c[1], acc[1]);
                acc[2] = fmaf(sc1, c[2], acc[2]);
                acc[3] = fmaf(sc1, c[3], acc[3]);
            }
        }
        if (j == NST - 1) { /* the tile's last stage: partials out, epilogue after the next barrier */
            *(float4 *)red[(rt - rt0) & 1][warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
            acc[0] = acc[1] = acc[2] = acc[3] = 0.f;
            pend = rt;
        }
    }
    cp_wait_all();
    __syncthreads();
    if (pend >= 0) epi_tile(a, red[(pend - rt0) & 1], pend);
}

/* ------------------------------------------------------------------ host */
static size_t stage_bytes(int bits) {
    return bits == 16 ? sgeom<16>::STAGE : bits == 8 ? sgeom<8>::STAGE : sgeom<4>::STAGE;
}
static size_t x_bytes(int K, int bits, int nb) {
    const size_t kp = bits == 16 ? (size_t)(K + 15) / 16 * 16 : (size_t)fr_cdiv(K, FRK_GROUP) * FRK_GROUP;
    return (size_t)nb * kp * 2;
}
static size_t smem_bytes(int K, int bits, int nb) { return ST_NSA * stage_bytes(bits) + x_bytes(K, bits, nb); }

extern "C" int frk_gemv_stream_supported(int M, int K, int bits, int nb) {
    if (M < 1 || K < 8 || K % 8 || nb < 1 || nb > 8) return 0;
    if (bits != 16 && bits != 8 && bits != 4) return 0;
    return smem_bytes(K, bits, nb) <= ST_DYN_MAX;
}

static int sm_count(void) {
    static int n[64];
    int dev = 0;
    FR_CK(cudaGetDevice(&dev));
    if (dev < 0 || dev >= 64) return 132;
    if (!n[dev]) FR_CK(cudaDeviceGetAttribute(&n[dev], cudaDevAttrMultiProcessorCount, dev));
    return n[dev];
}

template <int BITS>
static void launch_stream(const frk_gemv_args *a, cudaStream_t st) {
    static bool attr_set;
    if (!attr_set) {
        FR_CK(cudaFuncSetAttribute(k_stream<BITS>, cudaFuncAttributeMaxDynamicSharedMemorySize, ST_DYN_MAX));
        attr_set = true;
    }
    const int units = fr_cdiv(a->M, 16);
    const int grid = units < sm_count() ? units : sm_count();
    frk_launch(k_stream<BITS>, dim3(grid), dim3(ST_THREADS), smem_bytes(a->K, BITS, a->nb), st, *a, l2pf_bytes);
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
    if (a->bits == 16)
        launch_stream<16>(a, st);
    else if (a->bits == 8)
        launch_stream<8>(a, st);
    else
        launch_stream<4>(a, st);
}

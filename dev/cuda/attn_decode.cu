/* attn_decode.cu — decode attention over a paged bf16 KV cache (a few query tokens, each over
 * its whole context), its variants checked against a CPU reference and timed alone.
 *
 *   make dev && ./build-dev/attn_decode                 every variant
 *   ./build-dev/attn_decode 3                           one variant (clusters of 8)
 *   ./build-dev/attn_decode -c 2048 -t 4 -r 100         context 2048, 4 tokens
 *
 * The kernels are those of src/backend/cuda/k_attn.cu when every variant still lived there,
 * without programmatic dependent launch and timeline probes (so the K/V rows are all loaded
 * after the start, and the early-load split of production does not apply). Shape: Llama-3-8B
 * (32 query heads, 8 KV heads, head_dim 128: G = 4 query heads share a KV head); the cache holds
 * one layer; each token has its own sequence whose blocks of 16 positions are scattered through
 * the pool by a random block table. Variants:
 *
 *   0  per-split kernel (16-key chunks dealt to 64 splits) + combine kernel   (production before clusters)
 *   1  the same, the splits merged by the last block of each (token, KV head) (atomic ticket; "merged")
 *   2  one block per (token, KV head), 64-key chunks, no split                (the v1 shape)
 *   3  one kernel of thread-block clusters of 8: ranges merged in distributed shared memory   (production: bf16)
 *   4  clusters of 16 (non-portable cluster size)                           (production: INT8, INT4 weights)
 *   5  clusters of 8 at <= 64 registers                                     (v26: -0.5 % in the step)
 *   6  per-split + combine at <= 64 registers                               (v21: -2 to -3 % in the step)
 *   7  per-split + combine, the threads prefetching 34 MB of "next weights" into L2 (v12: -1.7 %)
 *
 * Alone, variant 7 only shows the prefetch's own cost, and the register caps (5, 6) only their
 * spills: what they were meant to buy (room beside the streamed GEMV blocks) needs a neighbour.
 */
#include "common.h"

#include <vector>

#define LOG2E 1.4426950408889634f
#define KV_BLOCK 16 /* positions per cache block */
#define CHUNK 64    /* keys per chunk without splits */
#define SPLIT_CH 16 /* keys per chunk of the split kernel at <= 4 tokens */

/* The launch's arguments (a reduced frk_attn_args). Cache layout: [block][Hkv][KV_BLOCK][D] bf16. */
struct attn_args {
    const uint16_t *q;                     /* bf16 [T][H][D] */
    const uint16_t *kc, *vc;               /* bf16 pools */
    const int32_t *pos, *block_tables;     /* pos[t] = ctx - 1; block_tables [T][bt_stride] */
    int T, H, Hkv, D, bt_stride, n_split;
    float *part;                           /* split: f32 [T][H][n_split][D + 2] (o, m, l) */
    uint16_t *out;                         /* bf16 [T][H][D] */
    int *counters;                         /* merged: int [T][Hkv], zero */
    const void *pf;                        /* optional range the threads prefetch into L2 */
    long long pf_bytes;
};

static __device__ __forceinline__ uint32_t sptr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
static __device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
static __device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
static __device__ __forceinline__ void cp_async16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
static __device__ __forceinline__ void l2_prefetch_line(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

/* ------------------------------------------------------------------ per-split kernel */
/* Merge the first ns (o, m, l) partials of head hq of token t into out, one warp; the partials
 * come from other blocks of the same grid, so they are read past L1. */
static __device__ void combine_warp(const float *part, int t, int hq, int nsplit, int ns, int H, int D, bf16 *out) {
    const int lane = threadIdx.x & 31;
    const float *pp = part + ((size_t)t * H + hq) * nsplit * (D + 2);
    float m0 = -INFINITY, l0 = 0.f, m1 = -INFINITY, l1 = 0.f;
    if (lane < ns) m0 = __ldcg(pp + lane * (D + 2) + D), l0 = __ldcg(pp + lane * (D + 2) + D + 1);
    if (lane + 32 < ns) m1 = __ldcg(pp + (lane + 32) * (D + 2) + D), l1 = __ldcg(pp + (lane + 32) * (D + 2) + D + 1);
    if (!(l0 > 0.f)) m0 = -INFINITY;
    if (!(l1 > 0.f)) m1 = -INFINITY;
    const float M = warp_max(fmaxf(m0, m1));
    const float w0 = l0 > 0.f ? exp2f(m0 - M) : 0.f, w1 = l1 > 0.f ? exp2f(m1 - M) : 0.f;
    const float L = warp_sum(w0 * l0 + w1 * l1);
    const float inv_l = L > 0.f ? 1.f / L : 0.f;
    for (int d = lane; d < D; d += 32) {
        float acc = 0.f;
#pragma unroll 8
        for (int sp = 0; sp < ns; sp++) {
            const float w = __shfl_sync(0xffffffffu, sp < 32 ? w0 : w1, sp & 31);
            acc = fmaf(w, __ldcg(pp + sp * (D + 2) + d), acc);
        }
        out[(size_t)t * H * D + (size_t)hq * D + d] = __float2bfloat16(acc * inv_l);
    }
}

/* One block of 128 threads per (token, KV head, split); the G query heads of the KV head
 * together. Chunks of CH keys are dealt round-robin to the splits: phase 1 scores (D/8 threads
 * a key, one 16-byte load each, shuffle reduction), phase 2 running max / sum per head (base 2),
 * phase 3 o += p v (8 columns a thread), reduced once at the end; with splits, (o, m, l)
 * partials for the combine kernel or (counters) for the last block to finish. */
template <int D, int GM, int CH, int MINB = 1>
__global__ void __launch_bounds__(128, MINB) k_attn(attn_args a, int G) {
    constexpr int TPK = D / 8;
    constexpr int KPP = 128 / TPK;
    constexpr int NP = CH / KPP > 0 ? CH / KPP : 1;
    __shared__ float qs[GM][D];
    __shared__ float sc[GM][CH];
    __shared__ float m_run[GM], l_run[GM], alpha[GM];
    __shared__ float red[4][GM][D];
    const int t = blockIdx.z, g = blockIdx.y, split = blockIdx.x, nsplit = gridDim.x;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (a.pf) { /* the next weights into L2, by every thread */
        const long long nt = (long long)gridDim.x * gridDim.y * gridDim.z * 128;
        const long long me = (((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * 128 + tid;
        for (long long o = me * 128; o < a.pf_bytes; o += nt * 128) l2_prefetch_line((const char *)a.pf + o);
    }
    const int H = a.H, Hkv = a.Hkv;
    const int ctx = a.pos[t] + 1;
    const int32_t *bt = a.block_tables + (size_t)t * a.bt_stride;
    const int kg = tid / TPK, part = tid % TPK;
    const int nchunks = (ctx + CH - 1) / CH;
    const int ns_eff = nsplit < nchunks ? nsplit : nchunks; /* splits with keys; the rest leave */
    if (nsplit > 1 && split >= ns_eff) return;
    uint4 kr[NP], vr[NP];
    auto load_chunk = [&](int c) { /* every K and V row of the chunk this thread needs, at once */
        const int k0 = c * CH, nk = min(CH, ctx - k0);
#pragma unroll
        for (int p = 0; p < NP; p++) {
            const int j = p * KPP + kg, kp = k0 + j;
            kr[p] = vr[p] = make_uint4(0, 0, 0, 0);
            if (j < nk) {
                const size_t off = ((size_t)bt[kp / KV_BLOCK] * Hkv + g) * KV_BLOCK * D + (size_t)(kp % KV_BLOCK) * D + part * 8;
                kr[p] = *(const uint4 *)(a.kc + off);
                vr[p] = *(const uint4 *)(a.vc + off);
            }
        }
    };
    if (split < nchunks) load_chunk(split);
    const float qscale = rsqrtf((float)D) * LOG2E;
    const bf16 *q = (const bf16 *)a.q + (size_t)t * H * D + (size_t)g * G * D;
    for (int i = tid; i < GM * D; i += 128) {
        const int h = i / D, d = i % D;
        qs[h][d] = h < G ? __bfloat162float(q[h * D + d]) * qscale : 0.f;
    }
    if (tid < GM) m_run[tid] = -INFINITY, l_run[tid] = 0.f;
    float o[GM][8];
#pragma unroll
    for (int h = 0; h < GM; h++)
#pragma unroll
        for (int e = 0; e < 8; e++) o[h][e] = 0.f;
    __syncthreads();
    for (int c = split; c < nchunks; c += nsplit) {
        const int nk = min(CH, ctx - c * CH);
        if (c != split) load_chunk(c);
#pragma unroll
        for (int p = 0; p < NP; p++) { /* phase 1: scores */
            const int j = p * KPP + kg;
            const uint32_t ww[4] = {kr[p].x, kr[p].y, kr[p].z, kr[p].w};
            float kv[8];
#pragma unroll
            for (int e = 0; e < 4; e++) kv[2 * e] = bf_lo(ww[e]), kv[2 * e + 1] = bf_hi(ww[e]);
#pragma unroll
            for (int h = 0; h < GM; h++) {
                float dot = 0.f;
#pragma unroll
                for (int e = 0; e < 8; e++) dot += qs[h][part * 8 + e] * kv[e];
#pragma unroll
                for (int off = TPK / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
                if (part == 0 && j < nk && h < G) sc[h][j] = dot;
            }
        }
        __syncthreads();
        for (int h = warp; h < G; h += 4) { /* phase 2: running max and sum */
            float mx = -INFINITY;
            for (int j = lane; j < nk; j += 32) mx = fmaxf(mx, sc[h][j]);
            mx = warp_max(mx);
            const float m_old = m_run[h], m_new = fmaxf(m_old, mx);
            float sum = 0.f;
            for (int j = lane; j < nk; j += 32) {
                const float e = exp2f(sc[h][j] - m_new);
                sc[h][j] = e;
                sum += e;
            }
            sum = warp_sum(sum);
            if (lane == 0) {
                const float al = exp2f(m_old - m_new);
                alpha[h] = al;
                l_run[h] = l_run[h] * al + sum;
                m_run[h] = m_new;
            }
        }
        __syncthreads();
#pragma unroll
        for (int h = 0; h < GM; h++) { /* phase 3: o = alpha o + sum p v */
            const float al = h < G ? alpha[h] : 0.f;
#pragma unroll
            for (int e = 0; e < 8; e++) o[h][e] *= al;
        }
#pragma unroll
        for (int p = 0; p < NP; p++) {
            const int j = p * KPP + kg;
            if (j >= nk) continue;
            const uint32_t ww[4] = {vr[p].x, vr[p].y, vr[p].z, vr[p].w};
            float vv[8];
#pragma unroll
            for (int e = 0; e < 4; e++) vv[2 * e] = bf_lo(ww[e]), vv[2 * e + 1] = bf_hi(ww[e]);
#pragma unroll
            for (int h = 0; h < GM; h++) {
                const float pr = h < G ? sc[h][j] : 0.f;
#pragma unroll
                for (int e = 0; e < 8; e++) o[h][e] += pr * vv[e];
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int h = 0; h < GM; h++)
#pragma unroll
        for (int e = 0; e < 8; e++)
#pragma unroll
            for (int off = TPK; off < 32; off <<= 1) o[h][e] += __shfl_xor_sync(0xffffffffu, o[h][e], off);
    if (lane < TPK)
#pragma unroll
        for (int h = 0; h < GM; h++)
#pragma unroll
            for (int e = 0; e < 8; e++) red[warp][h][part * 8 + e] = o[h][e];
    __syncthreads();
    for (int i = tid; i < G * D; i += 128) {
        const int h = i / D, d = i % D;
        const float v = red[0][h][d] + red[1][h][d] + red[2][h][d] + red[3][h][d];
        const int hq = g * G + h;
        if (nsplit == 1) {
            const float l = l_run[h];
            ((bf16 *)a.out)[(size_t)t * H * D + (size_t)hq * D + d] = __float2bfloat16(l > 0.f ? v / l : 0.f);
        } else {
            float *pp = a.part + (((size_t)t * H + hq) * nsplit + split) * (D + 2);
            pp[d] = v;
            if (d == 0) pp[D] = m_run[h], pp[D + 1] = l_run[h];
        }
    }
    if (nsplit > 1 && a.counters) { /* the last split block of (t, g) merges the partials */
        __shared__ int s_last;
        __threadfence();
        __syncthreads();
        if (tid == 0) s_last = atomicAdd(&a.counters[t * Hkv + g], 1) == ns_eff - 1;
        __syncthreads();
        if (!s_last) return;
        __threadfence();
        for (int h = warp; h < G; h += 4) combine_warp(a.part, t, g * G + h, nsplit, ns_eff, H, D, (bf16 *)a.out);
        if (tid == 0) a.counters[t * Hkv + g] = 0;
    }
}

/* The separate merge: one block of min(D, 256) threads per (head, token); a thread's partials
 * all loaded at once with warp 0's (m, l) loads: one L2 round trip. */
__global__ void k_attn_combine(const float *__restrict__ part, const int32_t *__restrict__ pos, int ch, int nsplit,
                               int H, int D, bf16 *__restrict__ out) {
    __shared__ float wsp[64];
    __shared__ float inv_l;
    const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x;
    const int nchunks = (pos[t] + ch) / ch, ns = nsplit < nchunks ? nsplit : nchunks;
    const float *pp = part + ((size_t)t * H + h) * nsplit * (D + 2);
    float ov[64];
    const int d = tid;
#pragma unroll
    for (int sp = 0; sp < 64; sp++) ov[sp] = sp < ns && d < D ? pp[sp * (D + 2) + d] : 0.f;
    if (tid < 32) {
        float m0 = -INFINITY, l0 = 0.f, m1 = -INFINITY, l1 = 0.f;
        if (tid < ns) m0 = pp[tid * (D + 2) + D], l0 = pp[tid * (D + 2) + D + 1];
        if (tid + 32 < ns) m1 = pp[(tid + 32) * (D + 2) + D], l1 = pp[(tid + 32) * (D + 2) + D + 1];
        if (!(l0 > 0.f)) m0 = -INFINITY;
        if (!(l1 > 0.f)) m1 = -INFINITY;
        const float M = warp_max(fmaxf(m0, m1));
        const float w0 = l0 > 0.f ? exp2f(m0 - M) : 0.f, w1 = l1 > 0.f ? exp2f(m1 - M) : 0.f;
        const float L = warp_sum(w0 * l0 + w1 * l1);
        wsp[tid] = tid < ns ? w0 : 0.f;
        wsp[tid + 32] = tid + 32 < ns ? w1 : 0.f;
        if (tid == 0) inv_l = L > 0.f ? 1.f / L : 0.f;
    }
    __syncthreads();
    if (d < D) {
        float acc = 0.f;
#pragma unroll
        for (int sp = 0; sp < 64; sp++) acc = fmaf(wsp[sp], ov[sp], acc);
        out[(size_t)t * H * D + (size_t)h * D + d] = __float2bfloat16(acc * inv_l);
    }
}

/* ------------------------------------------------------------------ cluster kernel */
/* The context of each (token, KV head) cut into CL contiguous ranges, one per block of a
 * CL-block cluster; inside a block (4 warps) S = Q K^T and O += P V on the tensor cores (the G
 * query heads as the rows of one 16-row A operand), 64-key chunks of K and V in shared memory
 * (padded rows: conflict-free ldmatrix); the CL partials merge by reading the peers' shared
 * memory after a cluster barrier. */
static __device__ __forceinline__ void ldsm_x4(const void *p, uint32_t r[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sptr(p)));
}
static __device__ __forceinline__ void ldsm_x4t(const void *p, uint32_t r[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sptr(p)));
}
template <int N>
static __device__ __forceinline__ void scale_rows(float (&o)[N][4], const float al[2]) {
#pragma unroll
    for (int i = 0; i < N; i++) o[i][0] *= al[0], o[i][1] *= al[0], o[i][2] *= al[1], o[i][3] *= al[1];
}
static __device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void cluster_sync_all() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
static __device__ __forceinline__ float ld_cluster(const float *p, int rank) {
    uint32_t r;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(sptr(p)), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r) : "memory");
    return v;
}
#define CL_KT 64
template <int D>
struct cl_geom {
    static constexpr int LDS = D + 8, LDP = CL_KT + 8;
    static constexpr int Q_OFF = 0;
    static constexpr int K_OFF = Q_OFF + 16 * LDS * 2;
    static constexpr int V_OFF = K_OFF + CL_KT * LDS * 2;
    static constexpr int P_OFF = V_OFF + CL_KT * LDS * 2;
    static constexpr int X_OFF = P_OFF + 16 * LDP * 2;
    static constexpr int M_OFF = X_OFF + 2 * 4 * 16 * 4;
    static constexpr int BYTES = M_OFF + 2 * 16 * 4;
    static_assert(16 * D * 4 <= CL_KT * LDS * 2, "the partial O fits where K was");
};
/* MINB 7: at most 72 registers (production); 8: at most 64 */
template <int D, int CL, int MINB = 7>
__global__ void __launch_bounds__(128, MINB) k_attn_cl(attn_args a, int G) {
    typedef cl_geom<D> Gm;
    constexpr int LDS = Gm::LDS, LDP = Gm::LDP, NKS = D / 16, PCS = D / 8, NDT = D / 32;
    __shared__ __align__(128) unsigned char sm[Gm::BYTES];
    bf16 *Qs = (bf16 *)(sm + Gm::Q_OFF), *Ks = (bf16 *)(sm + Gm::K_OFF), *Vs = (bf16 *)(sm + Gm::V_OFF);
    bf16 *Ps = (bf16 *)(sm + Gm::P_OFF);
    float *xmax = (float *)(sm + Gm::X_OFF), *xsum = xmax + 64;
    float *bm = (float *)(sm + Gm::M_OFF), *bl = bm + 16;
    float *po = (float *)(sm + Gm::K_OFF);
    const int t = blockIdx.z, g = blockIdx.y, rank = blockIdx.x;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, tq = lane & 3;
    const int H = a.H, Hkv = a.Hkv;
    const int ctx = a.pos[t] + 1;
    const int per = (ctx + CL - 1) / CL;
    const int k_lo = min(ctx, rank * per), k_hi = min(ctx, k_lo + per);
    const int32_t *bt = a.block_tables + (size_t)t * a.bt_stride;
    auto load_rows = [&](int c0, int nk) {
        for (int i = tid; i < nk * PCS; i += 128) {
            const int j = i / PCS, pc = i % PCS, kp = c0 + j;
            const size_t off = ((size_t)bt[kp / KV_BLOCK] * Hkv + g) * KV_BLOCK * D + (size_t)(kp % KV_BLOCK) * D + pc * 8;
            cp_async16(sptr(Ks + j * LDS + pc * 8), a.kc + off);
            cp_async16(sptr(Vs + j * LDS + pc * 8), a.vc + off);
        }
    };
    if (k_lo < k_hi) {
        for (int i = tid; i < (16 - G) * PCS; i += 128) /* query rows past G: zero */
            *(uint4 *)(Qs + (G + i / PCS) * LDS + (i % PCS) * 8) = make_uint4(0, 0, 0, 0);
        const bf16 *q = (const bf16 *)a.q + ((size_t)t * H + (size_t)g * G) * D;
        for (int i = tid; i < G * PCS; i += 128) cp_async16(sptr(Qs + (i / PCS) * LDS + (i % PCS) * 8), q + (size_t)i * 8);
    }
    const float qscale = rsqrtf((float)D) * LOG2E;
    float o[NDT][4];
#pragma unroll
    for (int i = 0; i < NDT; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.f, 0.f};
    for (int c0 = k_lo; c0 < k_hi; c0 += CL_KT) {
        const int nk = min(CL_KT, k_hi - c0);
        if (c0 != k_lo) __syncthreads(); /* every warp is done with the previous chunk */
        load_rows(c0, nk);
        for (int i = tid; i < (CL_KT - nk) * PCS; i += 128) /* V rows past the chunk: zero */
            *(uint4 *)(Vs + (nk + i / PCS) * LDS + (i % PCS) * 8) = make_uint4(0, 0, 0, 0);
        asm volatile("cp.async.wait_all;" ::: "memory");
        __syncthreads();
        float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
        const int kw = warp * 16;
        if (kw < nk) {
#pragma unroll
            for (int ks = 0; ks < NKS; ks++) {
                uint32_t qa[4], kb[4];
                ldsm_x4(Qs + (lane & 15) * LDS + ks * 16 + (lane >> 4) * 8, qa);
                ldsm_x4(Ks + (kw + (lane >> 4) * 8 + (lane & 7)) * LDS + ks * 16 + ((lane >> 3) & 1) * 8, kb);
                mma_bf16(s[0], qa, kb[0], kb[1]);
                mma_bf16(s[1], qa, kb[2], kb[3]);
            }
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int j = kw + nt * 8 + 2 * tq + (e & 1);
                const float v = j < nk ? s[nt][e] * qscale : -INFINITY;
                s[nt][e] = v;
                mx[e >> 1] = fmaxf(mx[e >> 1], v);
            }
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
            mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
        }
        if (tq == 0) xmax[warp * 16 + gq] = mx[0], xmax[warp * 16 + gq + 8] = mx[1];
        __syncthreads();
        float al[2], mn[2];
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int row = gq + 8 * hr;
            const float cm = fmaxf(fmaxf(xmax[row], xmax[16 + row]), fmaxf(xmax[32 + row], xmax[48 + row]));
            mn[hr] = fmaxf(m_r[hr], cm);
            al[hr] = exp2f(m_r[hr] - mn[hr]);
            m_r[hr] = mn[hr];
        }
        float ps[2] = {0.f, 0.f};
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
            const float p0 = exp2f(s[nt][0] - mn[0]), p1 = exp2f(s[nt][1] - mn[0]);
            const float p2 = exp2f(s[nt][2] - mn[1]), p3 = exp2f(s[nt][3] - mn[1]);
            ps[0] += p0 + p1;
            ps[1] += p2 + p3;
            const int col = kw + nt * 8 + 2 * tq;
            *(bf162 *)(Ps + gq * LDP + col) = __floats2bfloat162_rn(p0, p1);
            *(bf162 *)(Ps + (gq + 8) * LDP + col) = __floats2bfloat162_rn(p2, p3);
        }
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            ps[hr] += __shfl_xor_sync(0xffffffffu, ps[hr], 1);
            ps[hr] += __shfl_xor_sync(0xffffffffu, ps[hr], 2);
        }
        if (tq == 0) xsum[warp * 16 + gq] = ps[0], xsum[warp * 16 + gq + 8] = ps[1];
        __syncthreads();
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int row = gq + 8 * hr;
            l_r[hr] = l_r[hr] * al[hr] + ((xsum[row] + xsum[16 + row]) + (xsum[32 + row] + xsum[48 + row]));
        }
        scale_rows(o, al);
#pragma unroll
        for (int kk = 0; kk < CL_KT / 16; kk++) { /* O += P V, this warp's D / 4 columns */
            if (kk * 16 >= nk) break;
            uint32_t pa[4];
            ldsm_x4(Ps + (lane & 15) * LDP + kk * 16 + (lane >> 4) * 8, pa);
#pragma unroll
            for (int dt = 0; dt < NDT; dt += 2) {
                uint32_t vb[4];
                ldsm_x4t(Vs + (kk * 16 + (lane & 15)) * LDS + warp * (D / 4) + (dt + (lane >> 4)) * 8, vb);
                mma_bf16(o[dt], pa, vb[0], vb[1]);
                if (dt + 1 < NDT) mma_bf16(o[dt + 1], pa, vb[2], vb[3]);
            }
        }
    }
    /* this block's partial where K was (nobody reads K any more) */
#pragma unroll
    for (int dt = 0; dt < NDT; dt++) {
        const int col = warp * (D / 4) + dt * 8 + 2 * tq;
        if (gq < G) po[gq * D + col] = o[dt][0], po[gq * D + col + 1] = o[dt][1];
        if (gq + 8 < G) po[(gq + 8) * D + col] = o[dt][2], po[(gq + 8) * D + col + 1] = o[dt][3];
    }
    if (warp == 0 && tq == 0) bm[gq] = m_r[0], bl[gq] = l_r[0], bm[gq + 8] = m_r[1], bl[gq + 8] = l_r[1];
    cluster_sync_all(); /* every block's partial is in its shared memory */
    const int nout = G * D, share = (nout + CL - 1) / CL;
    for (int i = tid; i < share; i += 128) {
        const int idx = rank * share + i;
        if (idx >= nout) break;
        const int h = idx / D, d = idx % D;
        float mr[CL], lr[CL], orr[CL];
#pragma unroll
        for (int r = 0; r < CL; r++) mr[r] = ld_cluster(bm + h, r), lr[r] = ld_cluster(bl + h, r), orr[r] = ld_cluster(po + h * D + d, r);
        float M = -INFINITY;
#pragma unroll
        for (int r = 0; r < CL; r++)
            if (lr[r] > 0.f) M = fmaxf(M, mr[r]);
        float W = 0.f, acc = 0.f;
#pragma unroll
        for (int r = 0; r < CL; r++) {
            const float w = lr[r] > 0.f ? exp2f(mr[r] - M) : 0.f;
            W = fmaf(w, lr[r], W);
            acc = fmaf(w, orr[r], acc);
        }
        ((bf16 *)a.out)[((size_t)t * H + (size_t)g * G + h) * D + d] = __float2bfloat16(W > 0.f ? acc / W : 0.f);
    }
    cluster_sync_all(); /* no block leaves while a peer may still read its shared memory */
}

/* ------------------------------------------------------------------ host */
#define HD 128 /* head_dim of this program's shape */
#define GMAX 4 /* query heads per KV head it instantiates (Llama-3-8B: 32 / 8) */

static const char *VNAME[] = {
    "split 64 x 16 keys + combine",
    "split 64 x 16 keys, merged by the last block",
    "no split, 64-key chunks",
    "clusters of 8 (DSMEM merge)",
    "clusters of 16 (DSMEM merge)",
    "clusters of 8 at <= 64 registers",
    "split + combine at <= 64 registers",
    "split + combine + L2 prefetch of 34 MB",
};
#define NVAR 8

template <int CL, int MINB>
static int launch_cl(const attn_args &a, int G) {
    auto k = k_attn_cl<HD, CL, MINB>;
    static int ok = -1; /* schedulable on this device: asked once, not in the timed loop */
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    cfg.gridDim = dim3(CL, a.Hkv, a.T);
    cfg.blockDim = dim3(128);
    cfg.stream = g_stream;
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = CL, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    if (ok < 0) { /* a cluster of 16 needs the non-portable size and may not be schedulable */
        if (CL > 8) CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        int n = 0;
        ok = cudaOccupancyMaxActiveClusters(&n, k, &cfg) == cudaSuccess && n > 0;
        (void)cudaGetLastError();
    }
    if (!ok) return 0;
    CK(cudaLaunchKernelEx(&cfg, k, a, G));
    return 1;
}
/* Launch variant v; returns 0 when the device cannot run it. */
static int launch_variant(int v, attn_args a) {
    const int G = a.H / a.Hkv;
    switch (v) {
    case 3: return launch_cl<8, 7>(a, G);
    case 4: return launch_cl<16, 7>(a, G);
    case 5: return launch_cl<8, 8>(a, G);
    case 2:
        a.n_split = 1;
        k_attn<HD, GMAX, CHUNK><<<dim3(1, a.Hkv, a.T), 128, 0, g_stream>>>(a, G);
        CK_LAUNCH();
        return 1;
    default: break;
    }
    if (v != 1) a.counters = nullptr;
    if (v != 7) a.pf = nullptr;
    const dim3 grid(a.n_split, a.Hkv, a.T);
    if (v == 6) k_attn<HD, GMAX, SPLIT_CH, 8><<<grid, 128, 0, g_stream>>>(a, G);
    else k_attn<HD, GMAX, SPLIT_CH><<<grid, 128, 0, g_stream>>>(a, G);
    CK_LAUNCH();
    if (v != 1) {
        k_attn_combine<<<dim3(a.H, a.T), HD, 0, g_stream>>>(a.part, a.pos, SPLIT_CH, a.n_split, a.H, a.D, (bf16 *)a.out);
        CK_LAUNCH();
    }
    return 1;
}

struct timed { attn_args a[16]; int ncopy, v; };
static void timed_launch(void *ctx, int iter) {
    const timed *t = (const timed *)ctx;
    launch_variant(t->v, t->a[iter % t->ncopy]);
}

static void usage(void) {
    fprintf(stderr, "usage: attn_decode [-c context] [-t tokens 1..4] [-r repeats] [variant]\n");
    for (int v = 0; v < NVAR; v++) fprintf(stderr, "  %d  %s\n", v, VNAME[v]);
    exit(2);
}

int main(int argc, char **argv) {
    int ctx = 640, T = 1, repeats = 50, want = -1;
    const int H = 32, Hkv = 8, D = HD, G = H / Hkv, nsplit = 64;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-c") && i + 1 < argc) ctx = atoi(argv[++i]);
        else if (!strcmp(o, "-t") && i + 1 < argc) T = atoi(argv[++i]);
        else if (!strcmp(o, "-r") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (o[0] >= '0' && o[0] <= '9') want = atoi(o);
        else usage();
    }
    if (ctx < 1 || ctx > 65536 || T < 1 || T > 4 || repeats < 1 || want >= NVAR) usage();
    print_device();
    stream_init();
    const double copy_gbs = copy_rate_gbs();
    printf("# device copy %.0f GB/s (read + write); %d token(s) at context %d, H %d, Hkv %d, D %d, %d repeats\n",
           copy_gbs, T, ctx, H, Hkv, D, repeats);

    /* the cache: each token's own sequence, its blocks at random places of the pool */
    rng_t r = {4321};
    const int bps = cdiv(ctx, KV_BLOCK), nblocks = T * bps;
    std::vector<int32_t> bt((size_t)T * bps), pos(T, ctx - 1);
    for (int i = 0; i < nblocks; i++) bt[i] = i;
    for (int i = nblocks - 1; i > 0; i--) { /* Fisher-Yates */
        const int j = (int)(rng_u64(&r) % (uint64_t)(i + 1));
        const int32_t tmp = bt[i];
        bt[i] = bt[j], bt[j] = tmp;
    }
    const size_t kvn = (size_t)nblocks * Hkv * KV_BLOCK * D;
    std::vector<uint16_t> kb(kvn), vb(kvn), qb((size_t)T * H * D);
    std::vector<float> kf(kvn), vf(kvn), qf(qb.size());
    fill_bf16(&r, kb.data(), kf.data(), kvn, -1.f, 1.f);
    fill_bf16(&r, vb.data(), vf.data(), kvn, -1.f, 1.f);
    fill_bf16(&r, qb.data(), qf.data(), qb.size(), -2.f, 2.f); /* scores spread enough to make softmax peak */

    /* CPU reference: softmax(q k / sqrt(D)) v in double */
    std::vector<float> ref(qb.size());
    std::vector<double> sc(ctx);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const int g = h / G;
            const float *q = &qf[((size_t)t * H + h) * D];
            double mx = -1e300;
            for (int k = 0; k < ctx; k++) {
                const float *kr = &kf[(((size_t)bt[(size_t)t * bps + k / KV_BLOCK] * Hkv + g) * KV_BLOCK + k % KV_BLOCK) * D];
                double s = 0;
                for (int d = 0; d < D; d++) s += (double)q[d] * kr[d];
                sc[k] = s / sqrt((double)D);
                mx = sc[k] > mx ? sc[k] : mx;
            }
            double l = 0;
            for (int k = 0; k < ctx; k++) l += (sc[k] = exp(sc[k] - mx));
            for (int d = 0; d < D; d++) {
                double o = 0;
                for (int k = 0; k < ctx; k++)
                    o += sc[k] * vf[(((size_t)bt[(size_t)t * bps + k / KV_BLOCK] * Hkv + g) * KV_BLOCK + k % KV_BLOCK) * D + d];
                ref[((size_t)t * H + h) * D + d] = (float)(o / l);
            }
        }

    /* device: copies of the cache so that the timed loop reads HBM */
    attn_args a = {};
    a.T = T, a.H = H, a.Hkv = Hkv, a.D = D, a.bt_stride = bps, a.n_split = nsplit;
    a.q = (const uint16_t *)dev_upload(qb.data(), qb.size() * 2);
    a.pos = (const int32_t *)dev_upload(pos.data(), pos.size() * 4);
    a.block_tables = (const int32_t *)dev_upload(bt.data(), bt.size() * 4);
    a.part = (float *)dev_alloc((size_t)T * H * nsplit * (D + 2) * 4);
    a.out = (uint16_t *)dev_alloc(qb.size() * 2);
    a.counters = (int *)dev_alloc((size_t)T * Hkv * 4);
    CK(cudaMemset(a.counters, 0, (size_t)T * Hkv * 4));
    const long long pf_bytes = 34LL << 20; /* the o-projection of the 8B shape in bf16 */
    a.pf = dev_alloc((size_t)pf_bytes);
    a.pf_bytes = pf_bytes;
    timed tm;
    void *kc[16], *vc[16];
    kc[0] = dev_upload(kb.data(), kvn * 2);
    vc[0] = dev_upload(vb.data(), kvn * 2);
    tm.ncopy = dev_copies(kc[0], kvn * 2, (size_t)128 << 20, kc);
    dev_copies(vc[0], kvn * 2, kvn * 2 * (size_t)tm.ncopy, vc);
    for (int i = 0; i < tm.ncopy; i++) {
        tm.a[i] = a;
        tm.a[i].kc = (const uint16_t *)kc[i];
        tm.a[i].vc = (const uint16_t *)vc[i];
    }
    const double bytes = 2.0 * T * ctx * Hkv * D * 2 + 2.0 * qb.size() * 2;

    int fails = 0, ran = 0;
    std::vector<uint16_t> got(qb.size());
    for (int v = 0; v < NVAR; v++) {
        if (want >= 0 && v != want) continue;
        char name[96];
        snprintf(name, sizeof name, "attn T=%d ctx=%d: %s", T, ctx, VNAME[v]);
        dev_poison(a.out, got.size() * 2);
        if (!launch_variant(v, tm.a[0])) {
            printf("%-52s skipped: cluster not schedulable on this device\n", name);
            continue;
        }
        CK(cudaStreamSynchronize(g_stream));
        CK_LAUNCH();
        CK(cudaMemcpy(got.data(), a.out, got.size() * 2, cudaMemcpyDeviceToHost));
        /* bf16 output, P rounded to bf16 in the cluster kernel: tolerance of a few bf16 ulps */
        const check_t c = check_bf16(ref.data(), got.data(), got.size(), 2e-2, 2e-2);
        tm.v = v;
        const double us = time_us(timed_launch, &tm, 3, repeats);
        print_result(name, c, us, bytes, copy_gbs);
        fails += !c.pass;
        ran++;
    }
    printf("# %d variant(s), %d failed\n", ran, fails);
    return fails ? 1 : 0;
}

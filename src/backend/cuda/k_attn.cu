/* k_attn.cu — attention over the paged KV cache.
 *
 * frk_attention (decode and any mixed batch): one block of 128 threads per (token, KV head,
 * split). The G = H / Hkv query heads that share a KV head are processed together, so every K/V
 * row is read once per group (GQA). Keys are walked in chunks of 64 positions (4 cache blocks):
 *   phase 1  scores s[h][j] = q_h . k_j: D/8 threads per key, each one 16-byte (bf16) or 8-byte
 *            (int8) load, fp32 dot, shuffle reduction inside the thread group;
 *   phase 2  running max / sum per head (online softmax in base 2, q pre-scaled by log2 e/sqrt D);
 *   phase 3  o_h += p_hj v_j, each thread accumulating 8 columns for its keys; the per-thread
 *            partials are rescaled by alpha per chunk and reduced once at the end.
 * With n_split > 1 the chunks of a token are dealt round-robin to n_split blocks that write
 * (m, l, o) partials that k_attn_combine merges (flash-decoding), so batch-1 decode with a long
 * context still fills the GPU.
 *
 * k_attn_cl (decode with <= 4 tokens, bf16 cache; frk_attn_args.cluster, from plan.cu): one kernel
 * of thread-block clusters, the context cut into one range per block, S and PV on the tensor
 * cores, the ranges merged through distributed shared memory (see its comment below).
 *
 * Instances: k_attn for D in {8, 16, 32, 64, 128, 256} x {<= 4, <= 8 heads per KV head} x {bf16,
 * int8 cache} x {16-key chunks (split decode of <= 4 tokens), 64-key chunks}; k_attn_cl for D in
 * {64, 128} x {8, 16 blocks}; k_attn_prefill for D in {64, 128}.
 *
 * frk_attention_prefill (a run of consecutive tokens of one sequence, bf16 cache): FlashAttention-2
 * style on the tensor cores. A block (4 warps) takes 64 query rows = QT tokens x G heads of one KV
 * head (row r -> token r / G, head r % G), so each K/V tile in shared memory serves all heads of
 * the group. Q fragments stay in registers; S = Q K^T and O += P V use mma.sync m16n8k16 bf16
 * with fp32 accumulation; V's B fragments come from ldmatrix.trans; P is re-packed from the S
 * accumulators into A fragments without touching shared memory. Causal mask per row position.
 */
#include <climits>

#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"

#define LOG2E 1.4426950408889634f

/* ------------------------------------------------------------------ scalar / decode kernel */
/* 8 K (or V) values of one key, from the bf16 or int8 pool, as floats. */
template <bool I8>
static __device__ __forceinline__ void kv_load(const void *pool, size_t off, uint4 &raw) {
    if (I8) {
        const uint2 w = *(const uint2 *)((const int8_t *)pool + off);
        raw = make_uint4(w.x, w.y, 0, 0);
    } else {
        raw = *(const uint4 *)((const bf16 *)pool + off);
    }
}
template <bool I8>
static __device__ __forceinline__ void kv_unpack(const uint4 raw, float s, float v[8]) {
    if (I8) {
        const uint32_t ww[2] = {raw.x, raw.y};
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = (float)(int8_t)((ww[e >> 2] >> (8 * (e & 3))) & 0xff) * s;
    } else {
        const uint32_t ww[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
            v[2 * e] = bf_lo(ww[e]);
            v[2 * e + 1] = bf_hi(ww[e]);
        }
    }
}

/* The decode kernel: one block of 128 threads per (token, KV head, split). */
template <int D, int GM, bool I8, int CH>
__global__ void __launch_bounds__(128, 1) k_attn(frk_attn_args a, int G) {
    constexpr int TPK = D / 8;                          /* threads per key */
    constexpr int KPP = 128 / TPK;                      /* keys per pass */
    constexpr int NP = CH / KPP > 0 ? CH / KPP : 1;     /* passes per chunk */
    __shared__ float qs[GM][D];
    __shared__ float sc[GM][CH];
    __shared__ float m_run[GM], l_run[GM], alpha[GM];
    __shared__ float red[4][GM][D];

    pdl_trigger();
    const int t = blockIdx.z, g = blockIdx.y, split = blockIdx.x, nsplit = gridDim.x;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int H = a.H, Hkv = a.Hkv, L = a.n_layer, layer = a.layer;
    const int ctx = a.pos[t] + 1;
    const int32_t *bt = a.block_tables + (size_t)a.tok_seq[t] * a.bt_stride;
    const int kg = tid / TPK, part = tid % TPK;
    const int nchunks = (ctx + CH - 1) / CH;
    /* only the first min(nsplit, nchunks) splits of this token have keys; the rest leave at once
     * (split 0 always waits, so this grid's completion still implies its predecessor's) and
     * k_attn_combine reads only those */
    const int ns_eff = nsplit < nchunks ? nsplit : nchunks;
    if (nsplit > 1 && split >= ns_eff) return;
    /* every K and V row of a chunk this thread needs, all loads in flight at once. Rows below
     * `old` were stored by earlier steps (a token's batch holds at most T new positions of its
     * sequence, the last at pos[t]), so with the bf16 cache the first chunk's old rows are
     * loaded before the dependency wait and only the rows this step writes after it (the int8
     * store may requantise old rows of a block that gets a new token: all after the wait). */
    uint4 kr[NP], vr[NP];
    float ks[NP], vs[NP];
    const int old = I8 ? 0 : ctx - a.T;
    auto load_chunk = [&](int c, int from, int to) { /* rows kp of chunk c with from <= kp < to */
        const int k0 = c * CH, nk = min(CH, ctx - k0);
#pragma unroll
        for (int p = 0; p < NP; p++) {
            const int j = p * KPP + kg;
            const int kp = k0 + j;
            if (kp < from || kp >= to) continue;
            kr[p] = vr[p] = make_uint4(0, 0, 0, 0);
            ks[p] = vs[p] = 0.f;
            if (j < nk) {
                const size_t hb = ((size_t)bt[kp / FRK_BLOCK] * L + layer) * Hkv + g;
                const size_t off = hb * FRK_BLOCK * D + (size_t)(kp % FRK_BLOCK) * D + part * 8;
                kv_load<I8>(a.kc, off, kr[p]);
                kv_load<I8>(a.vc, off, vr[p]);
                if (I8) {
                    ks[p] = a.kscale[hb];
                    vs[p] = a.vscale[hb];
                }
            }
        }
    };
    if (split < nchunks) load_chunk(split, INT_MIN, old);
    tl_mark(a.trace, 0);
    pdl_wait();
    tl_mark(a.trace, 1);
    if (split < nchunks) load_chunk(split, old, INT_MAX);
    const float qscale = rsqrtf((float)D) * LOG2E;
    const bf16 *q = (const bf16 *)a.q + (size_t)t * H * D + (size_t)g * G * D;
    for (int i = tid; i < GM * D; i += 128) {
        const int h = i / D, d = i % D;
        qs[h][d] = h < G ? __bfloat162float(q[h * D + d]) * qscale : 0.f;
    }
    if (tid < GM) {
        m_run[tid] = -INFINITY;
        l_run[tid] = 0.f;
    }
    float o[GM][8];
#pragma unroll
    for (int h = 0; h < GM; h++)
#pragma unroll
        for (int e = 0; e < 8; e++) o[h][e] = 0.f;
    __syncthreads();

    for (int c = split; c < nchunks; c += nsplit) {
        const int nk = min(CH, ctx - c * CH);
        if (c != split) load_chunk(c, INT_MIN, INT_MAX);
        /* phase 1: scores (every lane runs every pass, so the shuffles are converged) */
#pragma unroll
        for (int p = 0; p < NP; p++) {
            const int j = p * KPP + kg;
            float kv[8];
            kv_unpack<I8>(kr[p], ks[p], kv);
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
        /* phase 2: running max and sum per head */
        for (int h = warp; h < G; h += 4) {
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
                const float al = exp2f(m_old - m_new); /* m_old = -inf -> 0 */
                alpha[h] = al;
                l_run[h] = l_run[h] * al + sum;
                m_run[h] = m_new;
            }
        }
        __syncthreads();
        /* phase 3: o = alpha o + sum_j p_j v_j over this thread's keys */
#pragma unroll
        for (int h = 0; h < GM; h++) {
            const float al = h < G ? alpha[h] : 0.f;
#pragma unroll
            for (int e = 0; e < 8; e++) o[h][e] *= al;
        }
#pragma unroll
        for (int p = 0; p < NP; p++) {
            const int j = p * KPP + kg;
            if (j >= nk) continue;
            float vv[8];
            kv_unpack<I8>(vr[p], vs[p], vv);
#pragma unroll
            for (int h = 0; h < GM; h++) {
                const float pr = h < G ? sc[h][j] : 0.f;
#pragma unroll
                for (int e = 0; e < 8; e++) o[h][e] += pr * vv[e];
            }
        }
        __syncthreads();
    }
    /* reduce o over the key groups: lanes with the same `part` inside a warp, then across warps */
#pragma unroll
    for (int h = 0; h < GM; h++)
#pragma unroll
        for (int e = 0; e < 8; e++)
#pragma unroll
            for (int off = TPK; off < 32; off <<= 1) o[h][e] += __shfl_xor_sync(0xffffffffu, o[h][e], off);
    if (lane < TPK) {
#pragma unroll
        for (int h = 0; h < GM; h++)
#pragma unroll
            for (int e = 0; e < 8; e++) red[warp][h][part * 8 + e] = o[h][e];
    }
    __syncthreads();
    for (int i = tid; i < G * D; i += 128) {
        const int h = i / D, d = i % D;
        const float v = red[0][h][d] + red[1][h][d] + red[2][h][d] + red[3][h][d];
        const int hq = g * G + h;
        if (nsplit == 1) {
            const float l = l_run[h];
            ((bf16 *)a.out)[(size_t)t * H * D + (size_t)hq * D + d] =
                __float2bfloat16(l > 0.f ? v / l : 0.f);
        } else {
            float *pp = a.part + (((size_t)t * H + hq) * nsplit + split) * (D + 2);
            pp[d] = v;
            if (d == 0) {
                pp[D] = m_run[h];
                pp[D + 1] = l_run[h];
            }
        }
    }
    tl_mark(a.trace, 2);
}

/* The separate merge: one block of min(D, 256) threads per (head, token), so each thread sums
 * one column over the splits that had keys (the first min(nsplit, ceil(ctx / ch))). All of a
 * thread's partials are loaded at once, with warp 0's (m, l) loads, so the merge costs one L2
 * round trip rather than one per split or per group of splits. */
__global__ void k_attn_combine(const float *__restrict__ part, const int32_t *__restrict__ pos, int ch,
                               int nsplit, int H, int D, bf16 *__restrict__ out,
                               unsigned long long *trace) {
    __shared__ float wsp[64]; /* weight of each split: exp2(m_s - M) */
    __shared__ float inv_l;
    pdl_trigger();
    tl_mark(trace, 0);
    pdl_wait();
    tl_mark(trace, 1);
    const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x;
    const int nchunks = (pos[t] + ch) / ch, ns = nsplit < nchunks ? nsplit : nchunks;
    const float *pp = part + ((size_t)t * H + h) * nsplit * (D + 2);
    float ov[64];
    const int d = tid; /* blockDim.x >= D (D <= 256) */
#pragma unroll
    for (int sp = 0; sp < 64; sp++) ov[sp] = sp < ns && d < D ? pp[sp * (D + 2) + d] : 0.f;
    if (tid < 32) { /* all (m, l) pairs at once, one warp */
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
    tl_mark(trace, 2);
}

/* ------------------------------------------------------------------ cluster decode kernel */
/* k_attn_cl (few tokens, bf16 cache, D in {64, 128}, G <= 16): the context of each (token, KV
 * head) is cut into CL contiguous ranges, one per block of a thread-block cluster of CL blocks,
 * and the CL partial results are merged through distributed shared memory, so neither the
 * partials nor a second kernel go through global memory (k_attn + k_attn_combine take two
 * launches and ~10 µs a layer at batch 1 on an H200, most of it latency). Inside a block
 * (4 warps) everything runs on the tensor cores, as in the prefill kernel: the G query heads are
 * the rows of one 16-row A operand (rows >= G are zero and ignored), K and V rows of a 64-key
 * chunk sit in shared memory (padded rows: conflict-free ldmatrix), each warp computes the scores
 * of 16 keys (S = Q K^T, 16 MMAs), the chunk's softmax is made block-wide through a 4-entry
 * exchange, and each warp then accumulates O = P V for a quarter of the head dimension over the
 * whole chunk (16 MMAs). The rows this step's qkv kernel did not write are copied (cp.async)
 * before the dependency wait. A block whose range is empty still takes part in the merge with
 * l = 0. */
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
/* MMA accumulators of rows gq (elements 0, 1) and gq + 8 (2, 3) times al[0] / al[1] (the online
 * softmax's rescaling of O) */
template <int N>
static __device__ __forceinline__ void scale_rows(float (&o)[N][4], const float al[2]) {
#pragma unroll
    for (int i = 0; i < N; i++) {
        o[i][0] *= al[0];
        o[i][1] *= al[0];
        o[i][2] *= al[1];
        o[i][3] *= al[1];
    }
}
/* D += A B, m16n8k16, bf16 in, fp32 accumulate (the cluster decode and the prefill kernels) */
static __device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0,
                                                uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void cluster_sync_all() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
/* A float of the same shared variable in block `rank` of the cluster (distributed shared memory). */
static __device__ __forceinline__ float ld_cluster(const float *p, int rank) {
    uint32_t r;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(r)
                 : "r"(sptr(p)), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r) : "memory");
    return v;
}

#define CL_KT 64 /* keys per chunk */
template <int D>
struct cl_geom {
    static constexpr int LDS = D + 8;                          /* K, V, Q row stride (bf16) */
    static constexpr int LDP = CL_KT + 8;                      /* P row stride (bf16) */
    static constexpr int Q_OFF = 0;
    static constexpr int K_OFF = Q_OFF + 16 * LDS * 2;
    static constexpr int V_OFF = K_OFF + CL_KT * LDS * 2;
    static constexpr int P_OFF = V_OFF + CL_KT * LDS * 2;
    static constexpr int X_OFF = P_OFF + 16 * LDP * 2;         /* [4][16] row max, [4][16] row sum */
    static constexpr int M_OFF = X_OFF + 2 * 4 * 16 * 4;       /* [16] m, [16] l of the block */
    static constexpr int BYTES = M_OFF + 2 * 16 * 4;
    static_assert(16 * D * 4 <= CL_KT * LDS * 2, "the partial O fits where K was");
};

/* At most 72 registers (7 blocks per SM): one block fits beside two streamed INT4 blocks of
 * 88 x 288. */
template <int D, int CL>
__global__ void __launch_bounds__(128, 7) k_attn_cl(frk_attn_args a, int G) {
    typedef cl_geom<D> Gm;
    constexpr int LDS = Gm::LDS, LDP = Gm::LDP, NKS = D / 16, PCS = D / 8; /* 16-byte pieces a row */
    constexpr int NDT = D / 32;                                            /* PV n-tiles per warp */
    __shared__ __align__(128) unsigned char sm[Gm::BYTES];
    bf16 *Qs = (bf16 *)(sm + Gm::Q_OFF), *Ks = (bf16 *)(sm + Gm::K_OFF), *Vs = (bf16 *)(sm + Gm::V_OFF);
    bf16 *Ps = (bf16 *)(sm + Gm::P_OFF);
    float *xmax = (float *)(sm + Gm::X_OFF), *xsum = xmax + 64;
    float *bm = (float *)(sm + Gm::M_OFF), *bl = bm + 16;
    float *po = (float *)(sm + Gm::K_OFF); /* [16][D] after the last chunk */

    pdl_trigger();
    const int t = blockIdx.z, g = blockIdx.y, rank = blockIdx.x; /* cluster (CL, 1, 1) = grid.x */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, tq = lane & 3;
    const int H = a.H, Hkv = a.Hkv, L = a.n_layer, layer = a.layer;
    const int ctx = a.pos[t] + 1;
    const int per = (ctx + CL - 1) / CL;
    const int k_lo = min(ctx, rank * per), k_hi = min(ctx, k_lo + per);
    const int32_t *bt = a.block_tables + (size_t)a.tok_seq[t] * a.bt_stride;
    const bf16 *kc = (const bf16 *)a.kc, *vc = (const bf16 *)a.vc;
    /* rows kp of the chunk at c0 (nk keys) with from <= kp < to */
    auto load_rows = [&](int c0, int nk, int from, int to) {
        for (int i = tid; i < nk * PCS; i += 128) {
            const int j = i / PCS, pc = i % PCS, kp = c0 + j;
            if (kp < from || kp >= to) continue;
            const size_t off = (((size_t)bt[kp / FRK_BLOCK] * L + layer) * Hkv + g) * FRK_BLOCK * D +
                               (size_t)(kp % FRK_BLOCK) * D + pc * 8;
            cp_async16(sptr(Ks + j * LDS + pc * 8), kc + off);
            cp_async16(sptr(Vs + j * LDS + pc * 8), vc + off);
        }
    };
    const int old = ctx - a.T;
    if (k_lo < k_hi) load_rows(k_lo, min(CL_KT, k_hi - k_lo), INT_MIN, old);
    if (k_lo < k_hi)
        for (int i = tid; i < (16 - G) * PCS; i += 128) /* query rows past G: zero */
        *(uint4 *)(Qs + (G + i / PCS) * LDS + (i % PCS) * 8) = make_uint4(0, 0, 0, 0);
    tl_mark(a.trace, 0);
    pdl_wait();
    tl_mark(a.trace, 1);
    if (k_lo < k_hi) {
        const bf16 *q = (const bf16 *)a.q + ((size_t)t * H + (size_t)g * G) * D;
        for (int i = tid; i < G * PCS; i += 128) cp_async16(sptr(Qs + (i / PCS) * LDS + (i % PCS) * 8), q + (size_t)i * 8);
    }
    const float qscale = rsqrtf((float)D) * LOG2E;
    float o[NDT][4];
#pragma unroll
    for (int i = 0; i < NDT; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.f, 0.f}; /* rows gq, gq + 8 */
    for (int c0 = k_lo; c0 < k_hi; c0 += CL_KT) {
        const int nk = min(CL_KT, k_hi - c0);
        if (c0 != k_lo) {
            __syncthreads(); /* every warp is done with the previous chunk's K, V and P */
            load_rows(c0, nk, INT_MIN, INT_MAX);
        } else {
            load_rows(c0, nk, old, INT_MAX);
        }
        for (int i = tid; i < (CL_KT - nk) * PCS; i += 128) /* V rows past the chunk: zero (P is 0 there) */
            *(uint4 *)(Vs + (nk + i / PCS) * LDS + (i % PCS) * 8) = make_uint4(0, 0, 0, 0);
        asm volatile("cp.async.wait_all;" ::: "memory");
        __syncthreads();
        /* S = Q K^T for this warp's 16 keys */
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
            mn[hr] = fmaxf(m_r[hr], cm); /* finite: the chunk has a key */
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
        /* O += P V over the chunk, this warp's D / 4 columns */
#pragma unroll
        for (int kk = 0; kk < CL_KT / 16; kk++) {
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
    /* this block's partial: O (unnormalised), m, l per row, where K was (every warp has passed
     * the last chunk's second barrier, so nobody reads K any more; PV reads only V and P) */
#pragma unroll
    for (int dt = 0; dt < NDT; dt++) {
        const int col = warp * (D / 4) + dt * 8 + 2 * tq;
        if (gq < G) po[gq * D + col] = o[dt][0], po[gq * D + col + 1] = o[dt][1];
        if (gq + 8 < G) po[(gq + 8) * D + col] = o[dt][2], po[(gq + 8) * D + col + 1] = o[dt][3];
    }
    if (warp == 0 && tq == 0) {
        bm[gq] = m_r[0], bl[gq] = l_r[0];
        bm[gq + 8] = m_r[1], bl[gq + 8] = l_r[1];
    }
    cluster_sync_all(); /* every block's partial is in its shared memory */
    const int nout = G * D, share = (nout + CL - 1) / CL;
    for (int i = tid; i < share; i += 128) {
        const int idx = rank * share + i;
        if (idx >= nout) break;
        const int h = idx / D, d = idx % D;
        float mr[CL], lr[CL], orr[CL];
#pragma unroll
        for (int r = 0; r < CL; r++) {
            mr[r] = ld_cluster(bm + h, r);
            lr[r] = ld_cluster(bl + h, r);
            orr[r] = ld_cluster(po + h * D + d, r);
        }
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
    tl_mark(a.trace, 2);
    cluster_sync_all(); /* no block leaves while a peer may still read its shared memory */
}

static bool attn_small(const frk_attn_args *a) { return a->T <= 4 && a->n_split > 1; }
template <int D, int GM, bool I8>
static void launch_attn_kv(const frk_attn_args *a, int G, cudaStream_t st) {
    const dim3 grid(a->n_split, a->Hkv, a->T);
    if (attn_small(a)) frk_launch(k_attn<D, GM, I8, 16>, grid, dim3(128), 0, st, *a, G);
    else frk_launch(k_attn<D, GM, I8, FRK_CHUNK>, grid, dim3(128), 0, st, *a, G);
}
template <int D, int GM>
static void launch_attn(const frk_attn_args *a, int G, cudaStream_t st) {
    if (a->kv_int8) launch_attn_kv<D, GM, true>(a, G, st);
    else launch_attn_kv<D, GM, false>(a, G, st);
}
template <int D>
static void launch_attn_d(const frk_attn_args *a, int G, cudaStream_t st) {
    if (G <= 4)
        launch_attn<D, 4>(a, G, st);
    else
        launch_attn<D, 8>(a, G, st);
}

/* The cluster kernel: frk_attn_args.cluster 0 (off), 8 or 16 (16 needs the non-portable cluster
 * attribute and is taken only where the device can schedule such a cluster of this kernel; else
 * 8). */
/* The launch of a CL-block cluster kernel: the cluster shape first, then programmatic dependent
 * launch (at[1]; numAttrs 2). */
static void cl_config(cudaLaunchConfig_t *cfg, cudaLaunchAttribute at[2], int cl, dim3 grid, cudaStream_t st) {
    *cfg = cudaLaunchConfig_t{};
    cfg->gridDim = grid;
    cfg->blockDim = dim3(128);
    cfg->stream = st;
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = cl, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[1].val.programmaticStreamSerializationAllowed = 1;
    cfg->attrs = at;
    cfg->numAttrs = 2;
}
/* Whether the current device can schedule a CL-block cluster of k_attn_cl<D, CL> (setting the
 * non-portable size attribute for CL > 8 first). Cached per device (devices 0..63): the answer
 * and the attribute are the same for every decoder on a device. */
template <int D, int CL>
static bool cl_schedulable(void) {
    static signed char ok[64]; /* 0 not asked yet, 1 yes, -1 no */
    int dev = 0;
    FR_CK(cudaGetDevice(&dev));
    signed char *o = &ok[dev & 63];
    if (!*o) {
        if (CL > 8) FR_CK(cudaFuncSetAttribute(k_attn_cl<D, CL>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        cudaLaunchConfig_t cfg;
        cudaLaunchAttribute at[2];
        cl_config(&cfg, at, CL, dim3(CL, 1, 1), 0);
        cfg.numAttrs = 1; /* the cluster shape alone */
        int n = 0;
        *o = cudaOccupancyMaxActiveClusters(&n, k_attn_cl<D, CL>, &cfg) == cudaSuccess && n > 0 ? 1 : -1;
        (void)cudaGetLastError();
    }
    return *o == 1;
}
template <int D, int CL>
static void launch_cl(const frk_attn_args *a, int G, cudaStream_t st) {
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute at[2];
    cl_config(&cfg, at, CL, dim3(CL, a->Hkv, a->T), st);
    FR_CK(cudaLaunchKernelEx(&cfg, k_attn_cl<D, CL>, *a, G));
}
template <int D>
static int cl_size(int want) {
    if (want == 16 && cl_schedulable<D, 16>()) return 16;
    return want && cl_schedulable<D, 8>() ? 8 : 0;
}
extern "C" int frk_attention_cluster_size(const frk_attn_args *a) {
    const int want = a->cluster;
    if (!((want == 8 || want == 16) && attn_small(a) && !a->kv_int8 && (a->D == 64 || a->D == 128) &&
          a->Hkv > 0 && a->H % a->Hkv == 0 && a->H / a->Hkv <= 16))
        return 0;
    return a->D == 64 ? cl_size<64>(want) : cl_size<128>(want);
}

extern "C" void frk_attention(const frk_attn_args *a, cudaStream_t st) {
    if (a->T <= 0) return;
    FR_DEV_ASSERT(a->Hkv > 0 && a->H % a->Hkv == 0);
    const int G = a->H / a->Hkv;
    switch (frk_attention_cluster_size(a) * 1000 + a->D) {
    case 8064: launch_cl<64, 8>(a, G, st); return;
    case 8128: launch_cl<128, 8>(a, G, st); return;
    case 16064: launch_cl<64, 16>(a, G, st); return;
    case 16128: launch_cl<128, 16>(a, G, st); return;
    default: break;
    }
    FR_DEV_ASSERT(G >= 1 && G <= 8);
    FR_DEV_ASSERT(a->n_split >= 1 && a->n_split <= 64 && (a->n_split == 1 || a->part));
    switch (a->D) {
    case 8: launch_attn_d<8>(a, G, st); break;
    case 16: launch_attn_d<16>(a, G, st); break;
    case 32: launch_attn_d<32>(a, G, st); break;
    case 64: launch_attn_d<64>(a, G, st); break;
    case 128: launch_attn_d<128>(a, G, st); break;
    case 256: launch_attn_d<256>(a, G, st); break;
    default: FR_DEV_ASSERT(!"unsupported head_dim");
    }
    if (a->n_split > 1) {
        dim3 grid(a->H, a->T);
        frk_launch(k_attn_combine, grid, dim3(a->D < 32 ? 32 : (a->D > 256 ? 256 : a->D)), 0, st,
                   (const float *)a->part, a->pos, attn_small(a) ? 16 : FRK_CHUNK, a->n_split, a->H,
                   a->D, (bf16 *)a->out, a->trace ? a->trace + FRK_TL_W : (unsigned long long *)nullptr);
    }
}

/* ------------------------------------------------------------------ tensor-core prefill */
static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    bf162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

template <int D>
__global__ void __launch_bounds__(128) k_attn_prefill(frk_attn_args a, int G, int pos0) {
    constexpr int KT = 64;        /* keys per tile */
    constexpr int LDS = D + 8;    /* smem row stride (bf16): conflict-free fragment reads */
    constexpr int NKS = D / 16;   /* k-steps over D */
    constexpr int NDT = D / 8;    /* n-tiles over D */
    __shared__ __align__(16) bf16 Ks[KT][LDS];
    __shared__ __align__(16) bf16 Vs[KT][LDS];
    pdl_trigger();
    pdl_wait();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int gq = lane >> 2, tq = lane & 3;
    const int QT = 64 / G; /* tokens per block */
    const int g = blockIdx.y;
    const int tok0 = blockIdx.x * QT;
    const int H = a.H, Hkv = a.Hkv, L = a.n_layer, layer = a.layer;
    const int ntok = min(QT, a.T - tok0);
    const int max_pos = pos0 + tok0 + ntok - 1;
    const int32_t *bt = a.block_tables + (size_t)a.tok_seq[tok0] * a.bt_stride;
    const float qscale = rsqrtf((float)D) * LOG2E;

    /* this lane's two rows */
    int rpos[2];
    bool rvalid[2];
    uint32_t qa[NKS][4];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const int r = warp * 16 + gq + hr * 8;
        const int ti = r / G;
        rvalid[hr] = ti < ntok && r < QT * G;
        rpos[hr] = pos0 + tok0 + ti;
    }
#pragma unroll
    for (int ks = 0; ks < NKS; ks++) {
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int r = warp * 16 + gq + hr * 8;
            const int ti = r / G, hj = r % G;
            uint32_t lo = 0, hi = 0;
            if (rvalid[hr]) {
                const bf16 *qr = (const bf16 *)a.q + (size_t)(tok0 + ti) * H * D + (size_t)(g * G + hj) * D;
                lo = *(const uint32_t *)(qr + ks * 16 + 2 * tq);
                hi = *(const uint32_t *)(qr + ks * 16 + 2 * tq + 8);
            }
            qa[ks][hr] = lo;      /* a0 (row gq) / a1 (row gq+8): k = 2tq, 2tq+1 */
            qa[ks][2 + hr] = hi;  /* a2 / a3: k = 2tq+8, 2tq+9 */
        }
    }
    float o[NDT][4];
#pragma unroll
    for (int i = 0; i < NDT; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.f, 0.f};

    const int n_tiles = (max_pos + 1 + KT - 1) / KT;
    for (int kt = 0; kt < n_tiles; kt++) {
        /* load K and V tiles: 16-byte chunks, D/8 per key */
        for (int i = tid; i < KT * (D / 8); i += 128) {
            const int j = i / (D / 8), cpart = i % (D / 8);
            const int kp = kt * KT + j;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
            if (kp <= max_pos) {
                const int blk = bt[kp / FRK_BLOCK];
                const size_t off = (((size_t)blk * L + layer) * Hkv + g) * FRK_BLOCK * D +
                                   (size_t)(kp % FRK_BLOCK) * D + cpart * 8;
                kv = *(const uint4 *)((const bf16 *)a.kc + off);
                vv = *(const uint4 *)((const bf16 *)a.vc + off);
            }
            *(uint4 *)&Ks[j][cpart * 8] = kv;
            *(uint4 *)&Vs[j][cpart * 8] = vv;
        }
        __syncthreads();
        /* S = Q K^T : 8 n-tiles of 8 keys */
        float s[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < NKS; ks++) {
                const uint32_t b0 = *(const uint32_t *)&Ks[nt * 8 + gq][ks * 16 + 2 * tq];
                const uint32_t b1 = *(const uint32_t *)&Ks[nt * 8 + gq][ks * 16 + 2 * tq + 8];
                mma_bf16(s[nt], qa[ks], b0, b1);
            }
        }
        /* mask, scale, online softmax per row (4 lanes share a row) */
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int hr = e >> 1;
                const int kp = kt * KT + nt * 8 + 2 * tq + (e & 1);
                float v = s[nt][e] * qscale;
                if (!rvalid[hr] || kp > rpos[hr]) v = -INFINITY;
                s[nt][e] = v;
                mx[hr] = fmaxf(mx[hr], v);
            }
        float al[2], mref[2];
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
            mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
            const float m_new = fmaxf(m_r[hr], mx[hr]);
            mref[hr] = m_new == -INFINITY ? 0.f : m_new;
            al[hr] = exp2f(m_r[hr] - mref[hr]);
            m_r[hr] = m_new;
            l_r[hr] *= al[hr];
        }
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int hr = e >> 1;
                const float p = exp2f(s[nt][e] - mref[hr]);
                s[nt][e] = p;
                l_r[hr] += p;
            }
        scale_rows(o, al);
        /* O += P V : P from the S accumulators, V via ldmatrix.trans */
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t pa[4];
            pa[0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
            pa[1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
            pa[2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            pa[3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int dt = 0; dt < NDT; dt++) {
                uint32_t b0, b1;
                const bf16 *rowp = &Vs[kk * 16 + (lane & 15)][dt * 8];
                const uint32_t addr = sptr(rowp);
                asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                             : "=r"(b0), "=r"(b1)
                             : "r"(addr));
                mma_bf16(o[dt], pa, b0, b1);
            }
        }
        __syncthreads();
    }
    /* finish: row sums over the 4 lanes of a row, normalise, store */
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        l_r[hr] += __shfl_xor_sync(0xffffffffu, l_r[hr], 1);
        l_r[hr] += __shfl_xor_sync(0xffffffffu, l_r[hr], 2);
    }
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        if (!rvalid[hr]) continue;
        const int r = warp * 16 + gq + hr * 8;
        const int ti = r / G, hj = r % G;
        const float inv = l_r[hr] > 0.f ? 1.f / l_r[hr] : 0.f;
        bf16 *orow = (bf16 *)a.out + (size_t)(tok0 + ti) * H * D + (size_t)(g * G + hj) * D;
#pragma unroll
        for (int dt = 0; dt < NDT; dt++) {
            *(bf162 *)(orow + dt * 8 + 2 * tq) =
                __floats2bfloat162_rn(o[dt][2 * hr] * inv, o[dt][2 * hr + 1] * inv);
        }
    }
}

extern "C" int frk_attention_prefill_supported(int D, int G, int kv_int8) {
    return !kv_int8 && (D == 64 || D == 128) && G >= 1 && G <= 8;
}

extern "C" void frk_attention_prefill(const frk_attn_args *a, int pos0, cudaStream_t st) {
    if (a->T <= 0) return;
    const int G = a->H / a->Hkv;
    FR_DEV_ASSERT(frk_attention_prefill_supported(a->D, G, a->kv_int8));
    const int QT = 64 / G;
    dim3 grid((a->T + QT - 1) / QT, a->Hkv);
    if (a->D == 64)
        frk_launch(k_attn_prefill<64>, grid, dim3(128), 0, st, *a, G, pos0);
    else
        frk_launch(k_attn_prefill<128>, grid, dim3(128), 0, st, *a, G, pos0);
}

/* k_misc.cu — the small memory-bound kernels of the decoder: embedding gather, RMSNorm, RoPE +
 * KV store (bf16 cache, or staging for the int8 store), the int8 KV store with per-block scales,
 * SwiGLU, random fills for benchmarks, and on-device sampling (argmax; temperature / top-k /
 * top-p / min-p).
 *
 * Each is one pass over its data: a block per row (token), 16-byte or 8-byte accesses where the
 * row allows, reductions in fp32 (warp shuffles, then shared memory). RoPE angles are computed
 * in double (pos * inv_freq, then sincos) once per token and shared by all heads, so long
 * positions keep full precision.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/rope_kv.cuh"


/* ---------------------------------------------------------------- embedding */
__global__ void k_embed(const bf16 *__restrict__ table, const int32_t *__restrict__ tokens, int E,
                        float *__restrict__ x) {
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x;
    const bf16 *row = table + (size_t)tokens[t] * E;
    float *o = x + (size_t)t * E;
    for (int i = threadIdx.x; i < E; i += blockDim.x) o[i] = __bfloat162float(row[i]);
}

extern "C" void frk_embed(const uint16_t *table, const int32_t *tokens, int T, int E, float *x,
                          cudaStream_t st) {
    if (T <= 0) return;
    frk_launch(k_embed, dim3(T), dim3(256), 0, st, (const bf16 *)table, tokens, E, x);
}

/* ---------------------------------------------------------------- block reduction */
static __device__ float block_sum(float v, float *sh /* [32] */) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float r = 0.f;
    for (int i = 0; i < nw; i++) r += sh[i];
    return r;
}
static __device__ float block_max(float v, float *sh) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float r = -INFINITY;
    for (int i = 0; i < nw; i++) r = fmaxf(r, sh[i]);
    return r;
}

/* ---------------------------------------------------------------- RMSNorm */
/* One block per row. E % 4 == 0 uses float4 loads. */
__global__ void k_rmsnorm(const float *__restrict__ x, const float *__restrict__ w,
                          const int32_t *__restrict__ rows, int E, float eps, bf16 *__restrict__ out) {
    __shared__ float sh[32];
    pdl_trigger();
    pdl_wait();
    const int i = blockIdx.x;
    const int r = rows ? rows[i] : i;
    const float *xr = x + (size_t)r * E;
    bf16 *o = out + (size_t)i * E;
    float ss = 0.f;
    if ((E & 3) == 0) {
        for (int j = threadIdx.x * 4; j < E; j += blockDim.x * 4) {
            float4 v = *(const float4 *)(xr + j);
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
    } else {
        for (int j = threadIdx.x; j < E; j += blockDim.x) ss += xr[j] * xr[j];
    }
    ss = block_sum(ss, sh);
    const float inv = rsqrtf(ss / (float)E + eps);
    if ((E & 3) == 0) {
        for (int j = threadIdx.x * 4; j < E; j += blockDim.x * 4) {
            float4 v = *(const float4 *)(xr + j);
            float4 g = *(const float4 *)(w + j);
            bf162 a = __floats2bfloat162_rn(v.x * inv * g.x, v.y * inv * g.y);
            bf162 b = __floats2bfloat162_rn(v.z * inv * g.z, v.w * inv * g.w);
            *(bf162 *)(o + j) = a;
            *(bf162 *)(o + j + 2) = b;
        }
    } else {
        for (int j = threadIdx.x; j < E; j += blockDim.x) o[j] = __float2bfloat16(xr[j] * inv * w[j]);
    }
}

extern "C" void frk_rmsnorm(const float *x, const float *w, const int32_t *rows, int n, int E,
                            float eps, uint16_t *out, cudaStream_t st) {
    if (n <= 0) return;
    int th = E >= 4096 ? 512 : 256;
    frk_launch(k_rmsnorm, dim3(n), dim3(th), 0, st, x, w, rows, E, eps, (bf16 *)out);
}

/* ---------------------------------------------------------------- RoPE + KV */
/* One block per token. Shared: cos/sin [D/2]. */
__global__ void k_rope_kv(frk_rope_args a) {
    extern __shared__ float cs[]; /* [D/2] cos, then [D/2] sin */
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x, D = a.D, half = D / 2;
    float *sn = cs + half;
    const int p = a.pos[t];
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        if (a.cos_tab) {
            cs[i] = a.cos_tab[(size_t)p * half + i];
            sn[i] = a.sin_tab[(size_t)p * half + i];
        } else {
            double s, c;
            sincos((double)p * a.inv_freq[i], &s, &c);
            cs[i] = (float)c;
            sn[i] = (float)s;
        }
    }
    __syncthreads();
    const int NQ = a.H * D, NK = a.Hkv * D, W = NQ + 2 * NK;
    const float *row = a.qkv + (size_t)t * W;
    /* destination of K/V for this token */
    bf16 *kdst = nullptr, *vdst = nullptr;
    size_t head_stride = 0;
    rope_kv_dest(a, t, p, &kdst, &vdst, &head_stride);
    /* rotate q and k: pairs */
    const int npairs = (a.H + a.Hkv) * half;
    for (int idx = threadIdx.x; idx < npairs; idx += blockDim.x) {
        const int h = idx / half, i = idx % half;
        const int i0 = a.interleaved ? 2 * i : i, i1 = a.interleaved ? 2 * i + 1 : i + half;
        const int off = h * D; /* q heads then k heads are contiguous in the row */
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
    /* v: copy */
    for (int idx = threadIdx.x; idx < NK; idx += blockDim.x) {
        const int h = idx / D, d = idx % D;
        float v = row[NQ + NK + idx];
        if (a.bias) v += a.bias[NQ + NK + idx];
        vdst[(size_t)h * head_stride + d] = __float2bfloat16(v);
    }
}

extern "C" void frk_rope_kv(const frk_rope_args *a, cudaStream_t st) {
    if (a->T <= 0) return;
    FR_DEV_ASSERT(a->D % 2 == 0 && a->D <= 512);
    FR_DEV_ASSERT(a->kc ? (a->vc && a->block_tables && a->tok_seq) : (a->kvnew != nullptr));
    frk_launch(k_rope_kv, dim3(a->T), dim3(128), (size_t)a->D * sizeof(float), st, *a);
}

/* ---------------------------------------------------------------- INT8 KV store */
/* grid (n_seg, Hkv, 2 (K/V)); 128 threads. */
__global__ void k_kv_store_i8(const bf16 *__restrict__ kvnew, const int32_t *__restrict__ seg,
                              const int32_t *__restrict__ seg_start, const int32_t *__restrict__ rows,
                              const int32_t *__restrict__ bt,
                              int bt_stride, int layer, int n_layer, int Hkv, int D, int8_t *kc,
                              int8_t *vc, float *kscale, float *vscale) {
    __shared__ float sh[32];
    pdl_trigger();
    pdl_wait();
    const int si = blockIdx.x, h = blockIdx.y, which = blockIdx.z;
    const int s = seg[si * 4 + 0], bi = seg[si * 4 + 1], f0 = seg[si * 4 + 2], n = seg[si * 4 + 3];
    const int32_t *srows = rows + seg_start[si]; /* kvnew row of the segment's j-th token */
    const int NK = Hkv * D;
    const int blk = bt[(size_t)s * bt_stride + bi];
    const size_t sidx = ((size_t)blk * n_layer + layer) * Hkv + h;
    int8_t *dst = (which ? vc : kc) + sidx * FRK_BLOCK * D;
    float *scale = (which ? vscale : kscale) + sidx;
    /* absmax of the new values */
    float amax = 0.f;
    for (int idx = threadIdx.x; idx < n * D; idx += blockDim.x) {
        const int j = idx / D, d = idx % D;
        const float v = __bfloat162float(kvnew[(size_t)srows[j] * 2 * NK + which * NK + h * D + d]);
        amax = fmaxf(amax, fabsf(v));
    }
    amax = block_max(amax, sh);
    const float s_old = f0 > 0 ? *scale : 0.f;
    const float s_new = fmaxf(s_old, amax / 127.f);
    if (f0 > 0 && s_new > s_old) {
        const float r = s_old / s_new;
        for (int idx = threadIdx.x; idx < f0 * D; idx += blockDim.x) {
            const float q = (float)dst[idx] * r;
            dst[idx] = (int8_t)fminf(127.f, fmaxf(-127.f, rintf(q)));
        }
    }
    const float inv = s_new > 0.f ? 1.f / s_new : 0.f;
    for (int idx = threadIdx.x; idx < n * D; idx += blockDim.x) {
        const int j = idx / D, d = idx % D;
        const float v = __bfloat162float(kvnew[(size_t)srows[j] * 2 * NK + which * NK + h * D + d]);
        dst[(size_t)(f0 + j) * D + d] = (int8_t)fminf(127.f, fmaxf(-127.f, rintf(v * inv)));
    }
    __syncthreads(); /* every thread read *scale (s_old) before it changes */
    if (threadIdx.x == 0) *scale = s_new;
}

extern "C" void frk_kv_store_i8(const uint16_t *kvnew, const int32_t *seg, const int32_t *seg_start,
                                const int32_t *rows, int n_seg, const int32_t *block_tables, int bt_stride, int layer,
                                int n_layer, int Hkv, int D, int8_t *kc, int8_t *vc, float *kscale,
                                float *vscale, cudaStream_t st) {
    if (n_seg <= 0) return;
    dim3 grid(n_seg, Hkv, 2);
    frk_launch(k_kv_store_i8, grid, dim3(128), 0, st, (const bf16 *)kvnew, seg, seg_start, rows,
               block_tables, bt_stride, layer, n_layer, Hkv, D, kc, vc, kscale, vscale);
}

/* ---------------------------------------------------------------- SwiGLU */
__global__ void k_swiglu(const float2 *__restrict__ gu, size_t n, bf16 *__restrict__ act) {
    pdl_trigger();
    pdl_wait();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float2 v = gu[i];
        act[i] = __float2bfloat16(v.x / (1.f + __expf(-v.x)) * v.y);
    }
}
extern "C" void frk_swiglu(const float *gu, int T, int F, uint16_t *act, cudaStream_t st) {
    const size_t n = (size_t)T * F;
    if (!n) return;
    int blocks = (int)FR_MIN_SZ((n + 255) / 256, (size_t)132 * 16);
    frk_launch(k_swiglu, dim3(blocks), dim3(256), 0, st, (const float2 *)gu, n, (bf16 *)act);
}

/* ---------------------------------------------------------------- fills */
static __host__ __device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static __host__ __device__ __forceinline__ float u01(uint64_t h) { /* [0, 1) with 24 bits */
    return (float)(h >> 40) * (1.0f / 16777216.0f);
}
__global__ void k_fill_bf16(bf16 *p, size_t n, float amp, float off, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = __float2bfloat16(off + amp * (2.f * u01(mix64(seed ^ (i * 0x632be59bd9b4e019ull))) - 1.f));
}
__global__ void k_fill_f32(float *p, size_t n, float amp, float off, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = off + amp * (2.f * u01(mix64(seed ^ (i * 0x632be59bd9b4e019ull))) - 1.f);
}
__global__ void k_fill_u32(uint32_t *p, size_t n, uint32_t v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}
extern "C" void frk_fill_bf16(uint16_t *p, size_t n, float amp, float offset, uint64_t seed,
                              cudaStream_t st) {
    if (!n) return;
    k_fill_bf16<<<132 * 8, 256, 0, st>>>((bf16 *)p, n, amp, offset, seed);
    FR_CK_LAUNCH();
}
extern "C" void frk_fill_f32(float *p, size_t n, float amp, float offset, uint64_t seed,
                             cudaStream_t st) {
    if (!n) return;
    k_fill_f32<<<132 * 8, 256, 0, st>>>(p, n, amp, offset, seed);
    FR_CK_LAUNCH();
}
extern "C" void frk_fill_u32(uint32_t *p, size_t n, uint32_t value, cudaStream_t st) {
    if (!n) return;
    k_fill_u32<<<132 * 8, 256, 0, st>>>(p, n, value);
    FR_CK_LAUNCH();
}

/* ---------------------------------------------------------------- sampling */
/* (value, index) max with lowest index among ties; NaN -> -inf. */
struct vi { float v; int i; };
static __device__ __forceinline__ vi vi_best(vi a, vi b) {
    if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
    return a;
}
static __device__ vi block_argmax(vi x, float *shv, int *shi) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        vi y;
        y.v = __shfl_xor_sync(0xffffffffu, x.v, o);
        y.i = __shfl_xor_sync(0xffffffffu, x.i, o);
        x = vi_best(x, y);
    }
    __syncthreads();
    if (lane == 0) {
        shv[w] = x.v;
        shi[w] = x.i;
    }
    __syncthreads();
    vi r = {shv[0], shi[0]};
    for (int i = 1; i < nw; i++) r = vi_best(r, vi{shv[i], shi[i]});
    return r;
}

__global__ void k_argmax(const float *__restrict__ logits, int V, int32_t *ids) {
    __shared__ float shv[32];
    __shared__ int shi[32];
    pdl_trigger();
    pdl_wait();
    const float *l = logits + (size_t)blockIdx.x * V;
    vi best = {-INFINITY, 0x7fffffff};
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float v = l[i];
        if (v != v) v = -INFINITY;
        best = vi_best(best, vi{v, i});
    }
    best = block_argmax(best, shv, shi);
    if (threadIdx.x == 0) ids[blockIdx.x] = best.i == 0x7fffffff ? 0 : best.i;
}

extern "C" void frk_argmax(const float *logits, int R, int V, int32_t *ids, cudaStream_t st) {
    if (R <= 0) return;
    k_argmax<<<R, 1024, 0, st>>>(logits, V, ids);
    FR_CK_LAUNCH();
}

static __host__ __device__ double sample_u(uint64_t seed, uint64_t counter, int row) {
    uint64_t h = mix64(mix64(seed ^ 0x5851f42d4c957f2dull) ^ (counter * 0x9e3779b97f4a7c15ull) ^
                       ((uint64_t)(uint32_t)row << 1));
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}
extern "C" double frk_sample_uniform(uint64_t seed, uint64_t counter, int row) {
    return sample_u(seed, counter, row);
}

/* One block (1024 threads) per row. Weights e_i = exp((l_i - max) / T) in (0, 1]. Thresholds by
 * bisection on the value (enough for fp32: 40 halvings of [0, 1]):
 *   top-k: smallest tau with count(e >= tau) >= k  ... kept set {e >= tau_k}
 *   top-p: largest tau with mass(e >= tau, kept) >= p * mass(kept)
 *   min-p: e >= min_p (the best has e = 1). */
__global__ void k_sample(const float *__restrict__ logits, int V, const frk_sample_params *prm,
                         int32_t *ids) {
    __shared__ float shv[32];
    __shared__ int shi[32];
    __shared__ float sh[32];
    pdl_trigger();
    pdl_wait();
    const int r = blockIdx.x;
    const float *l = logits + (size_t)r * V;
    const frk_sample_params P = prm[r];
    vi best = {-INFINITY, 0x7fffffff};
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float v = l[i];
        if (v != v) v = -INFINITY;
        best = vi_best(best, vi{v, i});
    }
    best = block_argmax(best, shv, shi);
    if (!(P.temperature > 0.f) || P.top_k == 1 || best.v == -INFINITY) {
        if (threadIdx.x == 0) ids[r] = best.i == 0x7fffffff ? 0 : best.i;
        return;
    }
    const float mx = best.v, invT = 1.f / P.temperature;
#define E_OF(i) (l[i] != l[i] ? 0.f : __expf((l[i] - mx) * invT))
    float lo_k = 0.f; /* kept: e >= lo_k */
    if (P.top_k > 0 && P.top_k < V) {
        float lo = 0.f, hi = 1.f; /* count(e >= hi) >= 1 always; find largest tau with count >= k */
        for (int it = 0; it < 40; it++) {
            const float mid = 0.5f * (lo + hi);
            float c = 0.f;
            for (int i = threadIdx.x; i < V; i += blockDim.x) c += E_OF(i) >= mid ? 1.f : 0.f;
            c = block_sum(c, sh);
            if (c >= (float)P.top_k) lo = mid; else hi = mid;
        }
        lo_k = lo;
    }
    float lo_p = lo_k;
    if (P.top_p < 1.f) {
        float tot = 0.f;
        for (int i = threadIdx.x; i < V; i += blockDim.x) {
            const float e = E_OF(i);
            tot += e >= lo_k ? e : 0.f;
        }
        tot = block_sum(tot, sh);
        const float target = P.top_p * tot;
        float lo = lo_k, hi = 1.f;
        for (int it = 0; it < 40; it++) {
            const float mid = 0.5f * (lo + hi);
            float m = 0.f;
            for (int i = threadIdx.x; i < V; i += blockDim.x) {
                const float e = E_OF(i);
                m += e >= mid ? e : 0.f;
            }
            m = block_sum(m, sh);
            if (m >= target) lo = mid; else hi = mid;
        }
        lo_p = lo;
    }
    const float thr = fmaxf(lo_p, P.min_p > 0.f ? P.min_p : 0.f);
    /* draw: contiguous chunk per thread, block prefix over chunk sums */
    const int chunk = (V + blockDim.x - 1) / blockDim.x;
    const int b0 = threadIdx.x * chunk, b1 = min(V, b0 + chunk);
    float mine = 0.f;
    for (int i = b0; i < b1; i++) {
        const float e = E_OF(i);
        mine += e >= thr ? e : 0.f;
    }
    __shared__ float pre[1024];
    pre[threadIdx.x] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        float acc = 0.f;
        for (int i = 0; i < (int)blockDim.x; i++) {
            const float v = pre[i];
            pre[i] = acc;
            acc += v;
        }
        sh[0] = acc;
    }
    __syncthreads();
    const float total = sh[0];
    const float target = (float)sample_u(P.seed, P.counter, r) * total;
    const float start = pre[threadIdx.x];
    const bool last = threadIdx.x == blockDim.x - 1;
    if (mine > 0.f && target >= start && (target < start + mine || last)) {
        float acc = start;
        int pick = -1;
        for (int i = b0; i < b1; i++) {
            const float e = E_OF(i);
            if (e >= thr) {
                pick = i;
                acc += e;
                if (target < acc) break;
            }
        }
        ids[r] = pick;
    } else if (last && mine == 0.f && target >= start) {
        ids[r] = best.i; /* rounding ran past the end: the best is always kept */
    }
#undef E_OF
}

extern "C" void frk_sample(const float *logits, int R, int V, const frk_sample_params *params,
                           int32_t *ids, cudaStream_t st) {
    if (R <= 0) return;
    k_sample<<<R, 1024, 0, st>>>(logits, V, params, ids);
    FR_CK_LAUNCH();
}

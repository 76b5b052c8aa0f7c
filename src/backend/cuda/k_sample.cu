/* k_sample.cu — on-device sampling (kernels.h frk_argmax, frk_sample): argmax with the lowest
 * index among ties (NaN never chosen); temperature, top-k, top-p and min-p, then one draw from a
 * counter hash of (seed, counter, row). One block per row, reductions in fp32.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"

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

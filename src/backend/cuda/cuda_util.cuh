/* cuda_util.cuh — shared device helpers of the CUDA backend: launch checks (FR_CK / FR_CKB in
 * cuda_check.h), bf16/f16 conversions, warp reductions, 16-byte streaming loads, the launch
 * helper with programmatic dependent launch, timeline probes.
 */
#ifndef FRUGAL_CUDA_UTIL_CUH
#define FRUGAL_CUDA_UTIL_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_check.h"

/* After every launch: configuration errors show up here at once; asynchronous faults show up at
 * the next synchronising call (also checked). */
#define FR_CK_LAUNCH() FR_CK(cudaGetLastError())

#define FR_DEV_ASSERT(x)                                                                   \
    do {                                                                                   \
        if (!(x)) {                                                                        \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #x);     \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

typedef __nv_bfloat16 bf16;
typedef __nv_bfloat162 bf162;

static __device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
static __device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

/* acc + sum of the 8 bf16 products of w and x (16 bytes each), fp32. */
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

/* 16-byte load that bypasses L1 (weights are read once per step; keep L1 for activations). */
static __device__ __forceinline__ uint4 ld_stream16(const void *p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

/* The counter hash of the fills and the sampler (splitmix64), and a [0, 1) float of its top 24 bits. */
static __host__ __device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static __host__ __device__ __forceinline__ float u01(uint64_t h) { /* [0, 1) with 24 bits */
    return (float)(h >> 40) * (1.0f / 16777216.0f);
}
/* Sum / max of v over the block (every thread gets it); sh: shared [32]. */
static __device__ __forceinline__ float block_sum(float v, float *sh /* [32] */) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float r = 0.f;
    for (int i = 0; i < nw; i++) r += sh[i];
    return r;
}
static __device__ __forceinline__ float block_max(float v, float *sh) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float r = -INFINITY;
    for (int i = 0; i < nw; i++) r = fmaxf(r, sh[i]);
    return r;
}

/* Programmatic dependent launch (Hopper). Kernels of the decode chain are launched with
 * frk_launch, which lets a kernel start while its predecessor drains: each such kernel calls
 * pdl_trigger() first (its own dependents may launch) and pdl_wait() before it touches anything a
 * predecessor writes or reads (the wait returns once the predecessor grid has completed and its
 * memory is visible). GEMVs issue their first weight loads before the wait: weights never depend
 * on the previous kernel, so the next matrix starts streaming during the previous kernel's tail.
 * Both instructions are no-ops for kernels launched without the attribute. */
/* Timeline probes (--timeline): FRK_TL_W words per launch (kernels.h), every field kept with
 * atomicMin (a latest time as its complement), all set to ~0 before the step: t[0] = first
 * block's entry, t[1] = first block past its dependency wait, t[2] = ~(last block's end),
 * t[3] = ~(last block's prologue end), t[4] = ~(last block's last stage arrived), t[5] = first
 * block's end, t[6] = ~(last block past its wait), t[7] = ~(last block's entry). Marking 0, 1
 * or 2 also marks its mirror (7, 6, 5). One thread per block; no-ops when t is NULL. */
static __device__ __forceinline__ unsigned long long gtimer() {
    unsigned long long v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    return v;
}
static __device__ __forceinline__ bool tl_latest(int field) { return (0xDCu >> field) & 1u; }
static __device__ __forceinline__ void tl_mark_by(unsigned long long *t, int field, bool me) {
    if (t && me) {
        const unsigned long long v = gtimer();
        atomicMin(t + field, tl_latest(field) ? ~v : v);
        if (field <= 2) atomicMin(t + 7 - field, tl_latest(7 - field) ? ~v : v);
    }
}
static __device__ __forceinline__ void tl_mark(unsigned long long *t, int field) {
    tl_mark_by(t, field, threadIdx.x == 0);
}

/* Shared-memory address of a generic pointer into shared memory. */
static __device__ __forceinline__ uint32_t sptr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
/* 16 bytes global -> shared without registers (cp.async.cg: past L1; completes at the next
 * cp.async.wait_group / wait_all of this thread). */
static __device__ __forceinline__ void cp_async16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

static __device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
static __device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }


template <typename... KArgs, typename... Args>
static inline void frk_launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                              cudaStream_t st, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    FR_CK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

static inline int fr_cdiv(long a, long b) { return (int)((a + b - 1) / b); }
#define FR_MIN_SZ(a, b) ((a) < (b) ? (a) : (b))
static __host__ __device__ __forceinline__ int fr_cdiv_dev(int a, int b) { return (a + b - 1) / b; }

#endif

/* quant_frag.cuh — the weight-only INT8/INT4 fragment arithmetic shared by the GEMV (k_gemv.cu)
 * and the streamed kernels (k_stream.cu): one k-step's mma.sync A fragment from a lane's packed
 * 16-byte chunk (layout in k_quant.cu), dequantised to f16 (q - z) exactly, and the f16 MMA.
 *
 * q becomes f16 (1024 + q) by one lop3 (int4: bits at 0/16, 4/20, 8/24, 12/28) or prmt (int8)
 * per pair; the zero point word zz = f16(1024 + z) in both halves is removed with one hsub2, so
 * the MMA sums (q - z) x exactly in fp32 and the group scale multiplies the fp32 partial after. */
#ifndef FRUGAL_CUDA_QUANT_FRAG_CUH
#define FRUGAL_CUDA_QUANT_FRAG_CUH

#include "backend/cuda/cuda_util.cuh"

static __device__ __forceinline__ uint32_t qf_lop3_and_or(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r; /* (a & b) | c */
    asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}
static __device__ __forceinline__ uint32_t qf_hsub2(uint32_t a, uint32_t b) {
    half2 r = __hsub2(*(const half2 *)&a, *(const half2 *)&b);
    return *(uint32_t *)&r;
}
/* The raw A fragment for a folded zero point: int4 f16 (1024 + q) in rows gq and (1024 + 16 q) in
 * rows gq + 8 (one shift, no subtraction), int8 (1024 + q); the caller removes the offsets and the
 * zero point with the group sums of the activations. */
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
/* A fragment of k-step j of a chunk wd[4] (int4: 4 k-steps per chunk, int8: 2); zz0 / zz1 are
 * the zero-point words of rows gq and gq + 8. */
template <int BITS>
static __device__ __forceinline__ void qf_frag(const uint32_t wd[4], int j, uint32_t zz0,
                                               uint32_t zz1, uint32_t A[4]) {
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
/* INT4 with one shift instead of three: the odd nibbles stay 4 bits up, f16 (1024 + 16 q), and
 * one hfma2 by 1/16 with nz1 = f16(-(64 + z)) gives (q - z) exactly (the scaling is a power of
 * two and the result a small integer). Rows gq + 8 (A[1], A[3]) hold the odd nibbles. */
static __device__ __forceinline__ uint32_t qf_hfma2(uint32_t a, uint32_t b, uint32_t c) {
    half2 r = __hfma2(*(const half2 *)&a, *(const half2 *)&b, *(const half2 *)&c);
    return *(uint32_t *)&r;
}
static __device__ __forceinline__ void qf_frag4s(const uint32_t wd[4], int j, uint32_t zz0, uint32_t nz1,
                                                 uint32_t A[4]) {
    qf_frag_raw<4>(wd, j, A);
    A[0] = qf_hsub2(A[0], zz0);
    A[1] = qf_hfma2(A[1], 0x2C002C00u, nz1);
    A[2] = qf_hsub2(A[2], zz0);
    A[3] = qf_hfma2(A[3], 0x2C002C00u, nz1);
}
static __device__ __forceinline__ void qf_mma(float c[4], const uint32_t a[4], uint32_t b0,
                                              uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#endif

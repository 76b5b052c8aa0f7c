/* k_quant.cu — the weight-only INT8 / INT4 format (group 128 along K, per (row, group) f16 scale
 * and integer zero point): the host quantiser and packer (frk_quant_rows, frk_quant_pack), the
 * device dequantiser to bf16 for the prefill GEMMs (frk_dequant_q) and random packed weights for
 * benchmarks (frk_quant_random). The GEMV (k_gemv.cu) and the streamed products (k_stream.cu)
 * read this layout.
 *
 * Packed layout (bits b, Kp = 128 NG, Mt = ceil(M / 16)): 16-byte chunk
 *   index ((rt * NG + G) * CPG + ci) * 32 + lane,  CPG = 2 (int4) or 4 (int8) chunks per group,
 * lane = 4 gq + tq holds, for each of its k-steps ks (k0 = 16 ks), the 8 values
 *   e0 = W[r][k0+2tq] e1 = W[r][k0+2tq+1] e2 = W[r+8][k0+2tq] e3 = W[r+8][k0+2tq+1]
 *   e4 = W[r][k0+2tq+8] e5 = W[r][k0+2tq+9] e6 = W[r+8][k0+2tq+8] e7 = W[r+8][k0+2tq+9]
 * (r = 16 rt + gq): int8 as 8 bytes e0..e7; int4 as one word with e0,e1 at bits 0/16, e2,e3 at
 * 4/20, e4,e5 at 8/24, e6,e7 at 12/28 (so (w >> 4i) & 0x000F000F is fragment register i).
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ dequantise (prefill) */
/* One thread per 16-byte chunk; plain integer decoding (independent of the GEMV's tricks). */
__global__ void k_dequant_q(const uint4 *__restrict__ Wp, const uint32_t *__restrict__ sz, int M,
                            int K, int NG, int bits, bf16 *__restrict__ out) {
    pdl_trigger();
    pdl_wait();
    const int CPG = bits == 4 ? 2 : 4, KPC = 8 / CPG;
    const size_t n_chunks = (size_t)fr_cdiv_dev(M, 16) * NG * CPG * 32;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n_chunks;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int lane = (int)(idx % 32);
        const size_t c_all = idx / 32;
        const int ci = (int)(c_all % CPG);
        const size_t tg = c_all / CPG;
        const int G = (int)(tg % NG);
        const int rt = (int)(tg / NG);
        const int gq = lane >> 2, tq = lane & 3;
        const uint4 v = Wp[idx];
        const uint32_t wd[4] = {v.x, v.y, v.z, v.w};
        const int ra = rt * 16 + gq, rb = ra + 8;
        float sa = 0.f, sb = 0.f;
        int za = 0, zb = 0;
        {
            const uint32_t a = sz[((size_t)rt * NG + G) * 16 + gq], b = sz[((size_t)rt * NG + G) * 16 + gq + 8];
            sa = __half2float(__ushort_as_half((unsigned short)(a & 0xffff)));
            sb = __half2float(__ushort_as_half((unsigned short)(b & 0xffff)));
            za = (int)__half2float(__ushort_as_half((unsigned short)(a >> 16))) - 1024;
            zb = (int)__half2float(__ushort_as_half((unsigned short)(b >> 16))) - 1024;
        }
        for (int j = 0; j < KPC; j++) {
            const int k0 = (G * 8 + ci * KPC + j) * 16;
            int e[8];
            if (bits == 4) {
                const uint32_t w = wd[j];
                const int sh[8] = {0, 16, 4, 20, 8, 24, 12, 28};
                for (int i = 0; i < 8; i++) e[i] = (int)((w >> sh[i]) & 0xF);
            } else {
                for (int i = 0; i < 8; i++) e[i] = (int)((wd[2 * j + i / 4] >> (8 * (i % 4))) & 0xFF);
            }
            const int rr[8] = {ra, ra, rb, rb, ra, ra, rb, rb};
            const int kk[8] = {0, 1, 0, 1, 8, 9, 8, 9};
            for (int i = 0; i < 8; i++) {
                const int row = rr[i], k = k0 + 2 * tq + kk[i];
                if (row >= M || k >= K) continue;
                const bool isa = row == ra;
                const float w = (float)(e[i] - (isa ? za : zb)) * (isa ? sa : sb);
                out[(size_t)row * K + k] = __float2bfloat16(w);
            }
        }
    }
}

extern "C" void frk_dequant_q(const void *packed, const uint32_t *sz, int M, int K, int bits,
                              uint16_t *out, cudaStream_t st) {
    const int NG = fr_cdiv(K, FRK_GROUP);
    k_dequant_q<<<132 * 8, 256, 0, st>>>((const uint4 *)packed, sz, M, K, NG, bits, (bf16 *)out);
    FR_CK_LAUNCH();
}

/* ------------------------------------------------------------------ random packed weights */
static __device__ __forceinline__ uint64_t qmix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
__global__ void k_rand_u32(uint32_t *p, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (uint32_t)(qmix(seed ^ (i * 0xd1342543de82ef95ull)) >> 16);
}
extern "C" void frk_quant_random(void *packed, uint32_t *sz, int M, int K, int bits, float amp,
                                 uint64_t seed, cudaStream_t st) {
    const size_t nw = frk_quant_bytes(M, K, bits) / 4;
    k_rand_u32<<<132 * 8, 256, 0, st>>>((uint32_t *)packed, nw, seed);
    FR_CK_LAUNCH();
    const int half = 1 << (bits - 1);
    const uint16_t s16 = __half_as_ushort(__float2half(amp / (float)half));
    const uint16_t z16 = __half_as_ushort(__float2half(1024.f + (float)half));
    frk_fill_u32(sz, frk_quant_sz_count(M, K), (uint32_t)s16 | ((uint32_t)z16 << 16), st);
}

/* ------------------------------------------------------------------ host: quantise and pack */
extern "C" size_t frk_quant_bytes(int M, int K, int bits) {
    return (size_t)fr_cdiv(M, 16) * fr_cdiv(K, FRK_GROUP) * 16 * FRK_GROUP * bits / 8;
}
extern "C" size_t frk_quant_sz_count(int M, int K) {
    return (size_t)fr_cdiv(M, 16) * fr_cdiv(K, FRK_GROUP) * 16;
}

extern "C" void frk_quant_rows(const float *w, int M, int K, int bits, uint8_t *q, uint16_t *s,
                               uint8_t *z) {
    const int NG = fr_cdiv(K, FRK_GROUP), Kp = NG * FRK_GROUP;
    const int qmax = (1 << bits) - 1;
    for (int r = 0; r < M; r++) {
        for (int G = 0; G < NG; G++) {
            const int k0 = G * FRK_GROUP, k1 = k0 + FRK_GROUP < K ? k0 + FRK_GROUP : K;
            float mn = 0.f, mx = 0.f; /* the range always holds 0, so z is in [0, qmax] */
            for (int k = k0; k < k1; k++) {
                const float v = w[(size_t)r * K + k];
                mn = v < mn ? v : mn;
                mx = v > mx ? v : mx;
            }
            const uint16_t s16 = __half_as_ushort(__float2half((mx - mn) / (float)qmax));
            const float sr = __half2float(__ushort_as_half(s16));
            int zz = sr > 0.f ? (int)lrintf(-mn / sr) : 0;
            zz = zz < 0 ? 0 : (zz > qmax ? qmax : zz);
            s[(size_t)r * NG + G] = s16;
            z[(size_t)r * NG + G] = (uint8_t)zz;
            for (int k = k0; k < k0 + FRK_GROUP; k++) {
                int qq = zz;
                if (k < k1 && sr > 0.f) {
                    qq = (int)lrintf(w[(size_t)r * K + k] / sr) + zz;
                    qq = qq < 0 ? 0 : (qq > qmax ? qmax : qq);
                }
                q[(size_t)r * Kp + k] = (uint8_t)qq;
            }
        }
    }
}

extern "C" void frk_quant_pack(const uint8_t *q, const uint16_t *s, const uint8_t *z, int M, int K,
                               int bits, void *packed, uint32_t *sz) {
    const int NG = fr_cdiv(K, FRK_GROUP), Kp = NG * FRK_GROUP, Mt = fr_cdiv(M, 16);
    const int CPG = bits == 4 ? 2 : 4, KPC = 8 / CPG;
    uint8_t *out = (uint8_t *)packed;
    for (int rt = 0; rt < Mt; rt++)
        for (int G = 0; G < NG; G++) {
            for (int r = 0; r < 16; r++) {
                const int row = rt * 16 + r;
                uint32_t s16 = 0, zz = 0;
                if (row < M) {
                    s16 = s[(size_t)row * NG + G];
                    zz = z[(size_t)row * NG + G];
                }
                const uint16_t z16 = __half_as_ushort(__float2half(1024.f + (float)zz));
                sz[((size_t)rt * NG + G) * 16 + r] = s16 | ((uint32_t)z16 << 16);
            }
            for (int ci = 0; ci < CPG; ci++)
                for (int lane = 0; lane < 32; lane++) {
                    const int gq = lane >> 2, tq = lane & 3;
                    const int ra = rt * 16 + gq, rb = ra + 8;
                    uint8_t *dst = out + ((((size_t)rt * NG + G) * CPG + ci) * 32 + lane) * 16;
                    memset(dst, 0, 16);
                    for (int j = 0; j < KPC; j++) {
                        const int k0 = (G * 8 + ci * KPC + j) * 16 + 2 * tq;
                        const int rr[8] = {ra, ra, rb, rb, ra, ra, rb, rb};
                        const int kk[8] = {0, 1, 0, 1, 8, 9, 8, 9};
                        uint32_t e[8];
                        for (int i = 0; i < 8; i++)
                            e[i] = rr[i] < M ? q[(size_t)rr[i] * Kp + k0 + kk[i]] : 0u;
                        if (bits == 8) {
                            for (int i = 0; i < 8; i++) dst[8 * j + i] = (uint8_t)e[i];
                        } else {
                            const int sh[8] = {0, 16, 4, 20, 8, 24, 12, 28};
                            uint32_t w = 0;
                            for (int i = 0; i < 8; i++) w |= (e[i] & 0xF) << sh[i];
                            memcpy(dst + 4 * j, &w, 4);
                        }
                    }
                }
        }
}

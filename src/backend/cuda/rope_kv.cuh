/* rope_kv.cuh — where token t's new K and V rows go (frk_rope_args, kernels.h): the bf16 paged
 * cache (block from the sequence's block table, slot pos % 16, this layer) or the int8-KV
 * staging rows. Shared by k_rope_kv (k_kv.cu) and the fused qkv epilogue (k_stream.cu). */
#ifndef FRUGAL_CUDA_ROPE_KV_CUH
#define FRUGAL_CUDA_ROPE_KV_CUH

#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/kernels.h"

/* K row of KV head h at *kdst + h * *hs (V likewise); pos = a.pos[t]. */
static __device__ __forceinline__ void rope_kv_dest(const frk_rope_args &a, int t, int pos,
                                                    bf16 **kdst, bf16 **vdst, size_t *hs) {
    const int D = a.D, NK = a.Hkv * D;
    if (a.kc) {
        const int blk = a.block_tables[(size_t)a.tok_seq[t] * a.bt_stride + pos / FRK_BLOCK];
        const size_t base = (((size_t)blk * a.n_layer + a.layer) * a.Hkv) * FRK_BLOCK * D +
                            (size_t)(pos % FRK_BLOCK) * D;
        *kdst = (bf16 *)a.kc + base;
        *vdst = (bf16 *)a.vc + base;
        *hs = (size_t)FRK_BLOCK * D;
    } else {
        *kdst = (bf16 *)a.kvnew + (size_t)t * 2 * NK;
        *vdst = *kdst + NK;
        *hs = D;
    }
}

#endif

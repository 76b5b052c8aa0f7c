/* k_onnx.h — the device kernels of the CUDA ONNX executor (backend/cuda/onnx_cuda.h), one C
 * launcher per op family, all fp32, C order, on the caller's stream (graph-capturable: no
 * allocation, no synchronisation). Each mirrors the CPU op of backend/cpu/onnx_ops.c in the
 * same arithmetic order where the op is elementwise (so fused activations and broadcasts agree
 * to the last bit with the CPU except for expf/sqrtf rounding); reductions (softmax, means) sum
 * in a tree, not left to right.
 *
 * Shapes come as kox_idx: a rank r <= KOX_MAXR, the output's dims and, per input, the element
 * stride of each output axis (0 where the input broadcasts) and a base offset. That one form
 * covers broadcasting (Add...), Transpose (strides permuted) and Slice (base + step strides).
 */
#ifndef FR_BACKEND_CUDA_K_ONNX_H
#define FR_BACKEND_CUDA_K_ONNX_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KOX_MAXR 8

/* An indexing of the output by up to two inputs. */
typedef struct kox_idx {
    int r;                   /* axes, >= 1 */
    int64_t n;               /* output elements */
    int64_t d[KOX_MAXR];     /* output dims */
    int64_t sa[KOX_MAXR];    /* input a: element stride per output axis */
    int64_t sb[KOX_MAXR];    /* input b: element stride per output axis (binary ops) */
    int64_t oa;              /* input a: base offset (Slice) */
} kox_idx;

/* The elementwise program fused into Conv / ConvTranspose / BN (backend/cpu/onnx_ops.h ox_epi):
 * instructions on each value after the bias, with one saved copy for x * f(x). */
#define KOX_EP_MAX 24
typedef enum kox_ep_op {
    KOX_EP_MULK, KOX_EP_ADDK, KOX_EP_SUBK, KOX_EP_RSUBK, KOX_EP_DIVK, KOX_EP_RDIVK, KOX_EP_RELU,
    KOX_EP_CLIP, KOX_EP_SIGMOID, KOX_EP_HSIG, KOX_EP_SAVE, KOX_EP_MULSAVED
} kox_ep_op;
typedef struct kox_epi {
    int n; /* 0: nothing fused */
    struct {
        int op; /* kox_ep_op */
        float a, b;
    } ins[KOX_EP_MAX];
} kox_epi;

typedef enum kox_bin_op { KOX_ADD, KOX_SUB, KOX_MUL, KOX_DIV, KOX_POW } kox_bin_op;
typedef enum kox_un_op {
    KOX_RELU, KOX_SIGMOID, KOX_SQRT, KOX_HARDSIGMOID, KOX_CLIP, KOX_COPY
} kox_un_op;

/* y[i] = a[.] op b[.] over ix. */
void kox_binary(cudaStream_t st, kox_bin_op op, const kox_idx *ix, const float *a, const float *b,
                float *y);
/* y = f(x) over n elements; p0, p1: Clip's (lo, hi), HardSigmoid's (alpha, beta). */
void kox_unary(cudaStream_t st, kox_un_op op, int64_t n, float p0, float p1, const float *x,
               float *y);
/* y[i] = x[oa + sum idx_k * sa[k]] over ix (Transpose, Slice). */
void kox_gather(cudaStream_t st, const kox_idx *ix, const float *x, float *y);
/* y (planes of inner) = epi(y + bias[plane % C]) in place; bias may be NULL. */
void kox_bias_epi(cudaStream_t st, float *y, const float *bias, int64_t planes, int64_t C,
                  int64_t inner, const kox_epi *epi);
/* Inference BatchNormalization of x (N, C, inner) with epi. */
void kox_bn(cudaStream_t st, const float *x, float *y, const float *scale, const float *bias,
            const float *mean, const float *var, float eps, int64_t N, int64_t C, int64_t inner,
            const kox_epi *epi);
/* Max / average pooling of x (planes, H, W) into y (planes, OH, OW), the CPU op's windows. */
typedef struct kox_pool {
    int64_t planes, H, W, OH, OW, kh, kw, sh, sw, pt, pl, pb, pr;
    int is_max, include_pad;
} kox_pool;
void kox_pool2d(cudaStream_t st, const kox_pool *p, const float *x, float *y);
/* y[p] = mean of x[p*inner .. +inner) for p < outer (GlobalAveragePool, trailing ReduceMean). */
void kox_row_mean(cudaStream_t st, const float *x, float *y, int64_t outer, int64_t inner);
/* ReduceMean over any axes: output element o reads x at base(o) + the reduced offsets.
 * ko: the kept axes (dims of the output, x strides); kr: the reduced axes (dims, x strides). */
typedef struct kox_reduce {
    int nk, nr;
    int64_t kd[KOX_MAXR], ks[KOX_MAXR], rd[KOX_MAXR], rs[KOX_MAXR];
    int64_t n_out, cnt;
} kox_reduce;
void kox_reduce_mean(cudaStream_t st, const kox_reduce *p, const float *x, float *y);
/* Softmax along a strided axis: for o < outer, k < inner, the D values x[o*D*inner + i*inner + k]. */
void kox_softmax(cudaStream_t st, const float *x, float *y, int64_t outer, int64_t D, int64_t inner);
/* For each of rows rows of D values: y[2r] = the index (as a float) of the first largest value
 * of x[r*D .. r*D + D), y[2r + 1] = that value (NaN is never the largest; a row of -inf or NaN
 * only gives index 0 and -inf), as the host's strict greater-than scan finds it. */
void kox_argmax_last(cudaStream_t st, const float *x, float *y, int64_t rows, int64_t D);
/* Nearest resize, asymmetric, floor: y over dims od of rank r from x (dims xd); scale per axis. */
void kox_resize_nearest(cudaStream_t st, int r, const int64_t *xd, const int64_t *od,
                        const float *scale, int64_t n, const float *x, float *y);
/* Zero-padded copy of x (planes, H, W) into y (planes, H + pt + pb, W + pl + pr). */
void kox_pad2d(cudaStream_t st, const float *x, float *y, int64_t planes, int64_t H, int64_t W,
               int64_t pt, int64_t pl, int64_t OH, int64_t OW);

#ifdef __cplusplus
}
#endif

#endif

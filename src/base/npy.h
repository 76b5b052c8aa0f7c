/* npy.h — NumPy .npy arrays read into float32 and written from float32.
 *
 * The format (numpy.lib.format): the magic "\x93NUMPY", a major version 1, 2 or 3 and a minor
 * version 0, a little-endian header length (2 bytes for version 1, 4 bytes for 2 and 3), then
 * that many bytes of a Python dict literal {'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), } padded with spaces and ending in '\n', then the raw data.
 *
 * The reader is strict and bounded: the header is at most FR_NPY_MAX_HEADER bytes and must hold
 * exactly the three keys, each once; the dtype must be one of <f4 <f8 <f2 <i4 <i8 |u1 (converted
 * to float32; <f8 and the integers round to the nearest float); Fortran order is refused; at
 * most FR_NPY_MAX_DIMS dimensions, non-negative, whose product must not overflow and is at most
 * FR_NPY_MAX_ELEMS; the data must be exactly the bytes after the header (a truncated file or
 * trailing bytes are errors). Errors carry codes: FR_ERR_NOT_FOUND (no file), FR_ERR_BAD_REQUEST
 * (not a well-formed .npy), FR_ERR_UNSUPPORTED (a dtype, byte order, version or Fortran order we
 * do not take), FR_ERR_TOO_LARGE (a header, a rank or an element count over the caps).
 *
 * The writer writes version 1.0, '<f4', C order, the header padded to a multiple of 64 bytes,
 * exactly as numpy.save does for a float32 array, so np.load reads it back.
 *
 *   fr_npy a; fr_err err = {0};
 *   if (fr_npy_load_f32("x.npy", &a, &err) != 0) { fprintf(stderr, "%s\n", err.msg); return 1; }
 *   ... a.data[i] for i < a.n, a.shape[0..a.n_dims) ...
 *   fr_npy_free(&a);
 *
 * Thread-safe: no global state.
 */
#ifndef FRUGAL_BASE_NPY_H
#define FRUGAL_BASE_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define FR_NPY_MAX_DIMS 8
#define FR_NPY_MAX_HEADER 65536            /* bytes of the header dict (numpy writes < 200) */
#define FR_NPY_MAX_ELEMS ((int64_t)1 << 31) /* elements of one array (8 GiB of float32) */

/* A float32 array in C order. */
typedef struct fr_npy {
    int n_dims;                      /* 0 (a scalar) .. FR_NPY_MAX_DIMS */
    int64_t shape[FR_NPY_MAX_DIMS];  /* the first n_dims entries; the rest 0 */
    int64_t n;                       /* number of elements: the product of shape (1 for a scalar) */
    float *data;                     /* (n) owned, malloc'd; never NULL after a successful load */
} fr_npy;

/* Reads a .npy file into *out (converted to float32). 0, or -1 with err set (codes above) and
 * *out zeroed. The caller frees with fr_npy_free. */
int fr_npy_load_f32(const char *path, fr_npy *out, fr_err *err);

/* The same from bytes in memory (buf[0..len), the whole file). name is used in messages. */
int fr_npy_parse_f32(const uint8_t *buf, size_t len, const char *name, fr_npy *out, fr_err *err);

/* Writes data (the product of shape[0..n_dims) floats, C order) as a version 1.0 '<f4' .npy
 * file. n_dims 0..FR_NPY_MAX_DIMS, every dimension >= 0. 0, or -1 with err set
 * (FR_ERR_BAD_REQUEST for a bad shape, FR_ERR_INTERNAL when the file cannot be written; a
 * partly written file is removed). */
int fr_npy_save_f32(const char *path, const float *data, int n_dims, const int64_t *shape,
                    fr_err *err);

/* Frees the data and zeroes *a (NULL or a zeroed struct is fine). */
void fr_npy_free(fr_npy *a);

#endif

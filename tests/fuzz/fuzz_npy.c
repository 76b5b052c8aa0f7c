/* fuzz_npy.c — libFuzzer harness for the .npy reader (src/base/npy.c).
 *
 * The input is a whole .npy image (copied to a buffer of exactly its size so that
 * AddressSanitizer sees a read past the end). A successful parse must give 0..8 dimensions whose
 * product is n, at most FR_NPY_MAX_ELEMS, data that is not NULL and an input at least as long as
 * the data it holds; a failure must leave *out zeroed, carry a code other than FR_ERR_INTERNAL
 * and a one-line message. A small array that parses is written back with fr_npy_save_f32 and
 * read again: the same shape and the same float bits.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/npy.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char tmp_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1;
    snprintf(tmp_path, sizeof tmp_path, "/tmp/fuzz_npy_%d.npy", (int)getpid());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *b = malloc(size ? size : 1);
    if (size) memcpy(b, data, size);
    fr_npy a;
    fr_err err = {0};
    int rc = fr_npy_parse_f32(b, size, "fuzz", &a, &err);
    free(b);
    if (rc != 0) {
        if (a.data || a.n || a.n_dims || err.code == FR_ERR_INTERNAL || !err.msg[0] ||
            strchr(err.msg, '\n'))
            abort();
        return 0;
    }
    if (a.n_dims < 0 || a.n_dims > FR_NPY_MAX_DIMS || !a.data || a.n > FR_NPY_MAX_ELEMS) abort();
    int64_t n = 1;
    for (int i = 0; i < a.n_dims; i++) {
        if (a.shape[i] < 0) abort();
        n *= a.shape[i];
    }
    if (n != a.n || (size_t)n > size) abort();
    if (a.n <= 4096) {
        fr_npy c;
        if (fr_npy_save_f32(tmp_path, a.data, a.n_dims, a.shape, &err) != 0) abort();
        if (fr_npy_load_f32(tmp_path, &c, &err) != 0) abort();
        if (c.n != a.n || c.n_dims != a.n_dims ||
            memcmp(c.shape, a.shape, sizeof a.shape) ||
            (a.n && memcmp(c.data, a.data, (size_t)a.n * sizeof(float))))
            abort();
        fr_npy_free(&c);
        unlink(tmp_path);
    }
    fr_npy_free(&a);
    return 0;
}

/* fuzz_vl_sample.c — libFuzzer harness for the JSONL sample parser of `frugal analyze heads` and
 * `frugal eval-vqa` (src/tools/vl_sample.c).
 *
 * The input is one line (copied to a buffer of exactly its size so that AddressSanitizer sees a
 * read past the end). A success must give 1..FR_VL_SAMPLE_MAX_IMAGES images or a pixel file with
 * as many positive grids, a question and an id, at most FR_VL_SAMPLE_MAX_ANSWERS answers; a
 * failure must leave *out zeroed and carry a code other than FR_ERR_INTERNAL with a one-line
 * message. The parser touches no file.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/vl_sample.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *b = malloc(size ? size : 1);
    if (size) memcpy(b, data, size);
    fr_vl_sample s;
    fr_err err = {0};
    int rc = fr_vl_sample_parse(b, size, "base", 7, &s, &err);
    free(b);
    if (rc) {
        static const fr_vl_sample zero;
        if (memcmp(&s, &zero, sizeof s) || err.code == FR_ERR_INTERNAL || !err.msg[0] ||
            strchr(err.msg, '\n'))
            abort();
        return 0;
    }
    bool ok = s.question && s.id && s.n_answers >= 0 && s.n_answers <= FR_VL_SAMPLE_MAX_ANSWERS;
    if (s.pixel_values)
        ok = ok && s.n_images == 0 && s.n_grids >= 1 && s.n_grids <= FR_VL_SAMPLE_MAX_IMAGES;
    else
        ok = ok && s.n_images >= 1 && s.n_images <= FR_VL_SAMPLE_MAX_IMAGES && s.n_grids == 0;
    for (int i = 0; i < 3 * s.n_grids; i++) ok = ok && s.grid_thw[i] >= 1;
    for (int i = 0; i < s.n_answers; i++) ok = ok && s.answers[i];
    if (!ok) abort();
    fr_vl_sample_free(&s);
    return 0;
}

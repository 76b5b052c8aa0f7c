/* fuzz_traceparent.c — libFuzzer harness for the W3C traceparent parser (src/meter/trace.c).
 *
 * The input is a header value of any bytes (copied to a buffer of exactly its size so that
 * AddressSanitizer sees a read past the end). A successful parse must give a version other than
 * ff, non-zero trace and parent ids, and — for version 00 — format back to exactly the input
 * without its surrounding spaces and tabs; the JSON writer must escape whatever bytes it gets.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "meter/trace.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size ? size : 1);
    if (size) memcpy(s, data, size);
    fr_traceparent t;
    if (fr_traceparent_parse(s, size, &t) == 0) {
        if (t.version == 0xff) abort();
        int nz = 0;
        for (int i = 0; i < 16; i++) nz |= t.trace_id[i];
        if (!nz) abort();
        nz = 0;
        for (int i = 0; i < 8; i++) nz |= t.parent_id[i];
        if (!nz) abort();
        if (t.version == 0) {
            size_t b = 0;
            while (b < size && (s[b] == ' ' || s[b] == '\t')) b++;
            char out[56];
            fr_traceparent_format(t.trace_id, t.parent_id, t.flags, out);
            if (size - b < 55 || memcmp(out, s + b, 55)) abort();
        }
    }
    /* the JSON string writer on the same bytes (NUL-terminated copy) */
    char *z = malloc(size + 1);
    if (size) memcpy(z, data, size);
    z[size] = 0;
    fr_buf b = {0};
    fr_meter_json_str(&b, z);
    for (size_t i = 0; i < b.len; i++)
        if ((unsigned char)b.data[i] < 0x20) abort(); /* control characters must be escaped */
    if (!fr_utf8_valid(b.data, b.len)) abort();      /* and the output is valid UTF-8 */
    fr_buf_free(&b);
    free(z);
    free(s);
    return 0;
}

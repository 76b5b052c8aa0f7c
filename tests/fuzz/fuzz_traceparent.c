/* fuzz_traceparent.c — libFuzzer harness for the W3C traceparent parser (src/meter/trace.c).
 *
 * The input is a header value of any bytes (copied to a buffer of exactly its size so that
 * AddressSanitizer sees a read past the end). A successful parse must give a version other than
 * ff, non-zero trace and parent ids, and — for version 00 — format back to exactly the input
 * without its surrounding spaces and tabs; the OTLP span writer (cJSON) must give valid JSON
 * for whatever bytes it gets.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

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
    /* the same bytes as a span name and attribute: the OTLP document cJSON prints is valid
     * UTF-8 without raw control characters, parses back, and keeps a valid UTF-8 value as is */
    char *z = malloc(size + 1);
    if (size) memcpy(z, data, size);
    z[size] = 0;
    static const uint8_t id[16] = {1};
    cJSON *span = fr_otlp_span_new(id, id, NULL, z, 1, 1, 2);
    fr_otlp_attr_str(span, "k", z);
    fr_otlp_span_end(span, 2, z);
    cJSON *spans = cJSON_CreateArray();
    cJSON_AddItemToArray(spans, span);
    cJSON *doc = fr_otlp_wrap(z, spans);
    char *text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    if (!text) abort();
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)text[i] < 0x20) abort(); /* control characters must be escaped */
    if (!fr_utf8_valid(text, n)) abort();          /* and the output is valid UTF-8 */
    cJSON *back = cJSON_Parse(text);
    if (!back) abort();
    cJSON *sp = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
                    cJSON_GetArrayItem(cJSON_GetObjectItem(back, "resourceSpans"), 0), "scopeSpans"), 0),
                    "spans"), 0);
    cJSON *name = cJSON_GetObjectItem(sp, "name");
    if (!cJSON_IsString(name)) abort();
    if (fr_utf8_valid(z, strlen(z)) && strcmp(name->valuestring, z)) abort();
    cJSON_Delete(back);
    cJSON_free(text);
    free(z);
    free(s);
    return 0;
}

/* fuzz_multipart.c — libFuzzer harness for the bounded multipart/form-data parser
 * (src/serve/multipart.c) of the audio endpoints.
 *
 * Input: the first line is the Content-Type, the rest the body. Properties checked (besides
 * ASan/UBSan's): a refusal has status 400 or 413 and a code; an accepted form has at most
 * max_parts parts, each part's data lies inside the body and within max_part_bytes, each name
 * is non-empty and NUL-terminated within its array. The same input also goes through the audio
 * endpoints' form reader (serve/audio_api.h) for both tasks: a refusal is a 4xx with a code, an
 * accepted form's file lies inside the body and is not empty. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/audio_api.h"
#include "serve/multipart.h"

static const fr_mp_limits LIM = {.max_parts = 8, .max_header_bytes = 512,
                                 .max_part_bytes = 4096, .max_total_bytes = 65536};

static void check(int c) {
    if (!c) abort();
}

static void audio_form(const char *ct, const char *body, size_t bn) {
    for (int t = 0; t < 2; t++) {
        fr_audio_form f;
        fr_api_error e;
        if (fr_audio_form_parse((fr_audio_task)t, ct, body, bn, &LIM, NULL, &f, &e) == 0) {
            check(f.file_len > 0 && (const char *)f.file >= body &&
                  (const char *)f.file + f.file_len <= body + bn);
            check(f.format <= FR_AUDIO_FMT_VERBOSE_JSON && f.temperature >= 0 && f.temperature <= 1);
        } else {
            check(e.status >= 400 && e.status < 500 && e.code && e.message[0]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nl = memchr(data, '\n', size);
    size_t cl = nl ? (size_t)(nl - data) : size;
    if (cl > 512) return 0;
    char ct[513];
    memcpy(ct, data, cl);
    ct[cl] = 0;
    size_t bn = nl ? size - cl - 1 : 0;
    char *body = malloc(bn ? bn : 1); /* exact size: ASan sees any read past it */
    if (bn) memcpy(body, nl + 1, bn);
    char b[FR_MP_MAX_BOUNDARY + 1];
    fr_mp_error e = {0};
    if (fr_mp_boundary(ct, b, &e) == 0) {
        check(strlen(b) <= FR_MP_MAX_BOUNDARY);
        fr_mp_part *p = NULL;
        int n = 0;
        if (b[0] && fr_mp_parse(body, bn, b, &LIM, &p, &n, &e) == 0) {
            check(n >= 0 && n <= LIM.max_parts);
            for (int i = 0; i < n; i++) {
                check(p[i].data >= body && p[i].data + p[i].len <= body + bn);
                check(p[i].len <= LIM.max_part_bytes);
                check(memchr(p[i].name, 0, sizeof p[i].name) && p[i].name[0]);
                check(memchr(p[i].filename, 0, sizeof p[i].filename) != NULL);
            }
            free(p);
        } else if (b[0]) {
            check(!p && (e.status == 400 || e.status == 413) && e.code);
        }
    } else {
        check(e.status == 400 && e.code);
    }
    audio_form(ct, body, bn);
    free(body);
    return 0;
}

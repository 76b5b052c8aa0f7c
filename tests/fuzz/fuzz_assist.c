/* fuzz_assist.c — libFuzzer harness for the assist request parser and handler (serve/assist.c):
 * any bytes as a request body must give a status in 200..599 and a JSON body, never a crash,
 * leak or sanitizer report. Media stages are left unavailable (their decoders have their own
 * harnesses), so the parser, depth scan, base64, media sniffing, route, NLU and the template
 * reply are what run. Also fuzzes the base64 decoder and the depth scan directly. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/assist.h"

static fr_assist *A;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!A) {
        fr_assist_config c;
        fr_assist_config_init(&c);
        fr_err err = {0};
        A = fr_assist_new(&c, &err);
        fr_assist_config_free(&c);
        if (!A) abort();
        fr_assist_media none = {0};
        fr_assist_set_media(A, &none);
    }
    char *json = NULL;
    int st = fr_assist_handle(A, (const char *)data, size, NULL, &json);
    if (st < 200 || st > 599 || !json) abort();
    cJSON *o = cJSON_Parse(json);
    if (!o) abort();
    cJSON_Delete(o);
    free(json);
    uint8_t *out = malloc(size / 4 * 3 + 3);
    size_t bad;
    long n = fr_assist_base64_decode((const char *)data, size, out, &bad);
    if (n > (long)(size / 4 * 3 + 3)) abort();
    free(out);
    char k[32];
    (void)fr_assist_json_depth((const char *)data, size, 64, k, sizeof k);
    return 0;
}

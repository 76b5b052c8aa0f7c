/* fuzz_schema.c — libFuzzer harness for the JSON Schema compiler and its matcher
 * (src/engine/schema.c, src/engine/grammar.c).
 *
 * The input is schema text. A refusal must carry FR_ERR_BAD_REQUEST, FR_ERR_UNSUPPORTED or
 * FR_ERR_TOO_LARGE and a non-empty one-line message. A schema that compiles is walked: bytes
 * are chosen among those the matcher allows (every byte value tried, the choice driven by the
 * input's hash) while the shortest completion still fits a budget of need + 48 bytes; the walk
 * must end complete (fr_gstate_can_finish) within it, need must never exceed what is left, and
 * the text must parse and validate against the schema (tests/schema_check.h, written apart from
 * the compiler). Bounds: the compiler's limits keep every input small in time and memory.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../schema_check.h"
#include "engine/grammar.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1;
    return 0;
}

static fr_gstate st[2], tmp;

/* a walk of at most budget bytes; returns its length (out) or -1 when it did not complete */
static int walk(const fr_grammar *g, uint64_t h, int budget, char *out) {
    fr_gstate_init(g, &st[0]);
    int cur = 0, n = 0;
    while (n < budget) {
        if (fr_gstate_terminal(g, &st[cur])) break;
        int allowed[256], k = 0;
        for (int c = 1; c < 256; c++)
            if (fr_gstate_feed(g, &st[cur], (uint8_t)c, &tmp) &&
                fr_gstate_need(g, &tmp) <= budget - n - 1)
                allowed[k++] = c;
        bool may_end = fr_gstate_can_finish(g, &st[cur]);
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        if (k == 0 || (may_end && (h >> 60) == 0)) break;
        int c = allowed[(h >> 33) % (uint64_t)k];
        fr_gstate_feed(g, &st[cur], (uint8_t)c, &st[cur ^ 1]);
        cur ^= 1;
        out[n++] = (char)c;
    }
    return fr_gstate_can_finish(g, &st[cur]) ? n : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fr_err err = {0};
    fr_grammar *g = fr_grammar_from_text((const char *)data, size, &err);
    if (!g) {
        if (!(err.code == FR_ERR_BAD_REQUEST || err.code == FR_ERR_UNSUPPORTED ||
              err.code == FR_ERR_TOO_LARGE) || !err.msg[0] || strchr(err.msg, '\n'))
            abort();
        return 0;
    }
    fr_gstate_init(g, &st[0]);
    int need = fr_gstate_need(g, &st[0]);
    if (need < 4096) {
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 1099511628211ull;
        int budget = need + 48;
        char *out = malloc((size_t)budget + 1);
        int n = walk(g, h, budget, out);
        if (n < 0) abort(); /* the budget always allows completing */
        cJSON *schema = cJSON_ParseWithLength((const char *)data, size);
        if (!schema || !sc_text_valid(out, (size_t)n, schema)) abort();
        cJSON_Delete(schema);
        free(out);
    }
    fr_grammar_free(g);
    return 0;
}

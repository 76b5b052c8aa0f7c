/* test_vl.c — generation with images (engine/generate.h fr_generate_mm_on).
 *
 * On the qwen2-tiny fixture given M-RoPE sections: a prompt with a block of image rows that
 * crosses the 512-token prefill chunk gives the decoder's own logits (one batch of the whole
 * prompt, then decode steps at q + delta) bit for bit, and the same greedy ids; the image rows and
 * the positions both change the result; bad multimodal input is refused with its code.
 */
#include "backend/cpu/decoder.h"
#include "engine/generate.h"
#include "model/mrope.h"
#include "t.h"

static fr_model *load_tiny(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/qwen2-tiny", t_fixtures());
    fr_err err = {0};
    fr_model *m = fr_model_load(path, &err);
    if (!m) fprintf(stderr, "  load %s: %s\n", path, err.msg);
    return m;
}

enum { N_TEXT0 = 50, GRID_H = 24, GRID_W = 80, N_IMG = (GRID_H / 2) * (GRID_W / 2), N_TEXT1 = 70,
       N = N_TEXT0 + N_IMG + N_TEXT1, STEPS = 8, IMG_ID = 4000 };

typedef struct vl_case {
    int32_t ids[N];
    int32_t rp[3 * N];
    int32_t delta;
    float *rows; /* (N_IMG, n_embd) */
} vl_case;

static bool make_case(const fr_model *m, vl_case *c) {
    const int32_t grid[3] = {1, GRID_H, GRID_W};
    for (int i = 0; i < N; i++)
        c->ids[i] = i >= N_TEXT0 && i < N_TEXT0 + N_IMG ? IMG_ID : (i * 37 + 11) % 3000;
    fr_err err = {0};
    if (fr_vl_rope_index(c->ids, N, IMG_ID, grid, 1, 2, c->rp, &c->delta, &err)) {
        fprintf(stderr, "  rope index: %s\n", err.msg);
        return false;
    }
    const int E = m->hp.n_embd;
    c->rows = malloc((size_t)N_IMG * E * sizeof(float));
    uint64_t s = 0x243f6a8885a308d3ull;
    for (int i = 0; i < N_IMG * E; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        c->rows[i] = (float)((s >> 40) * (1.0 / 8388608.0)) - 1.0f;
    }
    return true;
}

/* The decoder alone: the whole prompt in one batch, then greedy decode steps. */
static bool decoder_run(const fr_model *m, const vl_case *c, float *last, int32_t *greedy) {
    const int E = m->hp.n_embd, V = m->hp.n_vocab;
    fr_err err = {0};
    fr_decoder *d = fr_decoder_new(m, N, N + STEPS, &err);
    fr_kv_pool *kv = fr_kv_pool_new(&m->hp, (N + STEPS + 15) / 16, 16);
    float *embd = calloc((size_t)N * E, sizeof(float)), *lg = malloc((size_t)V * 4);
    uint8_t *use = calloc(N, 1), *want = calloc(N, 1);
    int32_t *pos = malloc(N * 4);
    fr_seq **seqs = malloc(N * sizeof *seqs);
    fr_seq s = {0};
    bool ok = d && kv && fr_seq_reserve(&s, kv, N + STEPS) == 0;
    for (int i = 0, k = 0; ok && i < N; i++) {
        pos[i] = i;
        seqs[i] = &s;
        if ((use[i] = c->ids[i] == IMG_ID))
            memcpy(embd + (size_t)i * E, c->rows + (size_t)k++ * E, (size_t)E * 4);
    }
    want[N - 1] = 1;
    fr_batch b = {.n_tokens = N, .tokens = c->ids, .pos = pos, .seqs = seqs, .logits = want,
                  .embd = embd, .embd_use = use, .rope_pos = c->rp};
    ok = ok && fr_decoder_forward(d, kv, &b, lg, &err) == 0;
    if (ok) memcpy(last, lg, (size_t)V * 4);
    for (int k = 0; ok && k < STEPS; k++) {
        int best = 0;
        for (int v = 1; v < V; v++)
            if (lg[v] > lg[best]) best = v;
        greedy[k] = best;
        int32_t tok = best, p = N + k, r3[3] = {p + c->delta, p + c->delta, p + c->delta};
        fr_seq *sp = &s;
        uint8_t w = 1;
        fr_batch one = {.n_tokens = 1, .tokens = &tok, .pos = &p, .seqs = &sp, .logits = &w,
                        .rope_pos = r3};
        ok = fr_decoder_forward(d, kv, &one, lg, &err) == 0;
    }
    if (!ok) fprintf(stderr, "  decoder: %s\n", err.msg);
    if (kv) fr_seq_release(&s, kv);
    fr_kv_pool_free(kv);
    fr_decoder_free(d);
    free(embd), free(lg), free(use), free(want), free(pos), free(seqs);
    return ok;
}

static int gen(const fr_model *m, const vl_case *c, const fr_generate_mm *mm,
               fr_generate_result *r, fr_err *err) {
    fr_sampling sp = fr_sampling_default();
    sp.temperature = 0;
    fr_gen_params gp = fr_gen_params_default();
    gp.max_tokens = STEPS;
    gp.ignore_eos = true;
    return fr_generate_mm_on(m, NULL, c->ids, N, mm, &sp, &gp, NULL, NULL, r, err);
}

TEST(generate_with_image_rows_equals_the_decoder) {
    fr_model *m = load_tiny();
    CHECK(m != NULL);
    if (!m) return;
    m->hp.mrope_section[0] = 2, m->hp.mrope_section[1] = 3, m->hp.mrope_section[2] = 3;
    m->hp.n_ctx_train = 2048; /* room for a prompt over one 512-token prefill chunk */
    const int V = m->hp.n_vocab;
    vl_case c;
    CHECK(make_case(m, &c));
    CHECK_EQ_INT(c.delta, (N_TEXT0 + GRID_W / 2 + N_TEXT1) - N);
    float *want = malloc((size_t)V * 4), *got = malloc((size_t)V * 4);
    int32_t greedy[STEPS];
    CHECK(decoder_run(m, &c, want, greedy));
    fr_generate_mm mm = {.embd = c.rows, .n_embd_rows = N_IMG, .image_token_id = IMG_ID,
                         .rope_pos = c.rp, .last_logits = got};
    fr_generate_result r;
    fr_err err = {0};
    CHECK(gen(m, &c, &mm, &r, &err) == 0);
    CHECK(memcmp(got, want, (size_t)V * 4) == 0);
    CHECK_EQ_INT(r.n_ids, STEPS);
    CHECK(r.n_ids == STEPS && memcmp(r.ids, greedy, sizeof greedy) == 0);
    fr_generate_result_free(&r);
    /* without the rows, or without the positions, the logits differ */
    fr_generate_mm no_rows = mm, no_pos = mm;
    no_rows.embd = NULL;
    no_rows.n_embd_rows = 0;
    no_pos.rope_pos = NULL;
    CHECK(gen(m, &c, &no_rows, &r, &err) == 0);
    CHECK(memcmp(got, want, (size_t)V * 4) != 0);
    fr_generate_result_free(&r);
    CHECK(gen(m, &c, &no_pos, &r, &err) == 0);
    CHECK(memcmp(got, want, (size_t)V * 4) != 0);
    fr_generate_result_free(&r);
    free(want), free(got), free(c.rows);
    fr_model_free(m);
}

TEST(generate_bad_multimodal_input) {
    fr_model *m = load_tiny();
    CHECK(m != NULL);
    if (!m) return;
    m->hp.n_ctx_train = 2048;
    vl_case c;
    CHECK(make_case(m, &c));
    fr_generate_result r;
    fr_err err = {0};
    /* M-RoPE positions for a model without sections */
    fr_generate_mm mm = {.rope_pos = c.rp};
    CHECK(gen(m, &c, &mm, &r, &err) == -1);
    CHECK(err.code == FR_ERR_BAD_REQUEST);
    /* one row short */
    m->hp.mrope_section[0] = 2, m->hp.mrope_section[1] = 3, m->hp.mrope_section[2] = 3;
    mm = (fr_generate_mm){.embd = c.rows, .n_embd_rows = N_IMG - 1, .image_token_id = IMG_ID,
                          .rope_pos = c.rp};
    err.code = FR_ERR_INTERNAL;
    CHECK(gen(m, &c, &mm, &r, &err) == -1);
    CHECK(err.code == FR_ERR_BAD_REQUEST);
    CHECK(r.ids == NULL && r.n_ids == 0);
    free(c.rows);
    fr_model_free(m);
}

int main(void) { return t_main(); }

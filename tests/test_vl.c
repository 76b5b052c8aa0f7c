/* test_vl.c — generation with images (engine/generate.h fr_generate_mm_on, frugal_generate_vl).
 *
 * Against HF transformers 5.17 (tests/fixtures/ref/qwen25vl-tiny and qwen2vl-tiny, every case of
 * ref.json: one image, two images of different sizes, text only, the two-region image): our
 * get_rope_index gives HF's position_ids and rope_delta; frugal_generate_vl fed HF's pixel values
 * gives HF's prompt ids (template + pads) and grids, last logits within 1e-4 relative L2 and HF's
 * 12 greedy ids. A missing fixture file fails.
 *
 * On the qwen2-tiny fixture given M-RoPE sections: a prompt with a block of image rows that
 * crosses the 512-token prefill chunk gives the decoder's own logits (one batch of the whole
 * prompt, then decode steps at q + delta) bit for bit, and the same greedy ids; the image rows and
 * the positions both change the result; bad multimodal input is refused with its code.
 */
#include "backend/cpu/decoder.h"
#include "base/npy.h"
#include "engine/generate.h"
#include "frugal.h"
#include "model/mrope.h"
#include "t.h"

#include <cjson/cJSON.h>

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

/* ------------------------------------------------------------------ HF fixtures */
static cJSON *load_ref(const char *model) {
    char path[512];
    snprintf(path, sizeof path, "%s/ref/%s/ref.json", t_fixtures(), model);
    fr_err err = {0};
    size_t len = 0;
    char *txt = fr_read_file(path, 1u << 24, &len, &err);
    cJSON *root = txt ? cJSON_ParseWithLength(txt, len) : NULL;
    free(txt);
    if (!root) fprintf(stderr, "  %s: %s\n", path, txt ? "not JSON" : err.msg);
    return root;
}

/* The JSON int array a into out (up to max); returns the count, -1 when not an int array. */
static int ints(const cJSON *a, int32_t *out, int max) {
    if (!cJSON_IsArray(a)) return -1;
    int n = 0;
    for (const cJSON *e = a->child; e; e = e->next) {
        if (!cJSON_IsNumber(e) || n == max) return -1;
        out[n++] = (int32_t)e->valueint;
    }
    return n;
}

enum { MAX_IDS = 512, MAX_IMGS = 8 };
typedef struct hf_case {
    const char *name;
    int32_t ids[MAX_IDS], pos[3 * MAX_IDS], grid[3 * MAX_IMGS], greedy[64];
    int n_ids, n_images, n_greedy, delta;
    const char *pixel_values, *last_logits;
} hf_case;

static bool read_case(const cJSON *c, hf_case *h) {
    memset(h, 0, sizeof *h);
    h->name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "name"));
    h->n_ids = ints(cJSON_GetObjectItemCaseSensitive(c, "input_ids"), h->ids, MAX_IDS);
    h->n_greedy = ints(cJSON_GetObjectItemCaseSensitive(c, "greedy_ids"), h->greedy, 64);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(c, "image_grid_thw"), *e;
    cJSON_ArrayForEach(e, g) {
        if (h->n_images == MAX_IMGS || ints(e, h->grid + 3 * h->n_images, 3) != 3) return false;
        h->n_images++;
    }
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(c, "position_ids");
    if (cJSON_GetArraySize(p) != 3 || h->n_ids < 1) return false;
    for (int r = 0; r < 3; r++)
        if (ints(cJSON_GetArrayItem(p, r), h->pos + r * h->n_ids, h->n_ids) != h->n_ids) return false;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(c, "rope_delta");
    h->delta = d ? d->valueint : 12345;
    h->pixel_values = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "pixel_values"));
    h->last_logits = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "last_logits"));
    return h->name && h->n_greedy >= 8 && d && h->last_logits &&
           (h->n_images == 0 || h->pixel_values);
}

static void check_positions(const char *model) {
    cJSON *root = load_ref(model);
    CHECK(root != NULL);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *c;
    int n = 0;
    hf_case *h = malloc(sizeof *h);
    int32_t *pos = malloc(3 * MAX_IDS * sizeof(int32_t));
    cJSON_ArrayForEach(c, cases) {
        CHECK(read_case(c, h));
        int32_t delta = 0;
        fr_err err = {0};
        CHECK(fr_vl_rope_index(h->ids, (size_t)h->n_ids, 518, h->grid, h->n_images, 2, pos,
                               &delta, &err) == 0);
        CHECK(memcmp(pos, h->pos, 3 * (size_t)h->n_ids * sizeof(int32_t)) == 0);
        CHECK_EQ_INT(delta, h->delta);
        n++;
    }
    CHECK(n >= 2);
    free(h), free(pos);
    cJSON_Delete(root);
}

TEST(hf_position_ids_qwen25vl) { check_positions("qwen25vl-tiny"); }
TEST(hf_position_ids_qwen2vl) { check_positions("qwen2vl-tiny"); }

static bool npy(const char *model, const char *file, fr_npy *a) {
    char path[512];
    snprintf(path, sizeof path, "%s/ref/%s/%s", t_fixtures(), model, file);
    fr_err err = {0};
    if (fr_npy_load_f32(path, a, &err) == 0) return true;
    fprintf(stderr, "  %s\n", err.msg);
    return false;
}

/* Every case through the public API with HF's pixel values. */
static void check_generate(const char *model) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", t_fixtures(), model);
    frugal_error e;
    frugal_model *fm = frugal_model_load(dir, frugal_model_default_params(), &e);
    if (!fm) fprintf(stderr, "  %s: %s\n", dir, e.message);
    CHECK(fm != NULL);
    frugal_context *ctx = fm ? frugal_context_new(fm, frugal_context_default_params(), &e) : NULL;
    cJSON *root = load_ref(model);
    CHECK(root != NULL && ctx != NULL);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *c;
    hf_case *h = malloc(sizeof *h);
    int n = 0;
    double worst = 0;
    if (!ctx) cases = NULL;
    cJSON_ArrayForEach(c, cases) {
        CHECK(read_case(c, h));
        const char *prompt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "prompt"));
        fr_npy pv = {0}, ll = {0};
        CHECK(!h->n_images || npy(model, h->pixel_values, &pv));
        CHECK(npy(model, h->last_logits, &ll));
        frugal_image ims[MAX_IMGS];
        memset(ims, 0, sizeof ims);
        int64_t row = 0;
        for (int i = 0; i < h->n_images && pv.data; i++) {
            ims[i].pixel_values = pv.data + row * pv.shape[1];
            ims[i].n_patches = (int64_t)h->grid[3 * i] * h->grid[3 * i + 1] * h->grid[3 * i + 2];
            ims[i].patch_dim = pv.shape[1];
            memcpy(ims[i].grid_thw, h->grid + 3 * i, 3 * sizeof(int));
            row += ims[i].n_patches;
        }
        CHECK(!h->n_images || row == pv.shape[0]);
        frugal_vl_params vp = frugal_vl_default_params();
        vp.images = ims;
        vp.n_images = h->n_images;
        vp.want_last_logits = 1;
        frugal_generate_params gp = frugal_generate_default_params();
        gp.max_tokens = h->n_greedy;
        gp.temperature = 0;
        gp.ignore_eos = 1;
        frugal_vl_result r;
        frugal_status st = frugal_generate_vl(ctx, prompt, &vp, &gp, &r, &e);
        if (st != FRUGAL_OK) fprintf(stderr, "  %s: %s\n", h->name, e.message);
        CHECK(st == FRUGAL_OK);
        if (st == FRUGAL_OK) {
            CHECK_EQ_INT(r.n_prompt_ids, h->n_ids);
            CHECK(r.n_prompt_ids == (size_t)h->n_ids &&
                  memcmp(r.prompt_ids, h->ids, (size_t)h->n_ids * 4) == 0);
            CHECK_EQ_INT(r.n_images, h->n_images);
            CHECK(memcmp(r.image_grid_thw, h->grid, 3 * (size_t)h->n_images * 4) == 0);
            CHECK(r.image_tokens == r.image_tokens_kept);
            double d = ll.n == r.n_vocab ? t_rel_l2(r.last_logits, ll.data, ll.n) : INFINITY;
            if (!(d <= 1e-4)) fprintf(stderr, "  %s: last logits rel L2 %g\n", h->name, d);
            CHECK(d <= 1e-4);
            worst = fmax(worst, d);
            CHECK_EQ_INT(r.gen.n_ids, h->n_greedy);
            CHECK(r.gen.n_ids == h->n_greedy &&
                  memcmp(r.gen.ids, h->greedy, (size_t)h->n_greedy * 4) == 0);
            frugal_vl_result_free(&r);
        }
        fr_npy_free(&pv);
        fr_npy_free(&ll);
        n++;
    }
    CHECK(n >= 2);
    fprintf(stderr, "  %s: %d cases, worst last-logits rel L2 %.3g\n", model, n, worst);
    free(h);
    cJSON_Delete(root);
    frugal_context_free(ctx);
    frugal_model_free(fm);
}

TEST(hf_generate_qwen25vl) { check_generate("qwen25vl-tiny"); }
TEST(hf_generate_qwen2vl) { check_generate("qwen2vl-tiny"); }

/* Pruning through the API: the counts asked for, and the pruned prompt is exactly HF's prompt
 * without the dropped image tokens, each kept token at HF's position (the decoder run on that
 * prompt, with the kept features, gives the API's logits and ids bit for bit). */
static void check_pruned(const char *case_name, float keep_ratio, int budget, int64_t want_kept) {
    const char *model = "qwen25vl-tiny";
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", t_fixtures(), model);
    frugal_error e;
    frugal_model *fm = frugal_model_load(dir, frugal_model_default_params(), &e);
    fr_err err = {0};
    fr_model *m = fr_model_load(dir, &err);
    cJSON *root = load_ref(model);
    CHECK(fm && m && root);
    if (!fm || !m || !root) return;
    frugal_context *ctx = frugal_context_new(fm, frugal_context_default_params(), &e);
    const cJSON *c;
    hf_case *h = malloc(sizeof *h);
    bool found = false;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
        if (!read_case(c, h) || strcmp(h->name, case_name)) continue;
        found = true;
        const char *prompt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "prompt"));
        fr_npy pv = {0};
        CHECK(npy(model, h->pixel_values, &pv));
        frugal_image ims[MAX_IMGS];
        memset(ims, 0, sizeof ims);
        int64_t row = 0, n_tok = 0;
        for (int i = 0; i < h->n_images && pv.data; i++) {
            ims[i].pixel_values = pv.data + row * pv.shape[1];
            ims[i].n_patches = (int64_t)h->grid[3 * i] * h->grid[3 * i + 1] * h->grid[3 * i + 2];
            ims[i].patch_dim = pv.shape[1];
            memcpy(ims[i].grid_thw, h->grid + 3 * i, 3 * sizeof(int));
            row += ims[i].n_patches;
            n_tok += ims[i].n_patches / 4;
        }
        frugal_vl_params vp = frugal_vl_default_params();
        vp.images = ims;
        vp.n_images = h->n_images;
        vp.keep_ratio = keep_ratio;
        vp.max_image_tokens = budget;
        vp.want_last_logits = vp.want_image_features = 1;
        frugal_generate_params gp = frugal_generate_default_params();
        gp.max_tokens = 6;
        gp.temperature = 0;
        gp.ignore_eos = 1;
        frugal_vl_result r;
        CHECK(frugal_generate_vl(ctx, prompt, &vp, &gp, &r, &e) == FRUGAL_OK);
        CHECK_EQ_INT(r.image_tokens, n_tok);
        CHECK_EQ_INT(r.image_tokens_kept, want_kept);
        CHECK_EQ_INT(r.n_prompt_ids, h->n_ids - (n_tok - want_kept));
        /* HF's prompt less the dropped image tokens, at HF's positions, with the kept features */
        const int E = m->hp.n_embd;
        int32_t *ids = malloc((size_t)h->n_ids * 4), *rp = malloc(3 * (size_t)h->n_ids * 4);
        float *rows = malloc((size_t)want_kept * E * 4), *last = malloc((size_t)r.n_vocab * 4);
        size_t n = 0;
        int64_t img = 0, k = 0;
        for (int t = 0; t < h->n_ids; t++) {
            if (h->ids[t] == 518) {
                bool kept = k < r.image_tokens_kept && r.kept_index[k] == img;
                if (kept) memcpy(rows + k * E, r.image_features + img * E, (size_t)E * 4), k++;
                img++;
                if (!kept) continue;
            }
            ids[n++] = h->ids[t];
        }
        CHECK_EQ_INT(k, want_kept);
        { /* the same rows of HF's positions */
            size_t o = 0;
            int64_t im2 = 0, k2 = 0;
            for (int t = 0; t < h->n_ids; t++) {
                if (h->ids[t] == 518) {
                    bool kept = k2 < r.image_tokens_kept && r.kept_index[k2] == im2;
                    im2++;
                    if (!kept) continue;
                    k2++;
                }
                for (int q = 0; q < 3; q++) rp[q * n + o] = h->pos[q * h->n_ids + t];
                o++;
            }
        }
        CHECK(n == r.n_prompt_ids && memcmp(ids, r.prompt_ids, n * 4) == 0);
        fr_sampling sp = fr_sampling_default();
        sp.temperature = 0;
        fr_gen_params g2 = fr_gen_params_default();
        g2.max_tokens = 6;
        g2.ignore_eos = true;
        fr_generate_mm mm = {.embd = rows, .n_embd_rows = want_kept, .image_token_id = 518,
                             .rope_pos = rp, .last_logits = last};
        fr_generate_result gr;
        CHECK(fr_generate_mm_on(m, NULL, ids, n, &mm, &sp, &g2, NULL, NULL, &gr, &err) == 0);
        CHECK(memcmp(last, r.last_logits, (size_t)r.n_vocab * 4) == 0);
        CHECK(gr.n_ids == r.gen.n_ids && memcmp(gr.ids, r.gen.ids, (size_t)gr.n_ids * 4) == 0);
        fr_generate_result_free(&gr);
        free(ids), free(rp), free(rows), free(last);
        frugal_vl_result_free(&r);
        fr_npy_free(&pv);
    }
    CHECK(found);
    free(h);
    cJSON_Delete(root);
    frugal_context_free(ctx);
    frugal_model_free(fm);
    fr_model_free(m);
}

TEST(pruned_keep_ratio_keeps_hf_positions) { check_pruned("one_image", 0.5f, 0, 6); }
TEST(pruned_budget_shared_by_two_images) { check_pruned("two_images", 1.0f, 5, 5); }

/* The API's refusals, with their statuses. */
TEST(vl_api_refusals) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/qwen25vl-tiny", t_fixtures());
    frugal_error e;
    frugal_model *fm = frugal_model_load(dir, frugal_model_default_params(), &e);
    snprintf(dir, sizeof dir, "%s/qwen2-tiny", t_fixtures());
    frugal_model *text = frugal_model_load(dir, frugal_model_default_params(), &e);
    CHECK(fm && text);
    if (!fm || !text) return;
    frugal_context *ctx = frugal_context_new(fm, frugal_context_default_params(), &e);
    frugal_context *tctx = frugal_context_new(text, frugal_context_default_params(), &e);
    float px[4 * 1176] = {0};
    frugal_image im = {.pixel_values = px, .n_patches = 4, .patch_dim = 1176,
                       .grid_thw = {1, 2, 2}};
    frugal_vl_params vp = frugal_vl_default_params();
    vp.images = &im;
    vp.n_images = 1;
    frugal_generate_params gp = frugal_generate_default_params();
    gp.max_tokens = 2;
    frugal_vl_result r;
    CHECK(frugal_generate_vl(ctx, "hi", &vp, &gp, &r, &e) == FRUGAL_OK);
    CHECK_EQ_INT(r.image_tokens, 1);
    frugal_vl_result_free(&r);
    /* a text model */
    CHECK(frugal_generate_vl(tctx, "hi", &vp, &gp, &r, &e) == FRUGAL_ERR_UNSUPPORTED);
    /* rows that disagree with the grid, a grid not divisible by the merge, a wrong patch size */
    im.n_patches = 3;
    CHECK(frugal_generate_vl(ctx, "hi", &vp, &gp, &r, &e) == FRUGAL_ERR_INVALID_ARGUMENT);
    im.n_patches = 4, im.grid_thw[1] = 1, im.grid_thw[2] = 4;
    CHECK(frugal_generate_vl(ctx, "hi", &vp, &gp, &r, &e) == FRUGAL_ERR_INVALID_ARGUMENT);
    im.grid_thw[1] = 2, im.grid_thw[2] = 2, im.patch_dim = 588;
    CHECK(frugal_generate_vl(ctx, "hi", &vp, &gp, &r, &e) == FRUGAL_ERR_INVALID_ARGUMENT);
    im.patch_dim = 1176;
    /* too many patches */
    im.grid_thw[1] = im.grid_thw[2] = 2048, im.n_patches = 2048 * 2048;
    CHECK(frugal_generate_vl(ctx, "hi", &vp, &gp, &r, &e) == FRUGAL_ERR_TOO_LARGE);
    im.grid_thw[1] = im.grid_thw[2] = 2, im.n_patches = 4;
    /* a bad ratio */
    vp.keep_ratio = 1.5f;
    CHECK(frugal_generate_vl(ctx, "hi", &vp, &gp, &r, &e) == FRUGAL_ERR_INVALID_ARGUMENT);
    vp.keep_ratio = 1;
    vp.n_images = 65;
    CHECK(frugal_generate_vl(ctx, "hi", &vp, &gp, &r, &e) == FRUGAL_ERR_INVALID_ARGUMENT);
    CHECK(r.prompt_ids == NULL && r.gen.ids == NULL);
    frugal_context_free(ctx);
    frugal_context_free(tctx);
    frugal_model_free(fm);
    frugal_model_free(text);
}

int main(void) { return t_main(); }

/* test_vision_hf.c — the CPU vision tower against HF transformers 5.17 on the tiny random
 * fixtures (tests/fixtures/qwen25vl-tiny: nested config, F32 shards, window attention;
 * tests/fixtures/qwen2vl-tiny: flat config, BF16): fed HF's pixel_values, the merger's output
 * (image_embeds, HF's pooler_output) must be within 1e-4 relative L2, for the fast path and the
 * reference, in every case of tests/fixtures/ref/<model>/ref.json that has images. A missing
 * fixture file is a failure. */
#include "t.h"

#include <cjson/cJSON.h>

#include "backend/cpu/vision.h"
#include "base/npy.h"
#include "model/model.h"
#include "model/vision.h"

static bool npy(const char *dir, const char *file, fr_npy *a) {
    char p[700];
    snprintf(p, sizeof p, "%s/ref/%s/%s", t_fixtures(), dir, file);
    fr_err e = {0};
    if (fr_npy_load_f32(p, a, &e) != 0) {
        fprintf(stderr, "  %s\n", e.msg);
        return false;
    }
    return true;
}

/* Every image case of the model's ref.json; returns how many were compared. */
static int compare_model(const char *name, fr_vision_kind kind) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", t_fixtures(), name);
    fr_err e = {0};
    fr_model *m = fr_model_load(p, &e);
    if (!m) fprintf(stderr, "  load %s: %s\n", p, e.msg);
    CHECK(m && m->vision);
    if (!m || !m->vision) {
        fr_model_free(m);
        return 0;
    }
    CHECK_EQ_INT(m->vision->hp.kind, kind);
    snprintf(p, sizeof p, "%s/ref/%s/ref.json", t_fixtures(), name);
    size_t len;
    char *txt = fr_read_file(p, 1u << 24, &len, &e);
    if (!txt) fprintf(stderr, "  %s\n", e.msg);
    CHECK(txt != NULL);
    cJSON *root = txt ? cJSON_ParseWithLength(txt, len) : NULL;
    free(txt);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    CHECK(cJSON_IsArray(cases));
    int done = 0;
    fr_pool *pool = fr_pool_new(2);
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next) {
        const cJSON *pv = cJSON_GetObjectItemCaseSensitive(c, "pixel_values");
        const cJSON *ie = cJSON_GetObjectItemCaseSensitive(c, "image_embeds");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(c, "image_grid_thw");
        const cJSON *cn = cJSON_GetObjectItemCaseSensitive(c, "name");
        if (!cJSON_IsString(pv) && !cJSON_IsString(ie)) continue; /* text only */
        CHECK(cJSON_IsString(pv) && cJSON_IsString(ie) && cJSON_IsArray(g));
        if (!cJSON_IsString(pv) || !cJSON_IsString(ie) || !cJSON_IsArray(g)) continue;
        int n_img = cJSON_GetArraySize(g);
        int32_t grid[3 * 8];
        CHECK(n_img >= 1 && n_img <= 8);
        if (n_img < 1 || n_img > 8) continue;
        for (int i = 0; i < n_img; i++)
            for (int k = 0; k < 3; k++)
                grid[3 * i + k] = cJSON_GetArrayItem(cJSON_GetArrayItem(g, i), k)->valueint;
        fr_npy px, ref;
        bool ok1 = npy(name, pv->valuestring, &px), ok2 = npy(name, ie->valuestring, &ref);
        CHECK(ok1 && ok2);
        if (ok1 && ok2) {
            const fr_vision_hparams *hp = &m->vision->hp;
            int64_t nt = fr_vision_n_tokens(hp, grid, n_img);
            CHECK(px.n_dims == 2 && px.shape[1] == fr_vision_patch_dim(hp));
            CHECK(ref.n_dims == 2 && ref.shape[0] == nt && ref.shape[1] == hp->out_hidden);
            if (px.n_dims == 2 && ref.n_dims == 2 && ref.shape[0] == nt &&
                ref.shape[1] == hp->out_hidden && px.shape[1] == fr_vision_patch_dim(hp)) {
                float *fast = fr_xcalloc((size_t)ref.n, sizeof(float));
                float *slow = fr_xcalloc((size_t)ref.n, sizeof(float));
                CHECK_EQ_INT(fr_vision_forward(m, pool, px.data, px.shape[0], grid, n_img, fast, &e), 0);
                CHECK_EQ_INT(fr_vision_forward_ref(m, px.data, px.shape[0], grid, n_img, slow, &e), 0);
                double rf = t_rel_l2(fast, ref.data, ref.n), rs = t_rel_l2(slow, ref.data, ref.n);
                fprintf(stderr, "  %s %s: %d image(s), %lld tokens: rel L2 fast %.2e, reference "
                        "%.2e\n", name, cJSON_IsString(cn) ? cn->valuestring : "?", n_img,
                        (long long)nt, rf, rs);
                CHECK(rf < 1e-4);
                CHECK(rs < 1e-4);
                free(fast), free(slow);
                done++;
            }
        }
        if (ok1) fr_npy_free(&px);
        if (ok2) fr_npy_free(&ref);
    }
    fr_pool_free(pool);
    cJSON_Delete(root);
    fr_model_free(m);
    return done;
}

TEST(qwen25vl_image_embeds_equal_hf) {
    /* one image, two images of different sizes, the two-region image */
    CHECK(compare_model("qwen25vl-tiny", FR_VISION_QWEN25VL) >= 3);
}

TEST(qwen2vl_image_embeds_equal_hf) {
    CHECK(compare_model("qwen2vl-tiny", FR_VISION_QWEN2VL) >= 1);
}

TEST(fixture_hparams_from_the_configs) {
    char p[600];
    snprintf(p, sizeof p, "%s/qwen25vl-tiny", t_fixtures());
    fr_err e = {0};
    fr_model *m = fr_model_load(p, &e);
    CHECK(m && m->vision);
    if (m && m->vision) {
        CHECK_EQ_INT(m->hp.image_token_id, 518);
        CHECK_EQ_INT(m->hp.vision_start_id, 515);
        CHECK_EQ_INT(m->hp.vision_end_id, 516);
        CHECK_EQ_INT(m->hp.mrope_section[0], 2);
        CHECK_EQ_INT(m->hp.mrope_section[1], 3);
        CHECK_EQ_INT(m->hp.mrope_section[2], 3);
        const fr_vision_hparams *v = &m->vision->hp;
        CHECK_EQ_INT(v->depth, 4);
        CHECK(!v->fullatt[0] && v->fullatt[1] && !v->fullatt[2] && v->fullatt[3]);
        CHECK_EQ_INT(v->window_size, 56);
        CHECK_EQ_INT(v->tokens_per_second, 2);
    }
    fr_model_free(m);
    snprintf(p, sizeof p, "%s/qwen2vl-tiny", t_fixtures());
    m = fr_model_load(p, &e);
    CHECK(m && m->vision);
    if (m && m->vision) {
        CHECK_EQ_INT(m->hp.image_token_id, 518);
        CHECK(m->hp.tied_embeddings);
        CHECK_EQ_INT(m->vision->hp.n_ff, 64); /* embed_dim 32 x mlp_ratio 2 */
        CHECK_EQ_INT(m->vision->hp.out_hidden, 64);
    }
    fr_model_free(m);
}

int main(void) {
    fr_log_level = FR_LOG_WARN;
    return t_main();
}

/* test_engine_vl.c — the serving engine with vision-language prompts on the tiny random
 * Qwen2.5-VL fixture (tests/fixtures/qwen25vl-tiny) against HF transformers 5.17
 * (tests/fixtures/ref/qwen25vl-tiny/ref.json): HF's pixel values through the CPU tower give the
 * image rows, HF's input ids (pads expanded) and fr_vl_rope_index give the positions, and the
 * engine's greedy ids must equal HF's greedy continuation, for every case (one image, two
 * images, text only), with all cases in flight at once in small prefill chunks (chunks that
 * split an image run, batches mixing text and image requests, decode at position + delta).
 * Image input that does not fit is refused (FR_ADMIT_INVALID); a text-only model refuses it.
 * A missing fixture file is a failure. */
#include "t.h"

#include <cjson/cJSON.h>

#include "backend/cpu/vision.h"
#include "base/npy.h"
#include "engine/engine.h"
#include "model/model.h"
#include "model/mrope.h"
#include "model/vision.h"

#define MAX_CASES 8

typedef struct vl_case {
    char name[32];
    int32_t *ids;    /* (n) HF's input ids, pads expanded */
    int n;
    int32_t *rpos;   /* (3, n) */
    float *feat;     /* (n_rows, n_embd) the tower's output for HF's pixel values, or NULL */
    int n_rows;
    int32_t want[64]; /* HF's greedy ids */
    int n_want;
} vl_case;

static cJSON *load_ref(void) {
    char p[700];
    snprintf(p, sizeof p, "%s/ref/qwen25vl-tiny/ref.json", t_fixtures());
    fr_err e = {0};
    size_t len;
    char *txt = fr_read_file(p, 1u << 24, &len, &e);
    if (!txt) fprintf(stderr, "  %s\n", e.msg);
    cJSON *root = txt ? cJSON_ParseWithLength(txt, len) : NULL;
    free(txt);
    return root;
}

static int ints(const cJSON *a, int32_t *out, int cap) {
    int n = 0;
    for (const cJSON *x = a ? a->child : NULL; x && n < cap; x = x->next) out[n++] = x->valueint;
    return n;
}

/* One ref.json case made ready for the engine; false when something is missing. */
static bool prepare(const fr_model *m, const cJSON *c, vl_case *vc) {
    memset(vc, 0, sizeof *vc);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "input_ids");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(c, "image_grid_thw");
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(c, "greedy_ids");
    const cJSON *pv = cJSON_GetObjectItemCaseSensitive(c, "pixel_values");
    if (!cJSON_IsString(name) || !cJSON_IsArray(ids) || !cJSON_IsArray(g) || !cJSON_IsArray(gr))
        return false;
    snprintf(vc->name, sizeof vc->name, "%s", name->valuestring);
    vc->n = cJSON_GetArraySize(ids);
    vc->ids = fr_xmalloc(sizeof(int32_t) * (size_t)vc->n);
    ints(ids, vc->ids, vc->n);
    vc->n_want = ints(gr, vc->want, 64);
    int n_img = cJSON_GetArraySize(g);
    int32_t grid[3 * 8];
    if (n_img > 8) return false;
    for (int i = 0; i < n_img; i++) ints(cJSON_GetArrayItem(g, i), grid + 3 * i, 3);
    vc->rpos = fr_xmalloc(sizeof(int32_t) * 3 * (size_t)vc->n);
    int32_t delta = 0;
    fr_err e = {0};
    if (fr_vl_rope_index(vc->ids, (size_t)vc->n, m->hp.image_token_id, grid, n_img,
                         m->vision->hp.merge, vc->rpos, &delta, &e)) {
        fprintf(stderr, "  %s: %s\n", vc->name, e.msg);
        return false;
    }
    if (!n_img) return true;
    if (!cJSON_IsString(pv)) return false;
    char p[700];
    snprintf(p, sizeof p, "%s/ref/qwen25vl-tiny/%s", t_fixtures(), pv->valuestring);
    fr_npy px;
    if (fr_npy_load_f32(p, &px, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        return false;
    }
    int64_t nt = fr_vision_n_tokens(&m->vision->hp, grid, n_img);
    vc->n_rows = (int)nt;
    vc->feat = fr_xmalloc(sizeof(float) * (size_t)nt * (size_t)m->hp.n_embd);
    int rc = fr_vision_forward(m, NULL, px.data, px.shape[0], grid, n_img, vc->feat, &e);
    if (rc) fprintf(stderr, "  %s: %s\n", vc->name, e.msg);
    fr_npy_free(&px);
    return rc == 0;
}

static void case_free(vl_case *vc) {
    free(vc->ids);
    free(vc->rpos);
    free(vc->feat);
}

static fr_req_params params(const fr_model *m, const vl_case *vc) {
    fr_req_params p;
    memset(&p, 0, sizeof p);
    p.prompt = vc->ids;
    p.n_prompt = vc->n;
    p.gen = fr_gen_params_default();
    p.gen.max_tokens = vc->n_want;
    p.gen.ignore_eos = true;
    p.sampling = fr_sampling_default();
    p.sampling.temperature = 0;
    p.tier = FR_TIER_P1;
    p.img_embd = vc->feat;
    p.n_img_rows = vc->n_rows;
    p.image_token_id = m->hp.image_token_id;
    p.rope_pos = vc->rpos;
    return p;
}

static fr_model *load_vl(void) {
    char p[700];
    snprintf(p, sizeof p, "%s/qwen25vl-tiny", t_fixtures());
    fr_err e = {0};
    fr_model *m = fr_model_load(p, &e);
    if (!m) fprintf(stderr, "  load %s: %s\n", p, e.msg);
    return m;
}

TEST(engine_vl_greedy_equals_hf_all_cases_at_once) {
    fr_model *m = load_vl();
    CHECK(m && m->vision);
    if (!m || !m->vision) {
        fr_model_free(m);
        return;
    }
    cJSON *root = load_ref();
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    CHECK(cJSON_IsArray(cases));
    vl_case vc[MAX_CASES];
    int n_cases = 0, n_images = 0, n_text = 0;
    for (const cJSON *c = cases ? cases->child : NULL; c && n_cases < MAX_CASES; c = c->next) {
        bool ok = prepare(m, c, &vc[n_cases]);
        CHECK(ok);
        if (!ok) {
            case_free(&vc[n_cases]);
            continue;
        }
        n_images += vc[n_cases].feat != NULL;
        n_text += vc[n_cases].feat == NULL;
        n_cases++;
    }
    CHECK(n_images >= 2 && n_text >= 1); /* one image, two images, ... and text only */
    fr_engine_config cfg = fr_engine_config_default();
    cfg.prefill_chunk = 7; /* splits every image run across steps */
    cfg.step_tokens = 24;  /* several requests' chunks and decodes in one batch */
    cfg.kv_bytes = 8u << 20;
    cfg.warmup = false;
    fr_err e = {0};
    fr_engine *eng = fr_engine_new(m, &cfg, &e);
    if (!eng) fprintf(stderr, "  %s\n", e.msg);
    CHECK(eng != NULL);
    CHECK(eng && fr_engine_takes_images(eng));
    fr_req *rs[MAX_CASES] = {0};
    for (int i = 0; eng && i < n_cases; i++) {
        fr_req_params p = params(m, &vc[i]);
        fr_admission adm;
        rs[i] = fr_engine_submit(eng, &p, &adm);
        if (!rs[i]) fprintf(stderr, "  %s refused: %s\n", vc[i].name, adm.msg);
        CHECK(rs[i] != NULL);
    }
    for (int i = 0; i < n_cases; i++) {
        if (!rs[i]) continue;
        fr_req_info info;
        double t0 = fr_time_s();
        while (!fr_req_wait(rs[i], NULL, 0.05, &info) && fr_time_s() - t0 < 60) {}
        CHECK(info.done && info.end == FR_END_LENGTH);
        int32_t got[64];
        int n = fr_req_output_ids(rs[i], got, 64);
        CHECK_EQ_INT(n, vc[i].n_want);
        bool same = n == vc[i].n_want && !memcmp(got, vc[i].want, sizeof(int32_t) * (size_t)n);
        if (!same) {
            fprintf(stderr, "  %s: ids differ from HF's:", vc[i].name);
            for (int k = 0; k < n; k++) fprintf(stderr, " %d/%d", got[k], vc[i].want[k]);
            fprintf(stderr, "\n");
        }
        CHECK(same);
        fr_req_release(rs[i]);
    }
    fr_engine_free(eng);
    for (int i = 0; i < n_cases; i++) case_free(&vc[i]);
    cJSON_Delete(root);
    fr_model_free(m);
}

TEST(engine_vl_refuses_image_input_that_does_not_fit) {
    fr_model *m = load_vl();
    CHECK(m && m->vision);
    cJSON *root = load_ref();
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    vl_case vc;
    bool ok = m && m->vision && cases && prepare(m, cases->child, &vc);
    CHECK(ok && vc.feat);
    if (ok && vc.feat) {
        fr_engine_config cfg = fr_engine_config_default();
        cfg.kv_bytes = 4u << 20;
        cfg.warmup = false;
        fr_err e = {0};
        fr_engine *eng = fr_engine_new(m, &cfg, &e);
        CHECK(eng != NULL);
        fr_req_params p = params(m, &vc);
        p.n_img_rows = vc.n_rows - 1; /* one row short of the prompt's image tokens */
        fr_admission adm;
        fr_req *r = eng ? fr_engine_submit(eng, &p, &adm) : NULL;
        CHECK(r == NULL);
        CHECK_EQ_INT(adm.verdict, FR_ADMIT_INVALID);
        CHECK(strstr(adm.msg, "image") != NULL);
        fr_engine_stats st;
        if (eng) fr_engine_stats_get(eng, &st);
        CHECK(eng && st.rejected[FR_TIER_P1][FR_ADMIT_INVALID] == 1);
        /* positions kept from before pruning may not run past the context (rotary tables) */
        p = params(m, &vc);
        int32_t *far = fr_xmalloc(sizeof(int32_t) * 3 * (size_t)vc.n);
        memcpy(far, vc.rpos, sizeof(int32_t) * 3 * (size_t)vc.n);
        far[3 * vc.n - 1] = fr_engine_max_ctx(eng) - p.gen.max_tokens; /* one past the end */
        p.rope_pos = far;
        r = fr_engine_submit(eng, &p, &adm);
        CHECK(r == NULL);
        CHECK_EQ_INT(adm.verdict, FR_ADMIT_TOO_LARGE);
        far[3 * vc.n - 1] = -1;
        r = fr_engine_submit(eng, &p, &adm);
        CHECK(r == NULL);
        CHECK_EQ_INT(adm.verdict, FR_ADMIT_INVALID);
        far[3 * vc.n - 1] = fr_engine_max_ctx(eng) - p.gen.max_tokens - 1; /* the last one */
        r = fr_engine_submit(eng, &p, &adm);
        CHECK(r != NULL);
        if (r) {
            fr_req_info info;
            while (!fr_req_wait(r, NULL, 0.05, &info)) {}
            CHECK(info.end == FR_END_LENGTH);
            fr_req_release(r);
        }
        free(far);
        fr_engine_free(eng);
    }
    if (ok) case_free(&vc);
    cJSON_Delete(root);
    fr_model_free(m);
}

TEST(engine_text_model_refuses_image_input) {
    char p[700];
    snprintf(p, sizeof p, "%s/qwen2-tiny", t_fixtures());
    fr_err e = {0};
    fr_model *m = fr_model_load(p, &e);
    if (!m) fprintf(stderr, "  load %s: %s\n", p, e.msg);
    CHECK(m != NULL);
    if (!m) return;
    fr_engine_config cfg = fr_engine_config_default();
    cfg.kv_bytes = 4u << 20;
    cfg.warmup = false;
    fr_engine *eng = fr_engine_new(m, &cfg, &e);
    CHECK(eng && !fr_engine_takes_images(eng));
    int32_t ids[4] = {1, 2, 3, 4}, rpos[12] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
    float row[1] = {0};
    fr_req_params rp;
    memset(&rp, 0, sizeof rp);
    rp.prompt = ids;
    rp.n_prompt = 4;
    rp.gen = fr_gen_params_default();
    rp.gen.max_tokens = 2;
    rp.sampling = fr_sampling_default();
    rp.rope_pos = rpos;
    rp.img_embd = row;
    rp.n_img_rows = 1;
    rp.image_token_id = 3;
    fr_admission adm;
    fr_req *r = eng ? fr_engine_submit(eng, &rp, &adm) : NULL;
    CHECK(r == NULL);
    CHECK_EQ_INT(adm.verdict, FR_ADMIT_INVALID);
    fr_engine_free(eng);
    fr_model_free(m);
}

int main(void) { return t_main(); }

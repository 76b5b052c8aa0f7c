/* test_vision.c — the Qwen2-VL / Qwen2.5-VL vision tower: loading (HF folders in the transformers 5
 * nested layout and the older flat one, with both tensor namings, F32 sharded and BF16; llama.cpp's
 * text GGUF + mmproj pair) and the CPU forward pass (the fast path against the plain reference,
 * HF's window and position bookkeeping against hand-derived cases, images isolated from each
 * other). The models are tiny random ones this test writes into a temporary folder; the
 * comparison with HF transformers is tests/test_vision_hf.c. */
#include "t.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cpu/vision.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/vision.h"

/* ---------------------------------------------------------------- temp files */

static char tmp_root[64];

static const char *tmp_dir(void) {
    if (!tmp_root[0]) {
        snprintf(tmp_root, sizeof tmp_root, "/tmp/frugal-vision-XXXXXX");
        if (!mkdtemp(tmp_root)) {
            perror("mkdtemp");
            abort();
        }
    }
    return tmp_root;
}

static char *tmp_path(const char *name) {
    char buf[600];
    snprintf(buf, sizeof buf, "%s/%s", tmp_dir(), name);
    return fr_xstrdup(buf);
}

static void spit(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n)) {
        perror(path);
        abort();
    }
    fclose(f);
}

static void copy_file(const char *src, const char *dst) {
    size_t n;
    fr_err e;
    char *p = fr_read_file(src, 1u << 28, &n, &e);
    if (!p) {
        fprintf(stderr, "  %s\n", e.msg);
        abort();
    }
    spit(dst, p, n);
    free(p);
}

/* ---------------------------------------------------------------- the tiny model */

/* text: hidden 64 (the tokenizer fixture's vocabulary, 4005), 1 layer, 4/2 heads of 16.
 * vision: hidden 32, 2 heads (head_dim 16), MLP 48, patch 4, temporal 2, merge 2, window 16
 * (2 x 2 merged units), 3 blocks, full attention in block 1. */
enum { TE = 64, TV = 4005, TF = 96, VH = 32, VF = 48, VP = 4, VT = 2, VM = 2, VDEPTH = 3 };
#define VPD (3 * VT * VP * VP) /* patch dim 96 */

typedef struct tw {
    char name[160];
    int nd;
    int64_t shape[6]; /* HF order */
    float *data;
    int64_t n;
} tw;

typedef struct tlist {
    tw t[128];
    int n;
} tlist;

/* Deterministic values from the tensor's role (not its file name), scaled by 1/sqrt(fan_in). */
static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static float *values(const char *role, int64_t n, double scale, double offset) {
    float *p = fr_xmalloc((size_t)n * sizeof(float));
    uint64_t s = hash_str(role) | 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = (float)(offset + scale * ((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0));
    }
    return p;
}

static void add(tlist *l, const char *name, const char *role, int nd, const int64_t *shape,
                double offset) {
    tw *t = &l->t[l->n++];
    FR_ASSERT(l->n <= 128);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->nd = nd;
    t->n = 1;
    for (int i = 0; i < nd; i++) t->n *= (t->shape[i] = shape[i]);
    double fan = nd > 1 ? (double)(t->n / shape[0]) : 1.0;
    t->data = values(role, t->n, nd > 1 ? 1.0 / sqrt(fan) : 0.1, offset);
}

static void list_free(tlist *l) {
    for (int i = 0; i < l->n; i++) free(l->t[i].data);
    l->n = 0;
}

typedef enum { NAMES_NEW, NAMES_OLD } names;

/* The vision tensors of kind k (HF names under prefix), then the text tensors. */
static void build(tlist *l, fr_vision_kind k, names nm) {
    const char *vp = nm == NAMES_NEW ? "model.visual." : "visual.";
    const char *tp = nm == NAMES_NEW ? "model.language_model." : "model.";
    char n[160], r[160];
    bool q25 = k == FR_VISION_QWEN25VL;
    snprintf(n, sizeof n, "%spatch_embed.proj.weight", vp);
    add(l, n, "patch", 5, (int64_t[]){VH, 3, VT, VP, VP}, 0);
    for (int b = 0; b < VDEPTH; b++) {
        struct { const char *s; int nd; int64_t d0, d1; double off; } ts25[] = {
            {"norm1.weight", 1, VH, 0, 1.0}, {"attn.qkv.weight", 2, 3 * VH, VH, 0},
            {"attn.qkv.bias", 1, 3 * VH, 0, 0}, {"attn.proj.weight", 2, VH, VH, 0},
            {"attn.proj.bias", 1, VH, 0, 0}, {"norm2.weight", 1, VH, 0, 1.0},
            {"mlp.gate_proj.weight", 2, VF, VH, 0}, {"mlp.gate_proj.bias", 1, VF, 0, 0},
            {"mlp.up_proj.weight", 2, VF, VH, 0}, {"mlp.up_proj.bias", 1, VF, 0, 0},
            {"mlp.down_proj.weight", 2, VH, VF, 0}, {"mlp.down_proj.bias", 1, VH, 0, 0}};
        struct { const char *s; int nd; int64_t d0, d1; double off; } ts2[] = {
            {"norm1.weight", 1, VH, 0, 1.0}, {"norm1.bias", 1, VH, 0, 0},
            {"attn.qkv.weight", 2, 3 * VH, VH, 0}, {"attn.qkv.bias", 1, 3 * VH, 0, 0},
            {"attn.proj.weight", 2, VH, VH, 0}, {"attn.proj.bias", 1, VH, 0, 0},
            {"norm2.weight", 1, VH, 0, 1.0}, {"norm2.bias", 1, VH, 0, 0},
            {"mlp.fc1.weight", 2, VF, VH, 0}, {"mlp.fc1.bias", 1, VF, 0, 0},
            {"mlp.fc2.weight", 2, VH, VF, 0}, {"mlp.fc2.bias", 1, VH, 0, 0}};
        int cnt = q25 ? (int)FR_ARRAY_LEN(ts25) : (int)FR_ARRAY_LEN(ts2);
        for (int i = 0; i < cnt; i++) {
            const char *s = q25 ? ts25[i].s : ts2[i].s;
            int nd = q25 ? ts25[i].nd : ts2[i].nd;
            int64_t sh[2] = {q25 ? ts25[i].d0 : ts2[i].d0, q25 ? ts25[i].d1 : ts2[i].d1};
            snprintf(n, sizeof n, "%sblocks.%d.%s", vp, b, s);
            snprintf(r, sizeof r, "blocks.%d.%s", b, s);
            add(l, n, r, nd, sh, q25 ? ts25[i].off : ts2[i].off);
        }
    }
    int64_t M = VH * VM * VM;
    snprintf(n, sizeof n, "%smerger.ln_q.weight", vp);
    add(l, n, "ln_q", 1, (int64_t[]){VH}, 1.0);
    if (!q25) {
        snprintf(n, sizeof n, "%smerger.ln_q.bias", vp);
        add(l, n, "ln_q.bias", 1, (int64_t[]){VH}, 0);
    }
    snprintf(n, sizeof n, "%smerger.mlp.0.weight", vp);
    add(l, n, "mlp0", 2, (int64_t[]){M, M}, 0);
    snprintf(n, sizeof n, "%smerger.mlp.0.bias", vp);
    add(l, n, "mlp0b", 1, (int64_t[]){M}, 0);
    snprintf(n, sizeof n, "%smerger.mlp.2.weight", vp);
    add(l, n, "mlp2", 2, (int64_t[]){TE, M}, 0);
    snprintf(n, sizeof n, "%smerger.mlp.2.bias", vp);
    add(l, n, "mlp2b", 1, (int64_t[]){TE}, 0);
    /* text */
    snprintf(n, sizeof n, "%sembed_tokens.weight", tp);
    add(l, n, "embed", 2, (int64_t[]){TV, TE}, 0);
    struct { const char *s; int nd; int64_t d0, d1; double off; } tt[] = {
        {"input_layernorm.weight", 1, TE, 0, 1.0}, {"self_attn.q_proj.weight", 2, TE, TE, 0},
        {"self_attn.k_proj.weight", 2, 32, TE, 0}, {"self_attn.v_proj.weight", 2, 32, TE, 0},
        {"self_attn.q_proj.bias", 1, TE, 0, 0}, {"self_attn.k_proj.bias", 1, 32, 0, 0},
        {"self_attn.v_proj.bias", 1, 32, 0, 0}, {"self_attn.o_proj.weight", 2, TE, TE, 0},
        {"post_attention_layernorm.weight", 1, TE, 0, 1.0}, {"mlp.gate_proj.weight", 2, TF, TE, 0},
        {"mlp.up_proj.weight", 2, TF, TE, 0}, {"mlp.down_proj.weight", 2, TE, TF, 0}};
    for (size_t i = 0; i < FR_ARRAY_LEN(tt); i++) {
        snprintf(n, sizeof n, "%slayers.0.%s", tp, tt[i].s);
        add(l, n, tt[i].s, tt[i].nd, (int64_t[]){tt[i].d0, tt[i].d1}, tt[i].off);
    }
    snprintf(n, sizeof n, "%snorm.weight", tp);
    add(l, n, "norm", 1, (int64_t[]){TE}, 1.0);
    add(l, "lm_head.weight", "lm_head", 2, (int64_t[]){TV, TE}, 0);
}

/* A safetensors file of tensors [a, b) of l, F32 or BF16. */
static void write_st(const char *path, const tlist *l, int a, int b, bool bf16, const char *skip) {
    cJSON *h = cJSON_CreateObject();
    size_t off = 0, esz = bf16 ? 2 : 4;
    for (int i = a; i < b; i++) {
        if (skip && !strcmp(l->t[i].name, skip)) continue;
        cJSON *o = cJSON_AddObjectToObject(h, l->t[i].name);
        cJSON_AddStringToObject(o, "dtype", bf16 ? "BF16" : "F32");
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < l->t[i].nd; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)l->t[i].shape[d]));
        cJSON *of = cJSON_AddArrayToObject(o, "data_offsets");
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        off += (size_t)l->t[i].n * esz;
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
    }
    char *js = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    fr_buf o = {0};
    uint64_t hl = (strlen(js) + 7) / 8 * 8;
    fr_buf_append(&o, &hl, 8);
    fr_buf_append(&o, js, strlen(js));
    for (size_t i = strlen(js); i < hl; i++) fr_buf_append(&o, " ", 1);
    free(js);
    for (int i = a; i < b; i++) {
        if (skip && !strcmp(l->t[i].name, skip)) continue;
        for (int64_t k = 0; k < l->t[i].n; k++) {
            if (bf16) {
                uint16_t v = fr_f32_to_bf16(l->t[i].data[k]);
                fr_buf_append(&o, &v, 2);
            } else {
                fr_buf_append(&o, &l->t[i].data[k], 4);
            }
        }
    }
    spit(path, o.data, o.len);
    fr_buf_free(&o);
}

static const char *CFG25_NESTED =
    "{\"architectures\": [\"Qwen2_5_VLForConditionalGeneration\"], \"model_type\": \"qwen2_5_vl\","
    " \"image_token_id\": 4001, \"video_token_id\": 4002, \"vision_start_token_id\": 4003,"
    " \"vision_end_token_id\": 4004, \"tie_word_embeddings\": false,"
    " \"text_config\": {\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 1,"
    "  \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 4005,"
    "  \"rms_norm_eps\": 1e-6, \"eos_token_id\": 4002, \"max_position_embeddings\": 512,"
    "  \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1000000.0,"
    "   \"mrope_section\": [2, 3, 3]}},"
    " \"vision_config\": {\"depth\": 3, \"hidden_size\": 32, \"intermediate_size\": 48,"
    "  \"num_heads\": 2, \"patch_size\": 4, \"spatial_merge_size\": 2, \"temporal_patch_size\": 2,"
    "  \"window_size\": 16, \"out_hidden_size\": 64, \"fullatt_block_indexes\": [1],"
    "  \"hidden_act\": \"silu\", \"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"axial\"}}}";

static const char *CFG25_FLAT =
    "{\"architectures\": [\"Qwen2_5_VLForConditionalGeneration\"], \"model_type\": \"qwen2_5_vl\","
    " \"image_token_id\": 4001, \"video_token_id\": 4002, \"vision_start_token_id\": 4003,"
    " \"vision_end_token_id\": 4004, \"tie_word_embeddings\": false,"
    " \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 1,"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 4005,"
    " \"rms_norm_eps\": 1e-6, \"eos_token_id\": 4002, \"rope_theta\": 1000000.0,"
    " \"rope_scaling\": {\"type\": \"mrope\", \"mrope_section\": [2, 3, 3]},"
    " \"vision_config\": {\"depth\": 3, \"hidden_size\": 32, \"intermediate_size\": 48,"
    "  \"num_heads\": 2, \"patch_size\": 4, \"spatial_merge_size\": 2, \"temporal_patch_size\": 2,"
    "  \"window_size\": 16, \"out_hidden_size\": 64, \"fullatt_block_indexes\": [1],"
    "  \"in_chans\": 3, \"hidden_act\": \"silu\"}}";

static const char *CFG2_FLAT =
    "{\"architectures\": [\"Qwen2VLForConditionalGeneration\"], \"model_type\": \"qwen2_vl\","
    " \"image_token_id\": 4001, \"vision_start_token_id\": 4003, \"vision_end_token_id\": 4004,"
    " \"tie_word_embeddings\": false, \"hidden_size\": 64, \"intermediate_size\": 96,"
    " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"vocab_size\": 4005, \"rms_norm_eps\": 1e-6, \"rope_theta\": 1000000.0,"
    " \"rope_scaling\": {\"type\": \"mrope\", \"mrope_section\": [2, 3, 3]},"
    " \"vision_config\": {\"depth\": 3, \"embed_dim\": 32, \"hidden_size\": 64, \"mlp_ratio\": 1.5,"
    "  \"num_heads\": 2, \"patch_size\": 4, \"spatial_merge_size\": 2, \"temporal_patch_size\": 2,"
    "  \"in_chans\": 3, \"hidden_act\": \"quick_gelu\"}}";

/* An HF folder `name` holding config (text) and the tensors of l: one F32 file, two shards with
 * an index, or one BF16 file. skip: a tensor left out. Returns the folder (malloc'd). */
typedef enum { ST_ONE, ST_SHARDED, ST_BF16 } st_layout;

static char *hf_folder(const char *name, const char *config, const tlist *l, st_layout lay,
                       const char *skip) {
    char *dir = tmp_path(name);
    mkdir(dir, 0755);
    char p[800];
    snprintf(p, sizeof p, "%s/config.json", dir);
    spit(p, config, strlen(config));
    char src[600];
    snprintf(src, sizeof src, "%s/qwen2-tiny/tokenizer.json", t_fixtures());
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    copy_file(src, p);
    if (lay == ST_SHARDED) {
        int half = l->n / 2;
        const char *shard[2] = {"model-00001-of-00002.safetensors",
                                "model-00002-of-00002.safetensors"};
        cJSON *idx = cJSON_CreateObject(), *wm = cJSON_AddObjectToObject(idx, "weight_map");
        for (int s = 0; s < 2; s++) {
            snprintf(p, sizeof p, "%s/%s", dir, shard[s]);
            write_st(p, l, s ? half : 0, s ? l->n : half, false, skip);
            for (int i = s ? half : 0; i < (s ? l->n : half); i++)
                if (!skip || strcmp(l->t[i].name, skip))
                    cJSON_AddStringToObject(wm, l->t[i].name, shard[s]);
        }
        char *js = cJSON_Print(idx);
        cJSON_Delete(idx);
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
        spit(p, js, strlen(js));
        free(js);
    } else {
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        write_st(p, l, 0, l->n, lay == ST_BF16, skip);
    }
    return dir;
}

static fr_model *load_ok(const char *path) {
    fr_err e = {0};
    fr_model *m = fr_model_load(path, &e);
    if (!m) fprintf(stderr, "  load %s: %s\n", path, e.msg);
    return m;
}

/* Loading fails with this code and a one-line message holding kw. */
static void load_fails(const char *path, fr_err_code code, const char *kw) {
    fr_err e = {0};
    fr_model *m = fr_model_load(path, &e);
    CHECK(m == NULL);
    fr_model_free(m);
    if (e.code != code || !strstr(e.msg, kw) || strchr(e.msg, '\n'))
        fprintf(stderr, "  load %s: [%s] code %d, wanted [%s] code %d\n", path, e.msg, e.code, kw,
                code);
    CHECK_EQ_INT(e.code, code);
    CHECK(strstr(e.msg, kw) != NULL);
    CHECK(!strchr(e.msg, '\n'));
}

/* ---------------------------------------------------------------- comparison helpers */

static double rel_l2(const float *a, const float *b, int64_t n) {
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

static bool all_finite(const float *a, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return false;
    return true;
}

/* Two images: (1, 6, 10) (3 x 5 merged units: partial windows) and (1, 4, 4). */
static const int32_t GRID2[6] = {1, 6, 10, 1, 4, 4};
#define NP2 (60 + 16)
#define NT2 (NP2 / 4)

static float *pixels(int64_t n, const char *role) { return values(role, n * VPD, 1.0, 0); }

/* fast and reference outputs of m on pixels / grid; both checked finite and close. */
static void fast_vs_ref(const fr_model *m, const int32_t *grid, int n_img, int64_t np) {
    float *px = pixels(np, "pixels");
    int64_t nt = np / 4;
    float *a = fr_xcalloc((size_t)(nt * TE), sizeof(float));
    float *b = fr_xcalloc((size_t)(nt * TE), sizeof(float));
    fr_err e = {0};
    fr_pool *pool = fr_pool_new(2);
    CHECK_EQ_INT(fr_vision_forward(m, pool, px, np, grid, n_img, a, &e), 0);
    CHECK_EQ_INT(fr_vision_forward_ref(m, px, np, grid, n_img, b, &e), 0);
    CHECK(all_finite(a, nt * TE));
    double r = rel_l2(a, b, nt * TE), nb = 0;
    for (int64_t i = 0; i < nt * TE; i++) nb += (double)b[i] * b[i];
    if (!(r < 1e-5)) fprintf(stderr, "  fast vs ref: rel L2 %g\n", r);
    CHECK(r < 1e-5);
    CHECK(nb > 0);
    fr_pool_free(pool);
    free(px), free(a), free(b);
}

/* ---------------------------------------------------------------- tests */

TEST(window_index_matches_hf_cases) {
    fr_vision_hparams hp = {.kind = FR_VISION_QWEN25VL, .merge = 2, .patch = 14,
                            .window_size = 56};
    int32_t win[64], cu[64];
    int nw = 0;
    /* (1, 4, 8): units 2 x 4, windows of 2 x 2; HF pads a whole extra window row/column */
    const int32_t g1[3] = {1, 4, 8};
    CHECK_EQ_INT(fr_vision_window_index(&hp, g1, 1, win, cu, &nw), 0);
    const int32_t w1[] = {0, 1, 4, 5, 2, 3, 6, 7}, c1[] = {0, 16, 32};
    CHECK_EQ_INT(nw, 2);
    CHECK(!memcmp(win, w1, sizeof w1));
    CHECK(!memcmp(cu, c1, sizeof c1));
    /* (1, 6, 6): units 3 x 3: windows {0,1,3,4} {2,5} {6,7} {8} */
    const int32_t g2[3] = {1, 6, 6};
    CHECK_EQ_INT(fr_vision_window_index(&hp, g2, 1, win, cu, &nw), 0);
    const int32_t w2[] = {0, 1, 3, 4, 2, 5, 6, 7, 8}, c2[] = {0, 16, 24, 32, 36};
    CHECK_EQ_INT(nw, 4);
    CHECK(!memcmp(win, w2, sizeof w2));
    CHECK(!memcmp(cu, c2, sizeof c2));
    /* both images: the second one's units and boundaries continue after the first's */
    const int32_t g3[6] = {1, 4, 8, 1, 6, 6};
    CHECK_EQ_INT(fr_vision_window_index(&hp, g3, 2, win, cu, &nw), 0);
    const int32_t w3[] = {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 11, 12, 10, 13, 14, 15, 16};
    const int32_t c3[] = {0, 16, 32, 48, 56, 64, 68};
    CHECK_EQ_INT(nw, 6);
    CHECK(!memcmp(win, w3, sizeof w3));
    CHECK(!memcmp(cu, c3, sizeof c3));
    /* Qwen2-VL (no windows): identity, one segment per frame */
    hp.window_size = 0;
    const int32_t g4[3] = {2, 2, 4};
    CHECK_EQ_INT(fr_vision_window_index(&hp, g4, 1, win, cu, &nw), 0);
    const int32_t w4[] = {0, 1, 2, 3}, c4[] = {0, 8, 16};
    CHECK_EQ_INT(nw, 2);
    CHECK(!memcmp(win, w4, sizeof w4));
    CHECK(!memcmp(cu, c4, sizeof c4));
    /* invalid grids */
    const int32_t bad[3] = {1, 5, 4};
    CHECK_EQ_INT(fr_vision_window_index(&hp, bad, 1, win, cu, &nw), -1);
    CHECK_EQ_INT(fr_vision_n_tokens(&hp, bad, 1), -1);
    const int32_t zero[3] = {0, 4, 4};
    CHECK_EQ_INT(fr_vision_n_tokens(&hp, zero, 1), -1);
}

TEST(rot_pos_is_merge_block_order) {
    fr_vision_hparams hp = {.merge = 2, .patch = 14};
    const int32_t g[3] = {2, 2, 4};
    int32_t pos[2 * 16];
    CHECK_EQ_INT(fr_vision_rot_pos(&hp, g, 1, pos), 0);
    /* blocks (0,0), (0,1); inside each (0,0) (0,1) (1,0) (1,1); repeated per frame */
    const int32_t want[] = {0, 0, 0, 1, 1, 0, 1, 1, 0, 2, 0, 3, 1, 2, 1, 3};
    CHECK(!memcmp(pos, want, sizeof want));
    CHECK(!memcmp(pos + 16, want, sizeof want));
}

TEST(hf_qwen25vl_nested_sharded_loads) {
    tlist l = {0};
    build(&l, FR_VISION_QWEN25VL, NAMES_NEW);
    char *dir = hf_folder("q25-nested", CFG25_NESTED, &l, ST_SHARDED, NULL);
    fr_model *m = load_ok(dir);
    CHECK(m && m->vision);
    if (m && m->vision) {
        const fr_hparams *hp = &m->hp;
        CHECK_EQ_INT(hp->n_embd, 64);
        CHECK_EQ_INT(hp->n_head_kv, 2);
        CHECK_EQ_INT(hp->mrope_section[0], 2);
        CHECK_EQ_INT(hp->mrope_section[1], 3);
        CHECK_EQ_INT(hp->mrope_section[2], 3);
        CHECK_EQ_INT(hp->image_token_id, 4001);
        CHECK_EQ_INT(hp->video_token_id, 4002);
        CHECK_EQ_INT(hp->vision_start_id, 4003);
        CHECK_EQ_INT(hp->vision_end_id, 4004);
        CHECK_NEAR(hp->rope_theta, 1e6, 1);
        CHECK(!hp->tied_embeddings);
        const fr_vision_hparams *v = &m->vision->hp;
        CHECK_EQ_INT(v->kind, FR_VISION_QWEN25VL);
        CHECK_EQ_INT(v->depth, 3);
        CHECK_EQ_INT(v->hidden, 32);
        CHECK_EQ_INT(v->head_dim, 16);
        CHECK_EQ_INT(v->n_ff, 48);
        CHECK_EQ_INT(v->patch, 4);
        CHECK_EQ_INT(v->temporal, 2);
        CHECK_EQ_INT(v->merge, 2);
        CHECK_EQ_INT(v->window_size, 16);
        CHECK_EQ_INT(v->out_hidden, 64);
        CHECK(!v->fullatt[0] && v->fullatt[1] && !v->fullatt[2]);
        /* the Conv3d kernel as rows of C*T*P*P, exactly the stored values */
        CHECK_EQ_INT(m->vision->patch_w.ne[0], VPD);
        CHECK_EQ_INT(m->vision->patch_w.ne[1], VH);
        CHECK(!memcmp(m->vision->patch_w.data, l.t[0].data, (size_t)l.t[0].n * 4));
        CHECK_EQ_INT(m->vision->blocks[2].qkv_w.ne[1], 3 * VH);
        CHECK(!fr_tensor_present(&m->vision->blocks[0].norm1_b));
        CHECK(fr_tensor_present(&m->vision->blocks[0].gate_w));
        CHECK_STR(m->arch_name, "qwen2.5-vl");
        fast_vs_ref(m, GRID2, 2, NP2);
    }
    fr_model_free(m);
    free(dir);
    list_free(&l);
}

TEST(hf_qwen25vl_flat_old_names_same_tower) {
    tlist a = {0}, b = {0};
    build(&a, FR_VISION_QWEN25VL, NAMES_NEW);
    build(&b, FR_VISION_QWEN25VL, NAMES_OLD);
    char *d1 = hf_folder("q25-a", CFG25_NESTED, &a, ST_ONE, NULL);
    char *d2 = hf_folder("q25-b", CFG25_FLAT, &b, ST_ONE, NULL);
    fr_model *m1 = load_ok(d1), *m2 = load_ok(d2);
    CHECK(m1 && m2 && m1->vision && m2->vision);
    if (m1 && m2 && m1->vision && m2->vision) {
        CHECK(!memcmp(m1->hp.mrope_section, m2->hp.mrope_section, sizeof m1->hp.mrope_section));
        CHECK_EQ_INT(m2->hp.image_token_id, 4001);
        CHECK_EQ_INT(m2->vision->hp.in_chans, 3);
        float *px = pixels(NP2, "pixels");
        float *o1 = fr_xcalloc(NT2 * TE, 4), *o2 = fr_xcalloc(NT2 * TE, 4);
        fr_err e = {0};
        CHECK_EQ_INT(fr_vision_forward(m1, NULL, px, NP2, GRID2, 2, o1, &e), 0);
        CHECK_EQ_INT(fr_vision_forward(m2, NULL, px, NP2, GRID2, 2, o2, &e), 0);
        CHECK(!memcmp(o1, o2, NT2 * TE * 4));
        /* and the text weights under model.layers. / model.language_model. */
        CHECK(!memcmp(m1->w.layers[0].wq.data, m2->w.layers[0].wq.data, TE * TE * 4));
        free(px), free(o1), free(o2);
    }
    fr_model_free(m1);
    fr_model_free(m2);
    free(d1), free(d2);
    list_free(&a), list_free(&b);
}

TEST(hf_qwen2vl_flat_bf16_loads) {
    tlist l = {0};
    build(&l, FR_VISION_QWEN2VL, NAMES_OLD);
    char *dir = hf_folder("q2-bf16", CFG2_FLAT, &l, ST_BF16, NULL);
    fr_model *m = load_ok(dir);
    CHECK(m && m->vision);
    if (m && m->vision) {
        const fr_vision_hparams *v = &m->vision->hp;
        CHECK_EQ_INT(v->kind, FR_VISION_QWEN2VL);
        CHECK_EQ_INT(v->hidden, 32);
        CHECK_EQ_INT(v->n_ff, 48); /* embed_dim * mlp_ratio */
        CHECK_EQ_INT(v->window_size, 0);
        CHECK(v->fullatt[0] && v->fullatt[1] && v->fullatt[2]);
        CHECK(fr_tensor_present(&m->vision->blocks[1].norm2_b));
        CHECK(fr_tensor_present(&m->vision->merger_ln_b));
        CHECK_EQ_INT(m->vision->patch_w.dtype, FR_DTYPE_F32);
        /* BF16 converted: the first value rounds like fr_f32_to_bf16 */
        CHECK(((const float *)m->vision->patch_w.data)[0] ==
              fr_bf16_to_f32(fr_f32_to_bf16(l.t[0].data[0])));
        CHECK_EQ_INT(m->hp.video_token_id, -1); /* HF's default 151656 is past the vocabulary */
        CHECK_STR(m->arch_name, "qwen2-vl");
        fast_vs_ref(m, GRID2, 2, NP2);
    }
    fr_model_free(m);
    free(dir);
    list_free(&l);
}

TEST(images_do_not_attend_to_each_other) {
    tlist l = {0};
    build(&l, FR_VISION_QWEN25VL, NAMES_NEW);
    char *dir = hf_folder("q25-iso", CFG25_NESTED, &l, ST_ONE, NULL);
    fr_model *m = load_ok(dir);
    CHECK(m != NULL);
    if (m) {
        float *px = pixels(NP2, "pixels");
        float *both = fr_xcalloc(NT2 * TE, 4), *first = fr_xcalloc(15 * TE, 4),
              *second = fr_xcalloc(4 * TE, 4);
        fr_err e = {0};
        CHECK_EQ_INT(fr_vision_forward_ref(m, px, NP2, GRID2, 2, both, &e), 0);
        CHECK_EQ_INT(fr_vision_forward_ref(m, px, 60, GRID2, 1, first, &e), 0);
        CHECK_EQ_INT(fr_vision_forward_ref(m, px + 60 * VPD, 16, GRID2 + 3, 1, second, &e), 0);
        CHECK(rel_l2(both, first, 15 * TE) < 1e-6);
        CHECK(rel_l2(both + 15 * TE, second, 4 * TE) < 1e-6);
        /* and a changed second image leaves the first one's features alone */
        for (int i = 0; i < 16 * VPD; i++) px[60 * VPD + i] = -px[60 * VPD + i];
        float *both2 = fr_xcalloc(NT2 * TE, 4);
        CHECK_EQ_INT(fr_vision_forward_ref(m, px, NP2, GRID2, 2, both2, &e), 0);
        CHECK(rel_l2(both2, first, 15 * TE) < 1e-6);
        CHECK(rel_l2(both2 + 15 * TE, second, 4 * TE) > 1e-3);
        free(px), free(both), free(first), free(second), free(both2);
    }
    fr_model_free(m);
    free(dir);
    list_free(&l);
}

TEST(window_attention_is_local) {
    /* a patch change in one window reaches another window only through the full-attention
     * block: with every block windowed, features of other windows stay put */
    tlist l = {0};
    build(&l, FR_VISION_QWEN25VL, NAMES_NEW);
    char cfg[4096];
    snprintf(cfg, sizeof cfg, "%s", CFG25_NESTED);
    char *at = strstr(cfg, "\"fullatt_block_indexes\": [1]");
    FR_ASSERT(at);
    memcpy(at, "\"fullatt_block_indexes\": [ ]", 28);
    char *dir = hf_folder("q25-local", cfg, &l, ST_ONE, NULL);
    fr_model *m = load_ok(dir);
    CHECK(m != NULL);
    if (m) {
        const int32_t g[3] = {1, 8, 8}; /* 4 x 4 units: four windows of 2 x 2 */
        float *px = pixels(64, "pixels");
        float *o1 = fr_xcalloc(16 * TE, 4), *o2 = fr_xcalloc(16 * TE, 4);
        fr_err e = {0};
        CHECK_EQ_INT(fr_vision_forward_ref(m, px, 64, g, 1, o1, &e), 0);
        for (int i = 0; i < 4 * VPD; i++) px[i] += 1.0f; /* unit 0 (window 0) */
        CHECK_EQ_INT(fr_vision_forward_ref(m, px, 64, g, 1, o2, &e), 0);
        /* token order is the original one: units 0,1,4,5 form window 0 */
        for (int u = 0; u < 16; u++) {
            bool in_w0 = u == 0 || u == 1 || u == 4 || u == 5;
            double r = rel_l2(o2 + u * TE, o1 + u * TE, TE);
            CHECK(in_w0 ? r > 1e-4 : r < 1e-6);
        }
        free(px), free(o1), free(o2);
    }
    fr_model_free(m);
    free(dir);
    list_free(&l);
}

TEST(kept_units_run_as_the_smaller_image) {
    /* dropping the bottom band of windows (stages/vision/bgdrop.h) is the top part run alone:
     * same positions, windows and full-attention set; dropping a whole second image is the first
     * one alone; keeping everything is the plain tower */
    tlist l = {0};
    build(&l, FR_VISION_QWEN25VL, NAMES_NEW);
    char *dir = hf_folder("q25-kept", CFG25_NESTED, &l, ST_ONE, NULL);
    fr_model *m = load_ok(dir);
    CHECK(m != NULL);
    if (m) {
        fr_err e = {0};
        const int32_t g[6] = {1, 8, 8, 1, 4, 4}; /* 4 x 4 units (windows of 2 x 2), 2 x 2 */
        const int32_t top[3] = {1, 4, 8};        /* the first two unit rows */
        float *px = pixels(64 + 16, "pixels");
        float *all = fr_xcalloc(20 * TE, 4), *kept = fr_xcalloc(20 * TE, 4),
              *ref = fr_xcalloc(20 * TE, 4);
        uint8_t keep[20];
        memset(keep, 1, sizeof keep);
        CHECK_EQ_INT(fr_vision_forward(m, NULL, px, 80, g, 2, all, &e), 0);
        CHECK_EQ_INT(fr_vision_forward_kept(m, NULL, px, 80, g, 2, keep, NULL, kept, &e), 0);
        CHECK(memcmp(all, kept, 20 * TE * sizeof(float)) == 0);
        /* image 1 without its bottom half, image 2 whole */
        for (int u = 8; u < 16; u++) keep[u] = 0;
        CHECK_EQ_INT(fr_vision_forward_kept(m, NULL, px, 80, g, 2, keep, NULL, kept, &e), 0);
        CHECK_EQ_INT(fr_vision_forward(m, NULL, px, 32, top, 1, ref, &e), 0);
        CHECK(rel_l2(kept, ref, 8 * TE) < 1e-5);
        CHECK(rel_l2(kept + 8 * TE, all + 16 * TE, 4 * TE) < 1e-5);
        CHECK(rel_l2(kept, all, 8 * TE) > 1e-4); /* the dropped half did reach the full block */
        /* image 2 dropped: image 1 alone */
        memset(keep, 1, sizeof keep);
        for (int u = 16; u < 20; u++) keep[u] = 0;
        CHECK_EQ_INT(fr_vision_forward_kept(m, NULL, px, 80, g, 2, keep, NULL, kept, &e), 0);
        CHECK_EQ_INT(fr_vision_forward(m, NULL, px, 64, g, 1, ref, &e), 0);
        CHECK(rel_l2(kept, ref, 16 * TE) < 1e-5);
        /* nothing kept */
        memset(keep, 0, sizeof keep);
        CHECK_EQ_INT(fr_vision_forward_kept(m, NULL, px, 80, g, 2, keep, NULL, kept, &e), -1);
        CHECK_EQ_INT(e.code, FR_ERR_BAD_REQUEST);
        free(px), free(all), free(kept), free(ref);
    }
    fr_model_free(m);
    free(dir);
    list_free(&l);
}

static fr_cancel_reason stop_after(void *ctx) {
    int *left = ctx;
    return (*left)-- > 0 ? FR_CANCEL_NONE : FR_CANCEL_CLIENT_GONE;
}

TEST(tower_stops_when_cancelled) {
    tlist l = {0};
    build(&l, FR_VISION_QWEN25VL, NAMES_NEW);
    char *dir = hf_folder("q25-stop", CFG25_NESTED, &l, ST_ONE, NULL);
    fr_model *m = load_ok(dir);
    CHECK(m != NULL);
    if (m) {
        const int32_t g[3] = {1, 8, 8};
        float *px = pixels(64, "pixels"), *o = fr_xcalloc(16 * TE, 4);
        int left = 1; /* the first block runs, the second sees the client gone */
        fr_cancel c = {stop_after, &left};
        fr_err e = {0};
        CHECK_EQ_INT(fr_vision_forward_kept(m, NULL, px, 64, g, 1, NULL, &c, o, &e), -1);
        CHECK_EQ_INT(e.code, FR_ERR_CANCELLED);
        CHECK(strstr(e.msg, "block 1") != NULL);
        left = 100; /* never stops: the plain result */
        CHECK_EQ_INT(fr_vision_forward_kept(m, NULL, px, 64, g, 1, NULL, &c, o, &e), 0);
        free(px), free(o);
    }
    fr_model_free(m);
    free(dir);
    list_free(&l);
}

TEST(hf_errors_name_the_problem) {
    tlist l = {0};
    build(&l, FR_VISION_QWEN25VL, NAMES_OLD);
    char *d = hf_folder("q25-missing", CFG25_FLAT, &l, ST_ONE, "visual.blocks.1.mlp.up_proj.weight");
    load_fails(d, FR_ERR_NOT_FOUND, "visual.blocks.1.mlp.up_proj.weight");
    free(d);
    d = hf_folder("q25-merger", CFG25_FLAT, &l, ST_ONE, "visual.merger.mlp.2.bias");
    load_fails(d, FR_ERR_NOT_FOUND, "visual.merger.mlp.2.bias");
    free(d);
    char cfg[4096];
    snprintf(cfg, sizeof cfg, "%s", CFG25_FLAT);
    char *a = strstr(cfg, "Qwen2_5_VLForConditionalGeneration");
    memcpy(a, "Qwen3_VLForConditionalGeneration  ", 34);
    a = strstr(cfg, "  \"]");
    memmove(a, a + 2, strlen(a + 2) + 1);
    d = hf_folder("q3", cfg, &l, ST_ONE, NULL);
    load_fails(d, FR_ERR_UNSUPPORTED, "Qwen3_VLForConditionalGeneration");
    free(d);
    snprintf(cfg, sizeof cfg, "%s", CFG25_FLAT);
    a = strstr(cfg, "[2, 3, 3]");
    memcpy(a, "[2, 3, 4]", 9);
    d = hf_folder("q25-mrope", cfg, &l, ST_ONE, NULL);
    load_fails(d, FR_ERR_BAD_REQUEST, "mrope_section");
    free(d);
    snprintf(cfg, sizeof cfg, "%s", CFG25_FLAT);
    a = strstr(cfg, "\"out_hidden_size\": 64");
    memcpy(a, "\"out_hidden_size\": 65", 21);
    d = hf_folder("q25-out", cfg, &l, ST_ONE, NULL);
    load_fails(d, FR_ERR_BAD_REQUEST, "output width");
    free(d);
    snprintf(cfg, sizeof cfg, "%s", CFG25_FLAT);
    a = strstr(cfg, "\"image_token_id\": 4001");
    memcpy(a, "\"image_token_id\": 4005", 22);
    d = hf_folder("q25-ids", cfg, &l, ST_ONE, NULL);
    load_fails(d, FR_ERR_BAD_REQUEST, "vision token id 4005");
    free(d);
    /* a wrong patch-embedding shape */
    l.t[0].shape[0] = 16;
    l.t[0].shape[1] = 6;
    d = hf_folder("q25-shape", CFG25_FLAT, &l, ST_ONE, NULL);
    load_fails(d, FR_ERR_BAD_REQUEST, "visual.patch_embed.proj.weight");
    free(d);
    list_free(&l);
}

TEST(forward_rejects_bad_input) {
    fr_err e = {0};
    char p[600];
    snprintf(p, sizeof p, "%s/qwen2-tiny", t_fixtures());
    fr_model *text = load_ok(p);
    CHECK(text && !text->vision);
    if (text) {
        CHECK_EQ_INT(text->hp.mrope_section[0] + text->hp.mrope_section[1] +
                     text->hp.mrope_section[2], 0);
        CHECK_EQ_INT(text->hp.image_token_id, -1);
        CHECK_EQ_INT(text->hp.vision_start_id, -1);
        float out[64];
        CHECK_EQ_INT(fr_vision_forward(text, NULL, out, 4, GRID2 + 3, 1, out, &e), -1);
        CHECK_EQ_INT(e.code, FR_ERR_UNSUPPORTED);
    }
    fr_model_free(text);
    tlist l = {0};
    build(&l, FR_VISION_QWEN25VL, NAMES_NEW);
    char *dir = hf_folder("q25-bad", CFG25_NESTED, &l, ST_ONE, NULL);
    fr_model *m = load_ok(dir);
    if (m) {
        float *px = pixels(NP2, "pixels");
        float *o = fr_xcalloc(NT2 * TE, 4);
        CHECK_EQ_INT(fr_vision_forward(m, NULL, px, NP2 - 4, GRID2, 2, o, &e), -1);
        CHECK_EQ_INT(e.code, FR_ERR_BAD_REQUEST);
        const int32_t odd[3] = {1, 5, 4};
        CHECK_EQ_INT(fr_vision_forward(m, NULL, px, 20, odd, 1, o, &e), -1);
        CHECK_EQ_INT(e.code, FR_ERR_BAD_REQUEST);
        const int32_t huge[3] = {1, 2048, 2048};
        CHECK_EQ_INT(fr_vision_forward(m, NULL, px, 2048 * 2048, huge, 1, o, &e), -1);
        CHECK_EQ_INT(e.code, FR_ERR_BAD_REQUEST);
        free(px), free(o);
    }
    fr_model_free(m);
    free(dir);
    list_free(&l);
}

/* ---------------------------------------------------------------- GGUF pair */

typedef struct gw {
    fr_buf kv;
    int64_t n_kv;
    fr_buf ti;     /* tensor infos */
    fr_buf data;   /* tensor data (each aligned to 32) */
    int64_t n_t;
} gw;

static void gw_key(gw *g, const char *k, uint32_t type) {
    uint64_t n = strlen(k);
    fr_buf_append(&g->kv, &n, 8);
    fr_buf_append(&g->kv, k, n);
    fr_buf_append(&g->kv, &type, 4);
    g->n_kv++;
}
static void gw_str(gw *g, const char *k, const char *v) {
    gw_key(g, k, FR_GGUF_STR);
    uint64_t n = strlen(v);
    fr_buf_append(&g->kv, &n, 8);
    fr_buf_append(&g->kv, v, n);
}
static void gw_u32(gw *g, const char *k, uint32_t v) {
    gw_key(g, k, FR_GGUF_U32);
    fr_buf_append(&g->kv, &v, 4);
}
static void gw_f32(gw *g, const char *k, float v) {
    gw_key(g, k, FR_GGUF_F32);
    fr_buf_append(&g->kv, &v, 4);
}
static void gw_bool(gw *g, const char *k, bool v) {
    gw_key(g, k, FR_GGUF_BOOL);
    uint8_t b = v;
    fr_buf_append(&g->kv, &b, 1);
}
static void gw_arr(gw *g, const char *k, uint32_t et, const void *v, uint64_t n) {
    gw_key(g, k, FR_GGUF_ARR);
    fr_buf_append(&g->kv, &et, 4);
    fr_buf_append(&g->kv, &n, 8);
    fr_buf_append(&g->kv, v, n * 4);
}
/* F32 tensor with ggml ne. */
static void gw_tensor(gw *g, const char *name, int nd, const int64_t *ne, const float *v) {
    uint64_t n = strlen(name), cnt = 1;
    fr_buf_append(&g->ti, &n, 8);
    fr_buf_append(&g->ti, name, n);
    uint32_t d = (uint32_t)nd, type = FR_GGML_F32;
    fr_buf_append(&g->ti, &d, 4);
    for (int i = 0; i < nd; i++) {
        uint64_t x = (uint64_t)ne[i];
        cnt *= x;
        fr_buf_append(&g->ti, &x, 8);
    }
    fr_buf_append(&g->ti, &type, 4);
    while (g->data.len % 32) fr_buf_append(&g->data, "", 1);
    uint64_t off = g->data.len;
    fr_buf_append(&g->ti, &off, 8);
    fr_buf_append(&g->data, v, cnt * 4);
    g->n_t++;
}
static void gw_write(gw *g, const char *path) {
    fr_buf o = {0};
    uint32_t ver = 3;
    fr_buf_append(&o, "GGUF", 4);
    fr_buf_append(&o, &ver, 4);
    fr_buf_append(&o, &g->n_t, 8);
    fr_buf_append(&o, &g->n_kv, 8);
    fr_buf_append(&o, g->kv.data, g->kv.len);
    fr_buf_append(&o, g->ti.data, g->ti.len);
    while (o.len % 32) fr_buf_append(&o, "", 1);
    fr_buf_append(&o, g->data.data, g->data.len);
    spit(path, o.data, o.len);
    fr_buf_free(&o);
    fr_buf_free(&g->kv), fr_buf_free(&g->ti), fr_buf_free(&g->data);
}

static const tw *find_tw(const tlist *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->t[i].name, name)) return &l->t[i];
    fprintf(stderr, "no tensor %s\n", name);
    abort();
}

/* The mmproj llama.cpp's converter writes for the old-named Qwen2.5-VL tensors of l. skip: a
 * tensor left out; projector: the type string. */
static void write_mmproj(const char *path, const tlist *l, const char *projector, const char *skip,
                         bool swap_ffn) {
    gw g = {0};
    gw_str(&g, "general.architecture", "clip");
    gw_str(&g, "clip.projector_type", projector);
    gw_bool(&g, "clip.has_vision_encoder", true);
    gw_bool(&g, "clip.use_silu", true);
    gw_u32(&g, "clip.vision.embedding_length", VH);
    gw_u32(&g, "clip.vision.feed_forward_length", VF);
    gw_u32(&g, "clip.vision.block_count", VDEPTH);
    gw_u32(&g, "clip.vision.attention.head_count", 2);
    gw_u32(&g, "clip.vision.patch_size", VP);
    gw_u32(&g, "clip.vision.image_size", 560);
    gw_u32(&g, "clip.vision.projection_dim", TE);
    gw_u32(&g, "clip.vision.window_size", 16);
    gw_u32(&g, "clip.vision.n_wa_pattern", 2); /* full attention at (b + 1) % 2 == 0: block 1 */
    gw_f32(&g, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    const float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
    const float sd[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    gw_arr(&g, "clip.vision.image_mean", FR_GGUF_F32, mean, 3);
    gw_arr(&g, "clip.vision.image_std", FR_GGUF_F32, sd, 3);
    /* patch: [O, C, T, P, P] -> per frame [O, C, P, P] (ggml ne {P, P, C, O}) */
    const tw *pe = find_tw(l, "visual.patch_embed.proj.weight");
    for (int t = 0; t < VT; t++) {
        float *f = fr_xmalloc((size_t)VH * 3 * VP * VP * 4);
        for (int o = 0; o < VH; o++)
            for (int c = 0; c < 3; c++)
                memcpy(f + ((size_t)o * 3 + c) * VP * VP,
                       pe->data + (((size_t)o * 3 + c) * VT + t) * VP * VP, VP * VP * 4);
        gw_tensor(&g, t ? "v.patch_embd.weight.1" : "v.patch_embd.weight", 4,
                  (int64_t[]){VP, VP, 3, VH}, f);
        free(f);
    }
    char n[128], hn[128];
    for (int b = 0; b < VDEPTH; b++) {
        snprintf(hn, sizeof hn, "visual.blocks.%d.attn.qkv.weight", b);
        const tw *qkv = find_tw(l, hn);
        snprintf(hn, sizeof hn, "visual.blocks.%d.attn.qkv.bias", b);
        const tw *qkvb = find_tw(l, hn);
        const char *qn[3] = {"attn_q", "attn_k", "attn_v"};
        for (int i = 0; i < 3; i++) {
            snprintf(n, sizeof n, "v.blk.%d.%s.weight", b, qn[i]);
            if (!skip || strcmp(skip, n))
                gw_tensor(&g, n, 2, (int64_t[]){VH, VH}, qkv->data + (size_t)i * VH * VH);
            snprintf(n, sizeof n, "v.blk.%d.%s.bias", b, qn[i]);
            gw_tensor(&g, n, 1, (int64_t[]){VH}, qkvb->data + (size_t)i * VH);
        }
        struct { const char *h, *g; } map[] = {
            {"norm1.weight", "ln1.weight"}, {"norm2.weight", "ln2.weight"},
            {"attn.proj.weight", "attn_out.weight"}, {"attn.proj.bias", "attn_out.bias"},
            {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.gate_proj.bias", "ffn_gate.bias"},
            {"mlp.up_proj.weight", "ffn_up.weight"}, {"mlp.up_proj.bias", "ffn_up.bias"},
            {"mlp.down_proj.weight", "ffn_down.weight"}, {"mlp.down_proj.bias", "ffn_down.bias"}};
        for (size_t i = 0; i < FR_ARRAY_LEN(map); i++) {
            snprintf(hn, sizeof hn, "visual.blocks.%d.%s", b, map[i].h);
            const char *gn = map[i].g;
            if (swap_ffn && !strncmp(gn, "ffn_up", 6))
                snprintf(n, sizeof n, "v.blk.%d.ffn_down%s", b, gn + 6);
            else if (swap_ffn && !strncmp(gn, "ffn_down", 8))
                snprintf(n, sizeof n, "v.blk.%d.ffn_up%s", b, gn + 8);
            else
                snprintf(n, sizeof n, "v.blk.%d.%s", b, gn);
            const tw *t = find_tw(l, hn);
            int64_t ne[2] = {t->nd > 1 ? t->shape[1] : t->shape[0], t->shape[0]};
            if (!skip || strcmp(skip, n)) gw_tensor(&g, n, t->nd, ne, t->data);
        }
    }
    struct { const char *h, *g; } mm[] = {{"visual.merger.ln_q.weight", "v.post_ln.weight"},
                                          {"visual.merger.mlp.0.weight", "mm.0.weight"},
                                          {"visual.merger.mlp.0.bias", "mm.0.bias"},
                                          {"visual.merger.mlp.2.weight", "mm.2.weight"},
                                          {"visual.merger.mlp.2.bias", "mm.2.bias"}};
    for (size_t i = 0; i < FR_ARRAY_LEN(mm); i++) {
        const tw *t = find_tw(l, mm[i].h);
        int64_t ne[2] = {t->nd > 1 ? t->shape[1] : t->shape[0], t->shape[0]};
        if (!skip || strcmp(skip, mm[i].g)) gw_tensor(&g, mm[i].g, t->nd, ne, t->data);
    }
    gw_write(&g, path);
}

/* The text fixture qwen2-tiny-f32.gguf as llama.cpp writes a Qwen2.5-VL text model: architecture
 * qwen2vl, its keys under qwen2vl., and rope.dimension_sections. */
static void write_text_gguf(const char *dst, const int32_t *sections) {
    char src[600];
    snprintf(src, sizeof src, "%s/qwen2-tiny-f32.gguf", t_fixtures());
    size_t n;
    fr_err e;
    uint8_t *p = (uint8_t *)fr_read_file(src, 1u << 28, &n, &e);
    FR_ASSERT(p);
    fr_gguf g;
    FR_ASSERT(fr_gguf_parse(&g, src, p, n, &e) == 0);
    gw w = {0};
    const uint8_t *kv_end = (const uint8_t *)g.tensors[0].name.p - 8;
    for (int64_t i = 0; i < g.n_kv; i++) {
        const fr_gguf_kv *kv = &g.kv[i];
        const uint8_t *vstart = (const uint8_t *)kv->key.p + kv->key.n; /* type + value */
        const uint8_t *end = i + 1 < g.n_kv ? (const uint8_t *)g.kv[i + 1].key.p - 8 : kv_end;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.n, kv->key.p);
        if (!strcmp(key, "general.architecture")) {
            gw_str(&w, key, "qwen2vl");
            continue;
        }
        char nk[300];
        if (!strncmp(key, "qwen2.", 6)) snprintf(nk, sizeof nk, "qwen2vl.%s", key + 6);
        else snprintf(nk, sizeof nk, "%s", key);
        uint64_t kn = strlen(nk);
        fr_buf_append(&w.kv, &kn, 8);
        fr_buf_append(&w.kv, nk, kn);
        fr_buf_append(&w.kv, vstart, (size_t)(end - vstart));
        w.n_kv++;
    }
    if (sections) gw_arr(&w, "qwen2vl.rope.dimension_sections", FR_GGUF_I32, sections, 4);
    for (int64_t i = 0; i < g.n_tensors; i++) {
        const fr_gguf_tensor *t = &g.tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.n, t->name.p);
        FR_ASSERT(t->type == FR_GGML_F32);
        gw_tensor(&w, name, t->n_dims, t->ne, (const float *)t->data);
    }
    gw_write(&w, dst);
    fr_gguf_free(&g);
    free(p);
}

TEST(gguf_text_plus_mmproj_equals_hf) {
    tlist l = {0};
    build(&l, FR_VISION_QWEN25VL, NAMES_OLD);
    char *hf = hf_folder("q25-ref", CFG25_FLAT, &l, ST_ONE, NULL);
    char *gdir = tmp_path("gguf-pair");
    mkdir(gdir, 0755);
    char text[800], mmproj[800];
    snprintf(text, sizeof text, "%s/Qwen2.5-VL-tiny-F32.gguf", gdir);
    snprintf(mmproj, sizeof mmproj, "%s/mmproj-Qwen2.5-VL-tiny-F32.gguf", gdir);
    const int32_t sec[4] = {2, 3, 3, 0};
    write_text_gguf(text, sec);
    write_mmproj(mmproj, &l, "qwen2.5vl_merger", NULL, false);
    fr_model *m = load_ok(text), *r = load_ok(hf);
    CHECK(m && m->vision && r && r->vision);
    if (m && m->vision && r && r->vision) {
        CHECK_STR(m->arch_name, "qwen2vl");
        CHECK_EQ_INT(m->hp.mrope_section[0], 2);
        CHECK_EQ_INT(m->hp.mrope_section[2], 3);
        CHECK_EQ_INT(m->hp.image_token_id, -1); /* the fixture's vocabulary has no vision tokens */
        const fr_vision_hparams *v = &m->vision->hp;
        CHECK_EQ_INT(v->kind, FR_VISION_QWEN25VL);
        CHECK_EQ_INT(v->temporal, 2);
        CHECK_EQ_INT(v->in_chans, 3);
        CHECK_EQ_INT(v->n_ff, VF);
        CHECK(!v->fullatt[0] && v->fullatt[1] && !v->fullatt[2]);
        CHECK(v->has_norm_stats);
        CHECK_NEAR(v->image_mean[0], 0.48145466, 1e-7);
        /* the joined patch kernel and qkv are HF's, bit for bit */
        CHECK(!memcmp(m->vision->patch_w.data, r->vision->patch_w.data, VH * VPD * 4));
        CHECK(!memcmp(m->vision->blocks[2].qkv_w.data, r->vision->blocks[2].qkv_w.data,
                      3 * VH * VH * 4));
        CHECK(!memcmp(m->vision->blocks[2].qkv_b.data, r->vision->blocks[2].qkv_b.data,
                      3 * VH * 4));
        float *px = pixels(NP2, "pixels");
        float *o1 = fr_xcalloc(NT2 * TE, 4), *o2 = fr_xcalloc(NT2 * TE, 4);
        fr_err e = {0};
        CHECK_EQ_INT(fr_vision_forward(m, NULL, px, NP2, GRID2, 2, o1, &e), 0);
        CHECK_EQ_INT(fr_vision_forward(r, NULL, px, NP2, GRID2, 2, o2, &e), 0);
        CHECK(!memcmp(o1, o2, NT2 * TE * 4));
        /* an older conversion with ffn_up / ffn_down swapped: the same tower */
        fr_model_free(m);
        write_mmproj(mmproj, &l, "qwen2.5vl_merger", NULL, true);
        m = load_ok(text);
        CHECK(m && m->vision);
        if (m && m->vision) {
            memset(o1, 0, NT2 * TE * 4);
            CHECK_EQ_INT(fr_vision_forward(m, NULL, px, NP2, GRID2, 2, o1, &e), 0);
            CHECK(!memcmp(o1, o2, NT2 * TE * 4));
        }
        free(px), free(o1), free(o2);
    }
    fr_model_free(m);
    fr_model_free(r);
    /* a missing vision tensor, a projector we do not know, a missing sections key */
    write_mmproj(mmproj, &l, "qwen2.5vl_merger", "v.blk.1.attn_k.weight", false);
    load_fails(text, FR_ERR_NOT_FOUND, "v.blk.1.attn_k.weight");
    write_mmproj(mmproj, &l, "qwen2.5vl_merger", "mm.2.weight", false);
    load_fails(text, FR_ERR_NOT_FOUND, "mm.2.weight");
    write_mmproj(mmproj, &l, "qwen3vl_merger", NULL, false);
    load_fails(text, FR_ERR_UNSUPPORTED, "qwen3vl_merger");
    load_fails(mmproj, FR_ERR_UNSUPPORTED, "mmproj");
    write_text_gguf(text, NULL);
    load_fails(text, FR_ERR_BAD_REQUEST, "rope.dimension_sections");
    /* without an mmproj next to it: the text model alone */
    write_text_gguf(text, sec);
    unlink(mmproj);
    m = load_ok(text);
    CHECK(m && !m->vision);
    fr_model_free(m);
    free(hf), free(gdir);
    list_free(&l);
}

static void cleanup(void) {
    if (!tmp_root[0]) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", tmp_root);
}

int main(void) {
    fr_log_level = FR_LOG_ERROR; /* no "loaded ..." lines, nor the expected no-mmproj warning */
    int rc = t_main();
    cleanup();
    return rc;
}

/* vl_e2e.c — the CUDA decoder's multimodal input (fr_batch.embd / embd_use / rope_pos) against
 * the CPU decoder, and the fixture qwen25vl-tiny end to end on CUDA (vision tower and decoder)
 * against HF; run by gpu-e2e (e2e.c) after the text fixtures.
 *
 * 1. A random Qwen2-shape model with M-RoPE (hidden 256, 4/2 heads, head_dim 64, sections
 *    [8, 12, 12], q/k/v biases), through the backend table on both devices with the same batches:
 *    a prompt of text, a 6x6 "image" of random embedding rows (t/h/w positions as get_rope_index
 *    gives them), text after it, prefilled in two chunks with every row's logits; then greedy
 *    decode steps at KV position p with rope position p + delta (delta < 0, HF's rope delta),
 *    the CPU fed its own argmax and CUDA the CPU's ids (teacher forcing); then a decode batch of
 *    two sequences (the image one and a text one with rope_pos = pos) through the graph buckets.
 *    Pass: every row's logits rel L2 < 2e-2 (4e-2 int8 KV) and the greedy ids of both devices
 *    equal at every step whose CPU top-2 margin is at least 4 x tol x the row's rms logit (at
 *    least 3 such steps of 9).
 *    Configurations: bf16 KV with graphs, int8 KV, graphs off.
 * 2. qwen25vl-tiny (tests/fixtures/ref/qwen25vl-tiny/ref.json cases, HF's pixel values) through
 *    frugal_generate_vl on device cuda: the prompt ids equal HF's, last logits rel L2 < 2e-2 vs
 *    HF, greedy ids equal HF's when the case's smallest greedy margin (ref.json) is >= 0.02
 *    (a smaller margin can flip in bf16: then the agreement is printed as a note).
 * A missing fixture file is a FAIL.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/base.h"
#include "base/npy.h"
#include "frugal.h"
#include "model/model.h"

int gpu_vl_checks(const char *fixtures, int *n_pass, int *n_fail);

static int *np_, *nf_;
static void verdict(bool ok, const char *name, const char *detail) {
    printf("%-4s %-52s %s\n", ok ? "ok" : "FAIL", name, detail);
    if (ok) (*np_)++;
    else (*nf_)++;
}

static double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : INFINITY;
}
static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.f - 1.f;
}

/* ---------------------------------------------------------------- 1. random M-RoPE model */
enum { E = 256, H = 4, HKV = 2, D = 64, F = 512, V = 500, L = 2 };

static fr_tensor mk(int ne0, int ne1, float amp, float off) {
    fr_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = FR_DTYPE_F32;
    t.n_dims = ne1 > 1 ? 2 : 1;
    t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = t.ne[3] = 1;
    const size_t n = (size_t)ne0 * ne1;
    float *d = malloc(n * 4);
    for (size_t i = 0; i < n; i++) d[i] = off + amp * frand();
    t.data = d;
    t.nbytes = n * 4;
    return t;
}

static fr_model *random_vl_model(void) {
    fr_model *m = calloc(1, sizeof *m);
    fr_hparams *hp = &m->hp;
    hp->arch = FR_ARCH_QWEN2;
    hp->n_vocab = V, hp->n_embd = E, hp->n_layer = L, hp->n_head = H, hp->n_head_kv = HKV;
    hp->head_dim = D, hp->n_ff = F, hp->n_ctx_train = 1024, hp->rms_eps = 1e-6f;
    hp->rope_theta = 1000000.f, hp->bos_id = hp->eos_id = -1;
    hp->mrope_section[0] = 8, hp->mrope_section[1] = 12, hp->mrope_section[2] = 12;
    hp->image_token_id = V - 1, hp->vision_start_id = hp->vision_end_id = -1;
    const float aw = sqrtf(3.f / E), af = sqrtf(3.f / F), ao = sqrtf(3.f / (H * D));
    m->w.tok_embd = mk(E, V, 1.f, 0.f);
    m->w.output_norm = mk(E, 1, 0.1f, 1.f);
    m->w.output = mk(E, V, aw, 0.f);
    m->w.layers = calloc(L, sizeof(fr_layer));
    for (int l = 0; l < L; l++) {
        fr_layer *ly = &m->w.layers[l];
        ly->attn_norm = mk(E, 1, 0.1f, 1.f);
        ly->ffn_norm = mk(E, 1, 0.1f, 1.f);
        ly->wq = mk(E, H * D, aw, 0.f);
        ly->wk = mk(E, HKV * D, aw, 0.f);
        ly->wv = mk(E, HKV * D, aw, 0.f);
        ly->wo = mk(H * D, E, ao, 0.f);
        ly->w_gate = mk(E, F, aw, 0.f);
        ly->w_up = mk(E, F, aw, 0.f);
        ly->w_down = mk(F, E, af, 0.f);
        ly->bq = mk(H * D, 1, 0.3f, 0.f);
        ly->bk = mk(HKV * D, 1, 0.3f, 0.f);
        ly->bv = mk(HKV * D, 1, 0.3f, 0.f);
    }
    return m;
}

static void random_vl_free(fr_model *m) {
    free((void *)m->w.tok_embd.data);
    free((void *)m->w.output_norm.data);
    free((void *)m->w.output.data);
    for (int l = 0; l < L; l++) {
        fr_layer *ly = &m->w.layers[l];
        fr_tensor *ts[] = {&ly->attn_norm, &ly->ffn_norm, &ly->wq, &ly->wk, &ly->wv, &ly->wo,
                           &ly->w_gate, &ly->w_up, &ly->w_down, &ly->bq, &ly->bk, &ly->bv};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) free((void *)ts[i]->data);
    }
    free(m->w.layers);
    free(m);
}

/* The prompt: 10 text tokens, a 6x6 image (36 rows of embd), 14 text tokens. rope_pos as HF's
 * get_rope_index: text i -> (i, i, i); image (r, c) -> (10, 10 + r, 10 + c); text after it
 * continues at max + 1 = 16. Returns the rope delta (max + 1 - n). */
enum { NT0 = 10, GR = 6, NT1 = 14, NP = NT0 + GR * GR + NT1, NDEC = 8 };
static int make_prompt(int32_t *tok, float *embd, uint8_t *use, int32_t *rp) {
    int n = 0;
    for (int i = 0; i < NT0; i++, n++) {
        frand();
        tok[n] = (int32_t)(rng % (V - 1)), use[n] = 0;
        rp[n] = rp[NP + n] = rp[2 * NP + n] = n;
    }
    for (int r = 0; r < GR; r++)
        for (int c = 0; c < GR; c++, n++) {
            tok[n] = V - 1, use[n] = 1;
            for (int k = 0; k < E; k++) embd[(size_t)n * E + k] = frand();
            rp[n] = NT0, rp[NP + n] = NT0 + r, rp[2 * NP + n] = NT0 + c;
        }
    const int base = NT0 + GR;
    for (int i = 0; i < NT1; i++, n++) {
        frand();
        tok[n] = (int32_t)(rng % (V - 1)), use[n] = 0;
        rp[n] = rp[NP + n] = rp[2 * NP + n] = base + i;
    }
    return base + NT1 - NP; /* max + 1 - n */
}

typedef struct vl_run {
    float *lg;       /* (NP, V) prefill logits of every row */
    float *dec;      /* (NDEC, V) decode logits */
    int ids[NDEC + 1]; /* greedy ids (argmax after the prompt and after each decode step) */
    float margin[NDEC + 1]; /* top-1 minus top-2 logit of those rows, over the row's rms logit */
    float *pair;     /* (2, V) the two-sequence decode step */
    float *text_ref; /* (V) the text sequence's logits at that step alone */
} vl_run;

/* Runs the prompt on backend be: prefill in two chunks (29 + 31 rows), NDEC decode steps fed
 * with its own argmax (feed NULL) or with feed's ids (the CPU's: a near-tie flipped in bf16 then
 * costs one step, not the rest), then a step of two sequences (the image one and a fresh text
 * one prefilled with rope_pos = pos). */
static int run_vl(fr_backend *be, const int32_t *tok, const float *embd, const uint8_t *use,
                  const int32_t *rp, int delta, const int *feed, vl_run *o, fr_err *err) {
    fr_kv_pool *kv = fr_backend_kv(be);
    fr_seq s, s2;
    memset(&s, 0, sizeof s);
    memset(&s2, 0, sizeof s2);
    int rc = -1;
    if (fr_seq_reserve(&s, kv, NP + NDEC + 2) || fr_seq_reserve(&s2, kv, 16)) {
        fr_err_set(err, "KV reserve failed");
        goto out;
    }
    int32_t pos[NP], rpc[3 * NP];
    fr_seq *sp[NP];
    for (int i = 0; i < NP; i++) pos[i] = i, sp[i] = &s;
    const int cut[3] = {0, 29, NP};
    for (int ci = 0; ci < 2; ci++) {
        const int a = cut[ci], n = cut[ci + 1] - a;
        for (int r = 0; r < 3; r++) memcpy(rpc + r * n, rp + r * NP + a, (size_t)n * 4);
        fr_batch b = {.n_tokens = n, .tokens = tok + a, .pos = pos + a, .seqs = sp,
                      .logits = NULL, .embd = embd + (size_t)a * E, .embd_use = use + a,
                      .rope_pos = rpc};
        if (fr_backend_forward(be, &b, o->lg + (size_t)a * V, err)) goto out;
    }
    const float *last = o->lg + (size_t)(NP - 1) * V;
    for (int g = 0; g <= NDEC; g++) {
        o->ids[g] = argmax(last, V);
        float second = -INFINITY;
        for (int i = 0; i < V; i++)
            if (i != o->ids[g] && last[i] > second) second = last[i];
        double ss = 0;
        for (int i = 0; i < V; i++) ss += (double)last[i] * last[i];
        o->margin[g] = (last[o->ids[g]] - second) / (float)sqrt(ss / V); /* in units of rms */
        if (g == NDEC) break;
        int32_t t = feed ? feed[g] : o->ids[g], p = s.n_pos, r3[3] = {p + delta, p + delta, p + delta};
        fr_seq *s1 = &s;
        uint8_t w = 1;
        fr_batch b = {.n_tokens = 1, .tokens = &t, .pos = &p, .seqs = &s1, .logits = &w,
                      .rope_pos = r3};
        if (fr_backend_forward(be, &b, o->dec + (size_t)g * V, err)) goto out;
        last = o->dec + (size_t)g * V;
    }
    { /* a text sequence (rope_pos = pos) of 5 tokens, then one step with both sequences */
        int32_t t5[5], p5[5], r5[15];
        fr_seq *sp5[5];
        for (int i = 0; i < 5; i++) t5[i] = tok[i], p5[i] = i, sp5[i] = &s2;
        for (int r = 0; r < 3; r++)
            for (int i = 0; i < 5; i++) r5[r * 5 + i] = i;
        uint8_t w5[5] = {0, 0, 0, 0, 1};
        fr_batch b5 = {.n_tokens = 5, .tokens = t5, .pos = p5, .seqs = sp5, .logits = w5,
                       .rope_pos = r5};
        if (fr_backend_forward(be, &b5, o->text_ref, err)) goto out;
        const int pa = s.n_pos, pb = s2.n_pos;
        int32_t tt[2] = {feed ? feed[NDEC] : argmax(last, V), tok[5]}, pp[2] = {pa, pb};
        int32_t rr[6] = {pa + delta, pb, pa + delta, pb, pa + delta, pb};
        fr_seq *ss[2] = {&s, &s2};
        fr_batch b = {.n_tokens = 2, .tokens = tt, .pos = pp, .seqs = ss, .logits = NULL,
                      .rope_pos = rr};
        if (fr_backend_forward(be, &b, o->pair, err)) goto out;
    }
    rc = 0;
out:
    fr_seq_release(&s, kv);
    fr_seq_release(&s2, kv);
    return rc;
}

static void check_random(const char *kv_type, int no_graphs) {
    fr_model *m = random_vl_model();
    int32_t tok[NP], rp[3 * NP];
    uint8_t use[NP];
    float *embd = malloc((size_t)NP * E * 4);
    const int delta = make_prompt(tok, embd, use, rp);
    vl_run r[2];
    for (int k = 0; k < 2; k++) {
        r[k].lg = malloc((size_t)NP * V * 4);
        r[k].dec = malloc((size_t)NDEC * V * 4);
        r[k].pair = malloc((size_t)2 * V * 4);
        r[k].text_ref = malloc((size_t)V * 4);
    }
    char name[120];
    snprintf(name, sizeof name, "vl decoder vs CPU (random E256 D64 mrope) kv=%s graphs=%d",
             kv_type, !no_graphs);
    fr_err err = {0};
    fr_backend_params pc = fr_backend_params_default();
    pc.max_ctx = 256;
    pc.max_tokens = 64;
    pc.kv_bytes = 8u << 20;
    fr_backend *cpu = fr_backend_new(m, &pc, &err);
    int rc = cpu ? run_vl(cpu, tok, embd, use, rp, delta, NULL, &r[1], &err) : -1;
    fr_backend_free(cpu);
    fr_backend_params p = fr_backend_params_default();
    p.device = "cuda";
    p.kv = kv_type;
    p.no_graphs = no_graphs;
    p.max_ctx = 256;
    p.max_tokens = 64;
    p.max_seqs = 4;
    p.kv_bytes = 16u << 20;
    fr_backend *gpu = rc == 0 ? fr_backend_new(m, &p, &err) : NULL;
    if (rc == 0 && !gpu) rc = -1;
    if (gpu) {
        rc = fr_backend_supports(gpu, FR_BOP_EMBD_INPUT) && fr_backend_supports(gpu, FR_BOP_MROPE)
                 ? run_vl(gpu, tok, embd, use, rp, delta, r[1].ids, &r[0], &err)
                 : (fr_err_set(&err, "cuda backend says it does not take embd / M-RoPE"), -1);
        fr_backend_free(gpu);
    }
    if (rc) {
        verdict(false, name, err.msg);
    } else {
        double wp = 0, wd = 0, wq = 0;
        const double tol = !strcmp(kv_type, "int8") ? 4e-2 : 2e-2;
        int ids_eq = 1, n_eq = 0, n_strict = 0;
        for (int i = 0; i < NP; i++)
            wp = fmax(wp, rel_l2(r[0].lg + (size_t)i * V, r[1].lg + (size_t)i * V, V));
        for (int g = 0; g < NDEC; g++)
            wd = fmax(wd, rel_l2(r[0].dec + (size_t)g * V, r[1].dec + (size_t)g * V, V));
        /* ids must agree where the CPU's top-2 margin is clear of the tolerated error: a logit's
         * error is about tol times the row's rms, so a margin of 4 tol rms cannot flip */
        for (int g = 0; g <= NDEC; g++) {
            const bool eq = r[0].ids[g] == r[1].ids[g];
            n_eq += eq;
            if (r[1].margin[g] >= 4 * tol) n_strict++, ids_eq &= eq;
        }
        for (int i = 0; i < 2; i++)
            wq = fmax(wq, rel_l2(r[0].pair + (size_t)i * V, r[1].pair + (size_t)i * V, V));
        wq = fmax(wq, rel_l2(r[0].text_ref, r[1].text_ref, V));
        char d[300];
        snprintf(d, sizeof d, "prefill rows %.2e, decode %.2e, 2-seq step %.2e (tol %.0e); "
                 "greedy ids %d/%d equal, %s where the margin >= 4 tol rms (%d steps, >= 3 "
                 "needed)", wp, wd, wq, tol, n_eq, NDEC + 1, ids_eq ? "all" : "NOT all", n_strict);
        verdict(wp <= tol && wd <= tol && wq <= tol && ids_eq && n_strict >= 3, name, d);
    }
    for (int k = 0; k < 2; k++) free(r[k].lg), free(r[k].dec), free(r[k].pair), free(r[k].text_ref);
    free(embd);
    random_vl_free(m);
}

/* A batch with rope_pos on the CUDA backend of a model without mrope_section is refused. */
static void check_refusal(void) {
    fr_model *m = random_vl_model();
    memset(m->hp.mrope_section, 0, sizeof m->hp.mrope_section);
    fr_err err = {0};
    fr_backend_params p = fr_backend_params_default();
    p.device = "cuda";
    p.max_ctx = 64;
    p.max_tokens = 16;
    p.max_seqs = 2;
    p.kv_bytes = 4u << 20;
    fr_backend *gpu = fr_backend_new(m, &p, &err);
    bool ok = false;
    if (gpu) {
        fr_seq s;
        memset(&s, 0, sizeof s);
        fr_seq_reserve(&s, fr_backend_kv(gpu), 4);
        int32_t t = 1, ps = 0, r3[3] = {0, 0, 0};
        fr_seq *sp = &s;
        float *lg = malloc((size_t)V * 4);
        fr_batch b = {.n_tokens = 1, .tokens = &t, .pos = &ps, .seqs = &sp, .rope_pos = r3};
        ok = fr_backend_forward(gpu, &b, lg, &err) == -1 && s.n_pos == 0;
        free(lg);
        fr_seq_release(&s, fr_backend_kv(gpu));
        fr_backend_free(gpu);
    }
    verdict(ok, "vl decoder: rope_pos without mrope_section refused", err.msg);
    random_vl_free(m);
}

/* ---------------------------------------------------------------- 2. qwen25vl-tiny vs HF */
static int ints(const cJSON *a, int32_t *out, int max) {
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (n == max) return -1;
        out[n++] = (int32_t)e->valueint;
    }
    return n;
}

static void check_fixture(const char *fixtures) {
    const char *model = "qwen25vl-tiny";
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/%s", fixtures, model);
    snprintf(path, sizeof path, "%s/ref/%s/ref.json", fixtures, model);
    size_t len = 0;
    fr_err fe = {0};
    char *txt = fr_read_file(path, 16u << 20, &len, &fe);
    cJSON *root = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    frugal_error e;
    frugal_model *fm = root ? frugal_model_load(dir, frugal_model_default_params(), &e) : NULL;
    frugal_context_params cp = frugal_context_default_params();
    cp.device = "cuda";
    frugal_context *ctx = fm ? frugal_context_new(fm, cp, &e) : NULL;
    if (!ctx) {
        verdict(false, "qwen25vl-tiny on cuda", !root ? "ref.json missing or unreadable" : e.message);
        cJSON_Delete(root);
        frugal_model_free(fm);
        return;
    }
    const cJSON *c;
    int n_cases = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
        enum { MAXI = 512 };
        static int32_t ids[MAXI], greedy[64], grid[24];
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "name"));
        const char *prompt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "prompt"));
        const char *pvf = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "pixel_values"));
        const char *llf = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "last_logits"));
        const cJSON *mg = cJSON_GetObjectItemCaseSensitive(c, "greedy_margin_min");
        const int n_ids = ints(cJSON_GetObjectItemCaseSensitive(c, "input_ids"), ids, MAXI);
        const int n_gr = ints(cJSON_GetObjectItemCaseSensitive(c, "greedy_ids"), greedy, 64);
        int n_img = 0;
        const cJSON *g;
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(c, "image_grid_thw")) {
            if (n_img < 8 && ints(g, grid + 3 * n_img, 3) == 3) n_img++;
        }
        char cname[120], d[300];
        snprintf(cname, sizeof cname, "qwen25vl-tiny on cuda: %s", name ? name : "?");
        fr_npy pv = {0}, ll = {0};
        fr_err ne = {0};
        bool files = llf && n_ids > 0 && n_gr >= 8;
        if (files && n_img) {
            snprintf(path, sizeof path, "%s/ref/%s/%s", fixtures, model, pvf ? pvf : "-");
            files = pvf && fr_npy_load_f32(path, &pv, &ne) == 0;
        }
        if (files) {
            snprintf(path, sizeof path, "%s/ref/%s/%s", fixtures, model, llf);
            files = fr_npy_load_f32(path, &ll, &ne) == 0;
        }
        if (!files) {
            verdict(false, cname, ne.msg[0] ? ne.msg : "case incomplete in ref.json");
            fr_npy_free(&pv);
            continue;
        }
        frugal_image ims[8];
        memset(ims, 0, sizeof ims);
        int64_t row = 0;
        for (int i = 0; i < n_img; i++) {
            ims[i].pixel_values = pv.data + row * pv.shape[1];
            ims[i].n_patches = (int64_t)grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2];
            ims[i].patch_dim = pv.shape[1];
            memcpy(ims[i].grid_thw, grid + 3 * i, 3 * sizeof(int));
            row += ims[i].n_patches;
        }
        frugal_vl_params vp = frugal_vl_default_params();
        vp.images = ims;
        vp.n_images = n_img;
        vp.want_last_logits = 1;
        frugal_generate_params gp = frugal_generate_default_params();
        gp.max_tokens = n_gr;
        gp.temperature = 0;
        gp.ignore_eos = 1;
        frugal_vl_result r;
        frugal_status st = frugal_generate_vl(ctx, prompt, &vp, &gp, &r, &e);
        if (st != FRUGAL_OK) {
            verdict(false, cname, e.message);
        } else {
            const bool ids_ok = r.n_prompt_ids == (size_t)n_ids &&
                                !memcmp(r.prompt_ids, ids, (size_t)n_ids * 4);
            const double l2 = ll.n == r.n_vocab ? rel_l2(r.last_logits, ll.data, (size_t)ll.n) : INFINITY;
            int agree = 0;
            for (int i = 0; i < n_gr && i < r.gen.n_ids; i++) agree += r.gen.ids[i] == greedy[i];
            const bool g_eq = r.gen.n_ids == n_gr && agree == n_gr;
            const bool strict = mg && mg->valuedouble >= 0.02;
            snprintf(d, sizeof d, "prompt ids %s, last logits vs HF %.2e (tol 2e-02), greedy "
                     "%d/%d equal%s", ids_ok ? "equal" : "DIFFER", l2, agree, n_gr,
                     strict ? "" : " (margin < 0.02: not required)");
            verdict(ids_ok && l2 <= 2e-2 && (g_eq || !strict), cname, d);
            frugal_vl_result_free(&r);
        }
        fr_npy_free(&pv);
        fr_npy_free(&ll);
        n_cases++;
    }
    if (n_cases < 3) verdict(false, "qwen25vl-tiny on cuda: cases", "fewer than 3 cases in ref.json");
    cJSON_Delete(root);
    frugal_context_free(ctx);
    frugal_model_free(fm);
}

int gpu_vl_checks(const char *fixtures, int *n_pass, int *n_fail) {
    np_ = n_pass, nf_ = n_fail;
    check_random("bf16", 0);
    check_random("int8", 0);
    check_random("bf16", 1);
    check_refusal();
    check_fixture(fixtures);
    return 0;
}

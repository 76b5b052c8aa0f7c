/* model.c — fr_model_load: HF folders and GGUF files into one fr_model (see model.h).
 *
 * Design: both formats are reduced to the same steps.
 *   1. hyperparameters (hfconfig.c for config.json; GGUF metadata here), range-checked;
 *   2. the tokenizer (tokenizer.json, or the GGUF vocabulary) and the chat-template strings;
 *   3. a job list: one entry per weight the decoder needs, with its GGUF-style canonical name,
 *      its name in the file and the shape the hyperparameters imply. Every job is resolved and
 *      checked (presence, shape, storage type) before any conversion starts, so a bad checkpoint
 *      fails fast and with one line naming the file and the tensor;
 *   4. materialisation: F32, Q8_0 and Q4_0 weights point into the memory map (copied only when
 *      the pointer is misaligned, e.g. a fuzzer's buffer); F16, BF16 and GGUF Q4_K/Q5_K/Q6_K are
 *      converted (dequantised) to F32 into buffers the model owns, in parallel slices, with a
 *      progress line on stderr for files over 1 GiB. Norms, biases and RoPE factors are always
 *      F32.
 * The memory maps move into the model and live until fr_model_free.
 */
#include "model/model.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/hfconfig.h"
#include "model/loader.h"
#include "model/quote.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"
#include "model/vision.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

/* ---- dtypes ---- */

int fr_dtype_block(fr_dtype t) {
    switch (t) {
    case FR_DTYPE_Q8_0: case FR_DTYPE_Q4_0: return 32;
    case FR_DTYPE_Q4_K: case FR_DTYPE_Q5_K: case FR_DTYPE_Q6_K: return 256;
    default: return 1;
    }
}

size_t fr_dtype_row_size(fr_dtype t, int64_t n) {
    switch (t) {
    case FR_DTYPE_F32: return (size_t)n * 4;
    case FR_DTYPE_F16: case FR_DTYPE_BF16: return (size_t)n * 2;
    case FR_DTYPE_Q8_0: return (size_t)(n / 32) * 34;
    case FR_DTYPE_Q4_0: return (size_t)(n / 32) * 18;
    case FR_DTYPE_Q4_K: return (size_t)(n / 256) * 144;
    case FR_DTYPE_Q5_K: return (size_t)(n / 256) * 176;
    case FR_DTYPE_Q6_K: return (size_t)(n / 256) * 210;
    default: return 0;
    }
}

const char *fr_dtype_name(fr_dtype t) {
    static const char *names[] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"};
    return (unsigned)t < FR_ARRAY_LEN(names) ? names[t] : "?";
}


/* ---- model storage ---- */

void fr_model_own(fr_model *m, void *p) {
    if (!p) return;
    if (m->n_owned == m->cap_owned) {
        m->cap_owned = m->cap_owned ? 2 * m->cap_owned : 64;
        m->owned = fr_xrealloc(m->owned, (size_t)m->cap_owned * sizeof *m->owned);
    }
    m->owned[m->n_owned++] = p;
}

static char *own_str(fr_model *m, const char *s) {
    char *p = fr_xstrdup(s);
    fr_model_own(m, p);
    return p;
}

void fr_model_free(fr_model *m) {
    if (!m) return;
    if (m->tok) fr_tokenizer_free(m->tok);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    for (int i = 0; i < m->n_maps; i++) fr_mmap_close(&m->maps[i]);
    free(m->maps);
    free(m->w.layers);
    if (m->vision) free(m->vision->blocks);
    free(m->vision);
    free(m->path);
    free(m->name);
    free(m->chat_template);
    free(m->bos_token_str);
    free(m->eos_token_str);
    free(m);
}

void fr_model_add_map(fr_model *m, fr_mmap map) {
    m->maps = fr_xrealloc(m->maps, (size_t)(m->n_maps + 1) * sizeof *m->maps);
    m->maps[m->n_maps++] = map;
}

void fr_model_release(fr_model *m, const void *p) {
    for (int i = 0; p && i < m->n_owned; i++) {
        if (m->owned[i] != p) continue;
        free(m->owned[i]);
        m->owned[i] = m->owned[--m->n_owned];
        return;
    }
}

/* Short name: the last path component without a trailing slash or ".gguf". */
static char *model_short_name(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    size_t len = n - b;
    if (len > 5 && !memcmp(path + n - 5, ".gguf", 5)) len -= 5;
    return len ? fr_xstrndup(path + b, len) : fr_xstrdup(path);
}

void fr_hparams_add_eos(fr_hparams *hp, int id) {
    if (id < 0 || id == hp->eos_id) return;
    for (size_t i = 0; i < sizeof hp->eos_ids / sizeof hp->eos_ids[0]; i++) {
        if (hp->eos_ids[i] == id) return;
        if (hp->eos_ids[i] < 0) {
            hp->eos_ids[i] = id;
            return;
        }
    }
}

/* ---- tensors as found in a file (types in model/loader.h) ---- */

static bool src_from_st(const fr_st_set *s, const char *name, fr_ld_src *o) {
    const fr_st_file *f;
    const fr_st_tensor *t = fr_st_set_find(s, name, &f);
    if (!t) return false;
    memset(o, 0, sizeof *o);
    o->file = f->path;
    o->name = t->name;
    o->hf_order = true;
    o->n_dims = t->n_dims;
    for (int i = 0; i < FR_MAX_DIMS; i++) o->ne[i] = 1;
    if (t->n_dims > FR_MAX_DIMS) { /* fold the innermost dimensions into ne[0] */
        int fold = t->n_dims - FR_MAX_DIMS + 1;
        o->n_dims = FR_MAX_DIMS;
        for (int i = t->n_dims - fold; i < t->n_dims; i++) o->ne[0] *= t->shape[i];
        for (int i = 1; i < FR_MAX_DIMS; i++) o->ne[i] = t->shape[t->n_dims - fold - i];
    } else {
        for (int i = 0; i < t->n_dims; i++) o->ne[i] = t->shape[t->n_dims - 1 - i];
    }
    o->n_elem = t->n_elem;
    o->type = t->dtype == FR_DTYPE_F32    ? FR_GGML_F32
              : t->dtype == FR_DTYPE_F16  ? FR_GGML_F16
              : t->dtype == FR_DTYPE_BF16 ? FR_GGML_BF16
                                          : SRC_UNSUPPORTED;
    o->type_name = t->dtype_name;
    o->data = t->data;
    o->nbytes = t->nbytes;
    return true;
}

static bool src_from_gguf(const fr_gguf *g, const char *name, fr_ld_src *o) {
    const fr_gguf_tensor *t = fr_gguf_find_tensor(g, name);
    if (!t) return false;
    memset(o, 0, sizeof *o);
    o->file = g->path;
    o->name = name;
    o->n_dims = t->n_dims;
    for (int i = 0; i < FR_MAX_DIMS; i++) o->ne[i] = t->ne[i];
    o->n_elem = t->n_elem;
    o->type = t->type;
    o->type_name = fr_ggml_type_name(t->type);
    o->data = t->data;
    o->nbytes = t->nbytes;
    return true;
}

bool fr_ld_has(const fr_loader *L, const char *name) {
    return L->st ? fr_st_set_find(L->st, name, NULL) != NULL
                 : fr_gguf_find_tensor(L->gg, name) != NULL;
}

static const char *shape_str(const fr_ld_src *s, const int64_t *ne, int n_dims, char *buf,
                             size_t cap) {
    int64_t v[FR_MAX_DIMS];
    for (int i = 0; i < n_dims; i++) v[i] = s->hf_order ? ne[n_dims - 1 - i] : ne[i];
    return fr_st_shape_str(v, n_dims, buf, cap);
}

fr_ld_job *fr_ld_add_job(fr_loader *L, fr_tensor *dst, const char *canon, const char *file_name,
                    int n_dims, int64_t ne0, int64_t ne1, bool required, bool force_f32) {
    if (L->n_jobs == L->cap_jobs) {
        L->cap_jobs = L->cap_jobs ? 2 * L->cap_jobs : 64;
        L->jobs = fr_xrealloc(L->jobs, (size_t)L->cap_jobs * sizeof *L->jobs);
    }
    fr_ld_job *j = &L->jobs[L->n_jobs++];
    memset(j, 0, sizeof *j);
    j->dst = dst;
    snprintf(j->canon, sizeof j->canon, "%s", canon);
    snprintf(j->file_name, sizeof j->file_name, "%s", file_name);
    j->n_dims = n_dims;
    j->ne[0] = ne0;
    j->ne[1] = ne1;
    j->ne[2] = j->ne[3] = 1;
    j->required = required;
    j->force_f32 = force_f32;
    return j;
}

static bool type_convertible(uint32_t t) { return t == FR_GGML_F16 || t == FR_GGML_BF16; }
/* Kept as stored: F32 and the GGUF block types (their rows are dequantised where used). */
static bool type_direct(uint32_t t) {
    return t == FR_GGML_F32 || t == FR_GGML_Q8_0 || t == FR_GGML_Q4_0 || t == FR_GGML_Q4_K ||
           t == FR_GGML_Q5_K || t == FR_GGML_Q6_K;
}
static fr_dtype direct_dtype(uint32_t t) {
    switch (t) {
    case FR_GGML_Q8_0: return FR_DTYPE_Q8_0;
    case FR_GGML_Q4_0: return FR_DTYPE_Q4_0;
    case FR_GGML_Q4_K: return FR_DTYPE_Q4_K;
    case FR_GGML_Q5_K: return FR_DTYPE_Q5_K;
    case FR_GGML_Q6_K: return FR_DTYPE_Q6_K;
    default: return FR_DTYPE_F32;
    }
}

/* Find and check one job: presence, shape, storage type. */
static int resolve_job(fr_loader *L, fr_ld_job *j, fr_err *err) {
    bool ok = L->st ? src_from_st(L->st, j->file_name, &j->src)
                    : src_from_gguf(L->gg, j->file_name, &j->src);
    if (!ok) {
        if (!j->required) return 0;
        fr_err_setc(err, FR_ERR_NOT_FOUND, "%s: tensor '%s' not found", L->where, j->file_name);
        return -1;
    }
    const fr_ld_src *s = &j->src;
    bool shape_ok = s->n_dims >= j->n_dims;
    if (j->flatten) { /* outermost dimensions equal, the others multiply to the same count */
        int64_t want = 1;
        for (int i = 0; i < j->n_dims - 1; i++) want *= j->ne[i];
        int64_t outer = j->ne[j->n_dims - 1];
        shape_ok = s->n_dims >= 1 && s->ne[s->n_dims - 1] == outer && s->n_elem == want * outer;
    }
    for (int i = 0; !j->flatten && shape_ok && i < s->n_dims; i++)
        shape_ok = s->ne[i] == (i < j->n_dims ? j->ne[i] : 1);
    if (!shape_ok) {
        char a[96], b[96];
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s' has shape %s, expected %s", s->file,
                    j->file_name,
                   shape_str(s, s->ne, s->n_dims, a, sizeof a),
                   shape_str(s, j->ne, j->n_dims, b, sizeof b));
        return -1;
    }
    if (!type_direct(s->type) && !type_convertible(s->type)) {
        fr_err_set(err, "%s: tensor '%s' has type %s, which is not supported (supported: F32, "
                        "F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)", s->file, j->file_name,
                   s->type_name ? s->type_name : "?");
        return -1;
    }
    j->found = true;
    return 0;
}

static bool job_converts(const fr_ld_job *j) {
    return j->found && (type_convertible(j->src.type) || (j->force_f32 && j->src.type != FR_GGML_F32));
}

/* ---- conversion ---- */

typedef struct conv_task {
    uint32_t type;       /* source ggml type */
    const uint8_t *src;  /* first source byte of this slice */
    float *dst;          /* first output element */
    int64_t n;           /* elements */
} conv_task;

static void *conv_thread(void *arg) {
    conv_task *t = arg;
    fr_ggml_to_f32(t->type, t->src, t->dst, t->n);
    return NULL;
}

/* Convert n elements on up to `nt` threads, split at 256-element boundaries. */
static void convert_parallel(uint32_t type, const uint8_t *src, float *dst, int64_t n) {
    int blck = fr_ggml_block_elems(type), bb = fr_ggml_block_bytes(type);
    int nt = FR_MIN(fr_n_cores(), 16);
    if (n < (1 << 20) || nt <= 1) {
        fr_ggml_to_f32(type, src, dst, n);
        return;
    }
    conv_task tasks[16];
    pthread_t th[16];
    bool started[16] = {false};
    int64_t per = (n / nt + 255) / 256 * 256, at = 0;
    int k = 0;
    for (; k < nt && at < n; k++) {
        int64_t cnt = FR_MIN(per, n - at);
        tasks[k] = (conv_task){type, src + (size_t)(at / blck) * (size_t)bb, dst + at, cnt};
        at += cnt;
        started[k] = pthread_create(&th[k], NULL, conv_thread, &tasks[k]) == 0;
        if (!started[k]) conv_thread(&tasks[k]);
    }
    for (int i = 0; i < k; i++)
        if (started[i]) pthread_join(th[i], NULL);
}

static void progress_update(fr_loader *L, size_t add) {
    L->conv_done += add;
    if (!L->progress || !L->conv_total) return;
    int pct = (int)(100.0 * (double)L->conv_done / (double)L->conv_total);
    int step = L->tty ? 1 : 10;
    if (pct / step == L->last_pct / step && L->last_pct >= 0) return;
    L->last_pct = pct;
    fprintf(stderr, "%sfrugal: converting weights to F32: %3d%% (%.0f / %.0f MiB)%s",
            L->tty ? "\r" : "", pct, (double)L->conv_done / MIB, (double)L->conv_total / MIB,
            L->tty ? (pct >= 100 ? "\n" : "") : "\n");
    fflush(stderr);
}

/* Fill j->dst from the resolved source. */
static int materialise(fr_loader *L, fr_ld_job *j, fr_err *err) {
    const fr_ld_src *s = &j->src;
    fr_tensor *t = j->dst;
    memset(t, 0, sizeof *t);
    t->name = own_str(L->m, j->canon);
    t->n_dims = j->n_dims;
    for (int i = 0; i < FR_MAX_DIMS; i++) t->ne[i] = j->ne[i];
    if (job_converts(j)) {
        size_t bytes = (size_t)s->n_elem * sizeof(float);
        float *buf = malloc(bytes ? bytes : 1);
        if (!buf) {
            fr_err_set(err, "%s: out of memory converting tensor '%s' to F32 (%.0f MiB)",
                       s->file, j->file_name, (double)bytes / MIB);
            return -1;
        }
        fr_model_own(L->m, buf);
        /* slices of 16M elements so progress moves on big tensors */
        int blck = fr_ggml_block_elems(s->type), bb = fr_ggml_block_bytes(s->type);
        const int64_t slice = 16 << 20;
        for (int64_t at = 0; at < s->n_elem; at += slice) {
            int64_t cnt = FR_MIN(slice, s->n_elem - at);
            convert_parallel(s->type, s->data + (size_t)(at / blck) * (size_t)bb, buf + at, cnt);
            progress_update(L, (size_t)cnt * sizeof(float));
        }
        t->dtype = FR_DTYPE_F32;
        t->data = buf;
        t->nbytes = bytes;
        return 0;
    }
    t->dtype = direct_dtype(s->type);
    t->nbytes = s->nbytes;
    size_t align = s->type == FR_GGML_F32 ? 4 : 2;
    if ((uintptr_t)s->data % align) {
        void *buf = malloc(s->nbytes ? s->nbytes : 1);
        if (!buf) {
            fr_err_set(err, "%s: out of memory copying tensor '%s'", s->file, j->file_name);
            return -1;
        }
        memcpy(buf, s->data, s->nbytes);
        fr_model_own(L->m, buf);
        t->data = buf;
    } else {
        t->data = s->data;
    }
    return 0;
}

/* The standard job list for both formats. hf: HF names under the prefix `hf` ("model." or, for
 * the VL models of transformers 5, "model.language_model."), else GGUF names (hf NULL).
 * `want_output`: 1 required, 0 skip (tied), -1 optional (absent -> tied). */
static void plan_jobs(fr_loader *L, const char *hf, int want_output) {
    fr_model *m = L->m;
    const fr_hparams *hp = &m->hp;
    fr_weights *w = &m->w;
    int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    int64_t Q = (int64_t)hp->n_head * hp->head_dim, KV = (int64_t)hp->n_head_kv * hp->head_dim;
    char hname[128];
    snprintf(hname, sizeof hname, "%sembed_tokens.weight", hf ? hf : "");
    fr_ld_add_job(L, &w->tok_embd, "token_embd.weight", hf ? hname : "token_embd.weight", 2, E, V,
                  true, false);
    bool bias_req = hp->arch == FR_ARCH_QWEN2;
    for (int l = 0; l < hp->n_layer; l++) {
        fr_layer *ly = &w->layers[l];
        struct {
            fr_tensor *dst;
            const char *g, *h; /* GGUF suffix, HF suffix */
            int nd;
            int64_t ne0, ne1;
            int req;  /* 1 required, 0 optional */
            bool f32;
        } t[] = {
            {&ly->attn_norm, "attn_norm.weight", "input_layernorm.weight", 1, E, 1, 1, true},
            {&ly->wq, "attn_q.weight", "self_attn.q_proj.weight", 2, E, Q, 1, false},
            {&ly->wk, "attn_k.weight", "self_attn.k_proj.weight", 2, E, KV, 1, false},
            {&ly->wv, "attn_v.weight", "self_attn.v_proj.weight", 2, E, KV, 1, false},
            {&ly->bq, "attn_q.bias", "self_attn.q_proj.bias", 1, Q, 1, bias_req, true},
            {&ly->bk, "attn_k.bias", "self_attn.k_proj.bias", 1, KV, 1, bias_req, true},
            {&ly->bv, "attn_v.bias", "self_attn.v_proj.bias", 1, KV, 1, bias_req, true},
            {&ly->wo, "attn_output.weight", "self_attn.o_proj.weight", 2, Q, E, 1, false},
            {&ly->ffn_norm, "ffn_norm.weight", "post_attention_layernorm.weight", 1, E, 1, 1, true},
            {&ly->w_gate, "ffn_gate.weight", "mlp.gate_proj.weight", 2, E, F, 1, false},
            {&ly->w_up, "ffn_up.weight", "mlp.up_proj.weight", 2, E, F, 1, false},
            {&ly->w_down, "ffn_down.weight", "mlp.down_proj.weight", 2, F, E, 1, false},
        };
        for (size_t i = 0; i < FR_ARRAY_LEN(t); i++) {
            char canon[64], fname[128];
            snprintf(canon, sizeof canon, "blk.%d.%s", l, t[i].g);
            if (hf) snprintf(fname, sizeof fname, "%slayers.%d.%s", hf, l, t[i].h);
            else snprintf(fname, sizeof fname, "%s", canon);
            fr_ld_add_job(L, t[i].dst, canon, fname, t[i].nd, t[i].ne0, t[i].ne1, t[i].req, t[i].f32);
        }
    }
    snprintf(hname, sizeof hname, "%snorm.weight", hf ? hf : "");
    fr_ld_add_job(L, &w->output_norm, "output_norm.weight", hf ? hname : "output_norm.weight", 1, E,
                  1, true, true);
    if (want_output)
        fr_ld_add_job(L, &w->output, "output.weight", hf ? "lm_head.weight" : "output.weight", 2, E, V,
                want_output > 0, false);
}

/* Resolve all jobs, then convert/point. On success fills the derived model fields. */
int fr_ld_run_jobs(fr_loader *L, size_t file_bytes, fr_err *err) {
    for (int i = 0; i < L->n_jobs; i++)
        if (resolve_job(L, &L->jobs[i], err) != 0) return -1;
    L->conv_total = 0;
    for (int i = 0; i < L->n_jobs; i++)
        if (job_converts(&L->jobs[i])) L->conv_total += (size_t)L->jobs[i].src.n_elem * 4;
    L->progress = (double)file_bytes > GIB;
    L->tty = isatty(2);
    L->last_pct = -1;
    for (int i = 0; i < L->n_jobs; i++)
        if (L->jobs[i].found && materialise(L, &L->jobs[i], err) != 0) return -1;
    if (L->progress && L->tty && L->last_pct >= 0 && L->last_pct < 100) fputc('\n', stderr);
    return 0;
}

/* weight_bytes, n_params, tied output. */
static void finish_weights(fr_model *m) {
    fr_weights *w = &m->w;
    if (!fr_tensor_present(&w->output)) {
        w->output = w->tok_embd;
        m->hp.tied_embeddings = true;
    } else {
        m->hp.tied_embeddings = false;
    }
    size_t bytes = w->output_norm.nbytes + w->output.nbytes;
    int64_t params = fr_tensor_nelem(&w->tok_embd) + fr_tensor_nelem(&w->output_norm);
    if (!m->hp.tied_embeddings) params += fr_tensor_nelem(&w->output);
    bytes += w->tok_embd.nbytes / (size_t)FR_MAX(1, w->tok_embd.ne[1]); /* one embedding row */
    for (int l = 0; l < m->hp.n_layer; l++) {
        const fr_tensor *ts[] = {&w->layers[l].attn_norm, &w->layers[l].wq, &w->layers[l].wk,
                                 &w->layers[l].wv, &w->layers[l].bq, &w->layers[l].bk,
                                 &w->layers[l].bv, &w->layers[l].wo, &w->layers[l].ffn_norm,
                                 &w->layers[l].w_gate, &w->layers[l].w_up, &w->layers[l].w_down};
        for (size_t i = 0; i < FR_ARRAY_LEN(ts); i++) {
            if (!fr_tensor_present(ts[i])) continue;
            bytes += ts[i]->nbytes;
            params += fr_tensor_nelem(ts[i]);
        }
    }
    m->weight_bytes = bytes;
    m->n_params = params;
}

static void log_loaded(const fr_model *m) {
    double p = (double)m->n_params;
    fr_info("loaded %s: %s, %d layers, %.2f%s params, %.1f MiB of weights per token, %.2f s",
            m->name, m->arch_name, m->hp.n_layer, p >= 1e9 ? p / 1e9 : p / 1e6,
            p >= 1e9 ? "B" : "M", (double)m->weight_bytes / MIB, m->load_seconds);
}

static fr_model *model_new(const char *path) {
    fr_model *m = fr_xcalloc(1, sizeof *m);
    m->path = fr_xstrdup(path);
    m->name = model_short_name(path);
    m->hp.bos_id = m->hp.eos_id = -1;
    for (int i = 0; i < 4; i++) m->hp.eos_ids[i] = -1;
    m->hp.image_token_id = m->hp.video_token_id = m->hp.vision_start_id = m->hp.vision_end_id = -1;
    return m;
}

/* Checks a tokenizer against the embedding. */
static int check_tokenizer(fr_model *m, const char *file, fr_err *err) {
    int n = fr_tokenizer_n_vocab(m->tok);
    if (n > m->hp.n_vocab) {
        fr_err_set(err, "%s: the tokenizer has %d tokens but the model's embedding has only %d "
                        "rows", file, n, m->hp.n_vocab);
        return -1;
    }
    return 0;
}

/* ---- HF folders ---- */

static fr_model *load_hf(const char *dir, fr_err *err) {
    double t0 = fr_time_s();
    fr_hf_config cfg;
    if (fr_hf_config_load(&cfg, dir, err) != 0) return NULL;
    fr_st_set st;
    if (fr_st_set_open(&st, dir, err) != 0) {
        fr_hf_config_free(&cfg);
        return NULL;
    }
    fr_model *m = model_new(dir);
    fr_loader L = {.m = m, .where = st.where, .st = &st};
    m->hp = cfg.hp;
    int tie = cfg.tie;
    m->arch_name = m->hp.arch == FR_ARCH_QWEN2 ? "qwen2" : "llama";
    m->chat_template = cfg.chat_template;
    m->bos_token_str = cfg.bos_token_str;
    m->eos_token_str = cfg.eos_token_str;
    m->w.rope_freq_factors = cfg.rope_freq_factors;
    fr_model_own(m, cfg.rope_freq_factors);
    fr_vision_hparams *vision_hp = cfg.vision; /* owned by the model until the jobs are planned */
    fr_model_own(m, vision_hp);
    if (vision_hp) m->arch_name = vision_hp->kind == FR_VISION_QWEN25VL ? "qwen2.5-vl" : "qwen2-vl";
    cfg.chat_template = cfg.bos_token_str = cfg.eos_token_str = NULL;
    cfg.rope_freq_factors = NULL;
    cfg.vision = NULL;
    fr_hf_config_free(&cfg);

    char *tj = fr_path_join(dir, "tokenizer.json");
    if (!fr_path_exists(tj)) {
        fr_err_setc(err, FR_ERR_NOT_FOUND, "%s: not found (the model folder needs its tokenizer)",
                    tj);
        goto fail_tj;
    }
    m->tok = fr_tokenizer_load_json(tj, err); /* its messages name the file */
    if (!m->tok) goto fail_tj;
    if (check_tokenizer(m, tj, err) != 0) goto fail_tj;
    /* tokenizer_config's eos_token ends generation too (e.g. <|im_end|> of instruct models) */
    int eos_tok = m->eos_token_str ? fr_tokenizer_find(m->tok, m->eos_token_str) : -1;
    if (m->hp.eos_id < 0) m->hp.eos_id = eos_tok >= 0 ? eos_tok : fr_tokenizer_eos(m->tok);
    else fr_hparams_add_eos(&m->hp, eos_tok);
    free(tj);

    /* a video id past the vocabulary (HF's default on a small model) can never occur */
    if (m->hp.video_token_id >= m->hp.n_vocab) m->hp.video_token_id = -1;
    const int vl_ids[] = {m->hp.image_token_id, m->hp.vision_start_id, m->hp.vision_end_id};
    for (size_t i = 0; i < FR_ARRAY_LEN(vl_ids); i++)
        if (vl_ids[i] >= m->hp.n_vocab) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s/config.json: vision token id %d is outside the "
                        "vocabulary (%d)", dir, vl_ids[i], m->hp.n_vocab);
            goto fail;
        }
    m->w.layers = fr_xcalloc((size_t)m->hp.n_layer, sizeof *m->w.layers);
    /* tie_word_embeddings: true -> lm_head ignored; false -> required; unset -> tied iff absent */
    /* transformers 5 keeps a VL model's text weights under model.language_model. */
    const char *prefix = fr_ld_has(&L, "model.language_model.embed_tokens.weight")
                             ? "model.language_model." : "model.";
    plan_jobs(&L, prefix, tie == 1 ? 0 : tie == 0 ? 1 : -1);
    if (vision_hp) {
        m->vision = fr_xcalloc(1, sizeof *m->vision);
        m->vision->hp = *vision_hp;
        fr_vision_plan_hf(&L, m->vision);
    }
    if (fr_ld_run_jobs(&L, fr_st_set_bytes(&st), err) != 0) goto fail;
    finish_weights(m);
    if (m->vision) {
        fr_vision_finish(m->vision);
        m->n_params += m->vision->n_params;
    }
    /* keep the maps that weights point into; a BF16/F16 checkpoint needs none after conversion */
    for (int i = 0; i < st.n_files; i++) {
        uintptr_t lo = (uintptr_t)st.files[i].data, hi = lo + st.files[i].size;
        bool used = false;
        for (int j = 0; j < L.n_jobs && !used; j++) {
            uintptr_t d = L.jobs[j].found ? (uintptr_t)L.jobs[j].dst->data : 0;
            used = d >= lo && d < hi;
        }
        if (!used) continue; /* unmapped by fr_st_set_close */
        fr_model_add_map(m, st.files[i].map);
        memset(&st.files[i].map, 0, sizeof st.files[i].map);
    }
    fr_st_set_close(&st);
    free(L.jobs);
    m->load_seconds = fr_time_s() - t0;
    log_loaded(m);
    return m;
fail_tj:
    free(tj);
fail:
    free(L.jobs);
    fr_st_set_close(&st);
    fr_model_free(m);
    return NULL;
}

/* ---- GGUF ---- */

/* "{arch}.suffix" */
static const char *akey(char *buf, size_t cap, const char *arch, const char *suffix) {
    snprintf(buf, cap, "%s.%s", arch, suffix);
    return buf;
}

static int gguf_req_int(const fr_gguf *g, const char *key, int64_t lo, int64_t hi, int *out,
                        fr_err *err) {
    int64_t v;
    int rc = fr_gguf_get_int(g, key, lo, hi, &v, err);
    if (rc < 0) return -1;
    if (rc == 1) {
        fr_err_set(err, "%s: missing metadata '%s'", g->path, key);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int gguf_hparams(fr_model *m, const fr_gguf *g, fr_err *err) {
    fr_hparams *hp = &m->hp;
    int rc;
    char *arch = fr_gguf_get_strdup(g, "general.architecture", &rc, err);
    if (rc == 1) fr_err_set(err, "%s: missing metadata 'general.architecture'", g->path);
    if (!arch) return -1;
    if (!strcmp(arch, "qwen2")) {
        hp->arch = FR_ARCH_QWEN2;
        m->arch_name = "qwen2";
    } else if (!strcmp(arch, "qwen2vl")) { /* llama.cpp's Qwen2-VL / Qwen2.5-VL text model */
        hp->arch = FR_ARCH_QWEN2;
        m->arch_name = "qwen2vl";
    } else if (!strcmp(arch, "clip")) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: architecture 'clip' is a vision projector "
                    "(mmproj); load the text GGUF next to it", g->path);
        free(arch);
        return -1;
    } else if (!strcmp(arch, "llama")) {
        hp->arch = FR_ARCH_LLAMA;
        m->arch_name = "llama";
    } else {
        char q[128];
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: unsupported architecture '%s' (supported: "
                    "qwen2, qwen2vl, llama)", g->path, fr_quotez(arch, q, sizeof q));
        free(arch);
        return -1;
    }
    free(arch);
    const char *a = m->arch_name;
    char k[128];
    int64_t v;
    if (gguf_req_int(g, akey(k, sizeof k, a, "embedding_length"), 1, 1 << 20, &hp->n_embd, err) ||
        gguf_req_int(g, akey(k, sizeof k, a, "block_count"), 1, 4096, &hp->n_layer, err) ||
        gguf_req_int(g, akey(k, sizeof k, a, "feed_forward_length"), 1, 1 << 22, &hp->n_ff, err) ||
        gguf_req_int(g, akey(k, sizeof k, a, "attention.head_count"), 1, 4096, &hp->n_head, err))
        return -1;
    rc = fr_gguf_get_int(g, akey(k, sizeof k, a, "attention.head_count_kv"), 1, hp->n_head, &v, err);
    if (rc < 0) return -1;
    hp->n_head_kv = rc == 0 ? (int)v : hp->n_head;
    if (hp->n_head % hp->n_head_kv) {
        fr_err_set(err, "%s: head_count %d is not a multiple of head_count_kv %d", g->path,
                   hp->n_head, hp->n_head_kv);
        return -1;
    }
    rc = fr_gguf_get_int(g, akey(k, sizeof k, a, "attention.key_length"), 2, 4096, &v, err);
    if (rc < 0) return -1;
    hp->head_dim = rc == 0 ? (int)v : hp->n_embd / hp->n_head;
    if (hp->head_dim < 2 || hp->head_dim % 2) {
        fr_err_set(err, "%s: head dimension %d must be even and >= 2", g->path, hp->head_dim);
        return -1;
    }
    rc = fr_gguf_get_int(g, akey(k, sizeof k, a, "attention.value_length"), 1, 4096, &v, err);
    if (rc < 0) return -1;
    if (rc == 0 && v != hp->head_dim) {
        fr_err_set(err, "%s: attention.value_length %lld differs from key_length %d (not "
                        "supported)", g->path, (long long)v, hp->head_dim);
        return -1;
    }
    rc = fr_gguf_get_int(g, akey(k, sizeof k, a, "rope.dimension_count"), 1, 4096, &v, err);
    if (rc < 0) return -1;
    if (rc == 0 && v != hp->head_dim) {
        fr_err_set(err, "%s: rope.dimension_count %lld differs from the head dimension %d "
                        "(partial rotary embeddings are not supported)", g->path, (long long)v,
                   hp->head_dim);
        return -1;
    }
    rc = fr_gguf_get_int(g, akey(k, sizeof k, a, "context_length"), 1, INT32_MAX, &v, err);
    if (rc < 0) return -1;
    hp->n_ctx_train = rc == 0 ? (int)v : 2048;
    double d;
    rc = fr_gguf_get_float(g, akey(k, sizeof k, a, "rope.freq_base"), &d, err);
    if (rc < 0) return -1;
    if (rc == 1) d = 10000.0;
    if (!(d > 0)) {
        fr_err_set(err, "%s: %s must be positive", g->path, k);
        return -1;
    }
    hp->rope_theta = (float)d;
    rc = fr_gguf_get_float(g, akey(k, sizeof k, a, "attention.layer_norm_rms_epsilon"), &d, err);
    if (rc < 0) return -1;
    if (rc == 1) {
        fr_err_set(err, "%s: missing metadata '%s'", g->path, k);
        return -1;
    }
    if (!(d > 0)) {
        fr_err_set(err, "%s: %s must be positive", g->path, k);
        return -1;
    }
    hp->rms_eps = (float)d;
    fr_gguf_str st;
    rc = fr_gguf_get_str(g, akey(k, sizeof k, a, "rope.scaling.type"), &st, err);
    if (rc < 0) return -1;
    if (rc == 0 && !(st.n == 4 && !memcmp(st.p, "none", 4)) && st.n) {
        char q[80];
        fr_err_set(err, "%s: unsupported rope scaling type '%s' (supported: none; llama3 "
                        "scaling comes as rope_freqs.weight)", g->path, fr_quote(st.p, st.n, q, sizeof q));
        return -1;
    }
    if (!strcmp(m->arch_name, "qwen2vl")) { /* M-RoPE sections, written as 4 (the last 0) */
        int32_t *sec = NULL;
        int64_t ns = 0;
        rc = fr_gguf_get_i32_array(g, akey(k, sizeof k, a, "rope.dimension_sections"), &sec, &ns,
                                   err);
        if (rc < 0) return -1;
        if (rc == 1) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: missing metadata '%s'", g->path, k);
            return -1;
        }
        bool ok = ns >= 3 && ns <= 4 && (ns < 4 || sec[3] == 0);
        for (int i = 0; ok && i < 3; i++) ok = sec[i] >= 0;
        if (ok) ok = sec[0] + sec[1] + sec[2] == hp->head_dim / 2;
        if (ok) memcpy(hp->mrope_section, sec, 3 * sizeof(int));
        free(sec);
        if (!ok) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: %s must be three non-negative sections (and a "
                        "0) summing to head_dim / 2 = %d", g->path, k, hp->head_dim / 2);
            return -1;
        }
    }
    /* llama.cpp's converter permutes Llama Q/K rows so RoPE rotates adjacent pairs */
    hp->rope_interleaved = hp->arch == FR_ARCH_LLAMA;
    const fr_gguf_tensor *te = fr_gguf_find_tensor(g, "token_embd.weight");
    if (!te) {
        fr_err_set(err, "%s: tensor 'token_embd.weight' not found", g->path);
        return -1;
    }
    if (te->n_dims != 2 || te->ne[0] != hp->n_embd || te->ne[1] > (1 << 24)) {
        fr_err_set(err, "%s: tensor 'token_embd.weight' has shape [%lld, %lld], expected [%d, "
                        "n_vocab <= %d]", g->path, (long long)te->ne[0], (long long)te->ne[1],
                   hp->n_embd, 1 << 24);
        return -1;
    }
    hp->n_vocab = (int)te->ne[1];
    return 0;
}

/* A token string from the vocabulary as a C string (NULL if it holds a NUL byte). */
static char *token_dup(const char *p, size_t n) {
    return memchr(p, 0, n) ? NULL : fr_xstrndup(p, n);
}

/* The SentencePiece keys of a `llama` tokenizer: scores (one per token), add_space_prefix,
 * add_eos_token. *scores is malloc'd (NULL when absent). */
static int gguf_spm_keys(const fr_gguf *g, fr_vocab_spec *spec, int64_t ntok, float **scores,
                         fr_err *err) {
    int64_t n = 0;
    bool b;
    int rc = fr_gguf_get_f32_array(g, "tokenizer.ggml.scores", scores, &n, err);
    if (rc < 0) return -1;
    if (rc == 0 && n != ntok) {
        fr_err_set(err, "%s: tokenizer.ggml.scores has %lld entries, tokens has %lld", g->path,
                   (long long)n, (long long)ntok);
        return -1;
    }
    spec->scores = *scores;
    if ((rc = fr_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b, err)) < 0) return -1;
    if (rc == 0) spec->no_space_prefix = !b;
    if ((rc = fr_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b, err)) < 0) return -1;
    if (rc == 0) spec->add_eos = b;
    return 0;
}

static int gguf_tokenizer(fr_model *m, const fr_gguf *g, fr_err *err) {
    int rc;
    fr_vocab_spec spec;
    memset(&spec, 0, sizeof spec);
    const char **toks = NULL, **merges = NULL;
    size_t *tlens = NULL, *mlens = NULL;
    int32_t *types = NULL;
    float *scores = NULL;
    char *model = NULL, *pre = NULL;
    int64_t ntok = 0, nmerge = 0, ntypes = 0, v;
    int ret = -1;
    model = fr_gguf_get_strdup(g, "tokenizer.ggml.model", &rc, err);
    if (rc == 1) fr_err_set(err, "%s: missing metadata 'tokenizer.ggml.model'", g->path);
    if (!model) goto done;
    if (strcmp(model, "gpt2") && strcmp(model, "llama")) {
        char q[64];
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: tokenizer model '%s' is not supported "
                    "(supported: gpt2, the byte-level BPE of Qwen2 and Llama 3; llama, the "
                    "SentencePiece BPE of Llama 2, Mistral and Gemma)", g->path,
                    fr_quotez(model, q, sizeof q));
        goto done;
    }
    spec.model = model;
    rc = fr_gguf_get_str_array(g, "tokenizer.ggml.tokens", &toks, &tlens, &ntok, err);
    if (rc == 1) fr_err_set(err, "%s: missing metadata 'tokenizer.ggml.tokens'", g->path);
    if (rc) goto done;
    if (ntok < 1 || ntok > m->hp.n_vocab) {
        fr_err_set(err, "%s: tokenizer.ggml.tokens has %lld entries; the embedding has %d rows",
                   g->path, (long long)ntok, m->hp.n_vocab);
        goto done;
    }
    rc = fr_gguf_get_i32_array(g, "tokenizer.ggml.token_type", &types, &ntypes, err);
    if (rc < 0) goto done;
    if (rc == 0 && ntypes != ntok) {
        fr_err_set(err, "%s: tokenizer.ggml.token_type has %lld entries, tokens has %lld", g->path,
                   (long long)ntypes, (long long)ntok);
        goto done;
    }
    rc = fr_gguf_get_str_array(g, "tokenizer.ggml.merges", &merges, &mlens, &nmerge, err);
    if (rc < 0) goto done;
    pre = fr_gguf_get_strdup(g, "tokenizer.ggml.pre", &rc, err);
    if (rc < 0) goto done;
    if (gguf_spm_keys(g, &spec, ntok, &scores, err)) goto done;
    spec.n_tokens = (int)ntok;
    spec.tokens = toks;
    spec.token_lens = tlens;
    spec.token_types = types;
    spec.n_merges = (int)nmerge;
    spec.merges = merges;
    spec.merge_lens = mlens;
    spec.pre = pre;
    spec.bos_id = spec.eos_id = spec.pad_id = -1;
    static const char *idkeys[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                   "tokenizer.ggml.padding_token_id"};
    int *ids[] = {&spec.bos_id, &spec.eos_id, &spec.pad_id};
    for (int i = 0; i < 3; i++) {
        rc = fr_gguf_get_int(g, idkeys[i], 0, ntok - 1, &v, err);
        if (rc < 0) goto done;
        if (rc == 0) *ids[i] = (int)v;
    }
    spec.add_bos = !strcmp(model, "llama") ||
                   (pre && (!strcmp(pre, "llama-bpe") || !strcmp(pre, "llama3") ||
                            !strcmp(pre, "llama-v3")));
    bool b;
    rc = fr_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b, err);
    if (rc < 0) goto done;
    if (rc == 0) spec.add_bos = b;
    m->tok = fr_tokenizer_from_vocab(&spec, err);
    if (!m->tok) { /* the vocabulary's messages do not name the file */
        fr_err_prefix(err, "%s", g->path);
        goto done;
    }
    if (check_tokenizer(m, g->path, err) != 0) goto done;
    m->hp.bos_id = spec.bos_id;
    m->hp.eos_id = spec.eos_id >= 0 ? spec.eos_id : fr_tokenizer_eos(m->tok);
    static const char *extra[] = {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"};
    for (int i = 0; i < 2; i++) {
        rc = fr_gguf_get_int(g, extra[i], 0, ntok - 1, &v, err);
        if (rc < 0) goto done;
        if (rc == 0) fr_hparams_add_eos(&m->hp, (int)v);
    }
    if (m->hp.bos_id >= 0) m->bos_token_str = token_dup(toks[m->hp.bos_id], tlens[m->hp.bos_id]);
    if (m->hp.eos_id >= 0 && m->hp.eos_id < ntok)
        m->eos_token_str = token_dup(toks[m->hp.eos_id], tlens[m->hp.eos_id]);
    m->chat_template = fr_gguf_get_strdup(g, "tokenizer.chat_template", &rc, err);
    if (rc < 0) goto done;
    ret = 0;
done:
    free(toks);
    free(tlens);
    free(merges);
    free(mlens);
    free(types);
    free(scores);
    free(model);
    free(pre);
    return ret;
}

fr_model *fr_model_load_gguf_buffer(const uint8_t *data, size_t size, const char *name,
                                    fr_err *err) {
    double t0 = fr_time_s();
    fr_gguf g;
    if (fr_gguf_parse(&g, name, data, size, err) != 0) return NULL;
    fr_model *m = model_new(name);
    fr_loader L = {.m = m, .where = g.path, .gg = &g};
    if (gguf_hparams(m, &g, err) != 0 || gguf_tokenizer(m, &g, err) != 0) goto fail;
    if (m->hp.mrope_section[0] + m->hp.mrope_section[1] + m->hp.mrope_section[2] > 0) {
        /* the VL token ids are the vocabulary's special tokens */
        m->hp.image_token_id = fr_tokenizer_find(m->tok, "<|image_pad|>");
        m->hp.video_token_id = fr_tokenizer_find(m->tok, "<|video_pad|>");
        m->hp.vision_start_id = fr_tokenizer_find(m->tok, "<|vision_start|>");
        m->hp.vision_end_id = fr_tokenizer_find(m->tok, "<|vision_end|>");
    }
    m->w.layers = fr_xcalloc((size_t)m->hp.n_layer, sizeof *m->w.layers);
    plan_jobs(&L, NULL, -1);
    fr_tensor rope;
    memset(&rope, 0, sizeof rope);
    fr_ld_add_job(&L, &rope, "rope_freqs.weight", "rope_freqs.weight", 1, m->hp.head_dim / 2, 1, false,
            true);
    if (fr_ld_run_jobs(&L, size, err) != 0) goto fail;
    if (fr_tensor_present(&rope)) {
        /* always an owned copy: fr_weights holds a mutable pointer */
        float *f = fr_xmalloc(rope.nbytes);
        memcpy(f, rope.data, rope.nbytes);
        fr_model_own(m, f);
        m->w.rope_freq_factors = f;
    }
    finish_weights(m);
    free(L.jobs);
    fr_gguf_free(&g);
    m->load_seconds = fr_time_s() - t0;
    return m;
fail:
    free(L.jobs);
    fr_gguf_free(&g);
    fr_model_free(m);
    return NULL;
}

/* ---- entry point ---- */

static bool has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* The mmproj GGUF next to a qwen2vl text GGUF: the one *.gguf file of its folder whose name holds
 * "mmproj" (llama.cpp's naming). Returns it (malloc'd), or NULL with *count the number found (0,
 * or more than one). */
static char *find_mmproj(const char *path, int *count) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? fr_xstrndup(path, (size_t)(slash - path + 1)) : fr_xstrdup("./");
    const char *self = slash ? slash + 1 : path;
    char *found = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strstr(e->d_name, "mmproj") || !has_suffix(e->d_name, ".gguf") ||
            !strcmp(e->d_name, self))
            continue;
        if (++*count == 1) found = fr_path_join(dir, e->d_name);
    }
    if (d) closedir(d);
    free(dir);
    if (*count != 1) {
        free(found);
        return NULL;
    }
    return found;
}

fr_model *fr_model_load(const char *path, fr_err *err) {
    if (fr_path_is_dir(path)) return load_hf(path, err);
    if (!fr_path_exists(path)) {
        fr_err_setc(err, FR_ERR_NOT_FOUND, "%s: no such file or folder", path);
        return NULL;
    }
    if (has_suffix(path, ".safetensors") || has_suffix(path, "config.json")) {
        /* a file inside an HF folder: load the folder */
        const char *slash = strrchr(path, '/');
        char *dir = slash ? fr_xstrndup(path, (size_t)(slash - path)) : fr_xstrdup(".");
        fr_model *m = load_hf(dir, err);
        free(dir);
        return m;
    }
    fr_mmap map;
    if (fr_mmap_open(&map, path, err) != 0) return NULL;
    if (map.size < 4 || memcmp(map.data, "GGUF", 4)) {
        fr_mmap_close(&map);
        fr_err_set(err, "%s: neither a GGUF file nor an HF model folder", path);
        return NULL;
    }
    double t0 = fr_time_s();
    fr_model *m = fr_model_load_gguf_buffer(map.data, map.size, path, err);
    if (!m) {
        fr_mmap_close(&map);
        return NULL;
    }
    fr_model_add_map(m, map);
    if (!strcmp(m->arch_name, "qwen2vl")) {
        int n;
        char *mp = find_mmproj(path, &n);
        if (n > 1) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: %d mmproj GGUF files next to the model; "
                        "keep the one that belongs to it", path, n);
            fr_model_free(m);
            return NULL;
        }
        if (!mp) {
            fr_warn("%s: no mmproj GGUF next to the model: loaded without its vision tower", path);
        } else if (fr_vision_load_mmproj(m, mp, err) != 0) {
            free(mp);
            fr_model_free(m);
            return NULL;
        }
        free(mp);
    }
    if (m->vision) m->n_params += m->vision->n_params;
    m->load_seconds = fr_time_s() - t0;
    log_loaded(m);
    return m;
}

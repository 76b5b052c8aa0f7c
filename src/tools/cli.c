/* cli.c — the model commands of the CLI contract, written against the public API (frugal.h)
 * only: loading, chat rendering, defaults and generation are the library's.
 *
 *   frugal tokenize --model PATH TEXT          prints the ids as one JSON array
 *   frugal render   --model PATH --messages FILE [--chat-template NAME]
 *   frugal generate --model PATH (--prompt TEXT | --messages FILE) [--max-tokens N]
 *                   [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--seed S]
 *                   [--quant q8|q4] [--stop STR]... [--ignore-eos] [--chat-template NAME]
 *                   [--device cpu|cuda[:N]] [--weights bf16|int8|int4] [--kv-cache bf16|int8]
 *                   [--json]
 *   frugal generate --model DIR (--image FILE [--image FILE2 ...] | --pixel-values FILE.npy
 *                   --grid-thw T,H,W [--grid-thw ...]) --prompt TEXT [the options above]
 *                   [--dump-pixel-values FILE.npy] [--dump-image-features FILE.npy]
 *                   [--last-logits] [--keep-ratio R] [--max-image-tokens N]
 *
 * PATH is an HF model folder or a .gguf file. `--temperature 0` is greedy. Text streams to stdout
 * as it is generated; with --json one object {"prompt_ids", "ids", "text", "finish_reason"} is
 * printed instead. --prompt is tokenized as HF's Tokenizer.encode (BOS as the model adds it),
 * --messages as apply_chat_template(tokenize=True) (the template's BOS only).
 * Errors are one line on stderr and exit status 1; usage errors (and settings the API calls
 * invalid) exit 2.
 *
 * With images (a vision-language model) the prompt is rendered with the chat template as one user
 * message holding the images, then the text (frugal_generate_vl), and --json prints
 * {"prompt_ids" (image pads expanded), "ids", "text", "finish_reason", "image_grid_thw":
 * [[t,h,w],...], "image_tokens", "image_tokens_kept"} plus "last_logits" (the prompt's last
 * position) with --last-logits. --pixel-values takes HF's processor output (float32 rows of all
 * images, split by the --grid-thw list in order) instead of preprocessing image files. The dumps
 * write what was computed: the pixel values, and the merger's features before pruning. A failed
 * image generation prints its status name in parentheses at the end of the error line.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frugal.h"
#include "base/base.h"
#include "base/flags.h"
#include "base/npy.h"
#include "tools/commands.h"

#define MAX_MESSAGES_FILE (64u << 20)
#define MAX_IMAGE_FILE (64u << 20) /* read cap; the image stage's own limits apply after */
#define MAX_IMAGES 64

typedef struct cli_vl {
    const char *images[MAX_IMAGES]; /* --image files */
    int n_images;
    const char *pixel_values;       /* --pixel-values FILE.npy */
    int grids[MAX_IMAGES][3];       /* --grid-thw */
    int n_grids;
    const char *dump_pixels, *dump_features;
    bool last_logits;
    float keep_ratio;
    int max_image_tokens;
} cli_vl;

typedef struct cli_opts {
    const char *model, *prompt, *messages, *chat_template, *text;
    frugal_model_params mp;   /* --quant */
    frugal_context_params cp; /* --device, --weights, --kv-cache */
    frugal_generate_params gp;
    int n_stop;
    bool json;
    cli_vl vl;
} cli_opts;

static int usage_error(const char *cmd, const char *msg) {
    fprintf(stderr, "frugal %s: %s (see `frugal %s --help`)\n", cmd, msg, cmd);
    return 2;
}

/* An API failure: one line; exit 2 for a setting the API calls invalid, else 1. */
static int api_error(const char *what, const frugal_error *e, bool usage) {
    fprintf(stderr, "frugal: %s%s%s\n", what ? what : "", what ? ": " : "", e->message);
    return usage && e->status == FRUGAL_ERR_INVALID_ARGUMENT ? 2 : 1;
}

static void print_help(const char *cmd) {
    frugal_generate_params d = frugal_generate_default_params();
    printf("usage: frugal %s [options]%s\n", cmd, !strcmp(cmd, "tokenize") ? " TEXT" : "");
    printf("  --model PATH         HF model folder or .gguf file (required)\n"
           "  --prompt TEXT        raw prompt (tokenized as HF's Tokenizer.encode does)\n"
           "  --messages FILE      JSON array of {role, content}: rendered with the chat template\n"
           "  --chat-template NAME use a built-in template (chatml, llama3) instead of the model's\n"
           "  --max-tokens N       tokens to generate (default %d)\n"
           "  --temperature T      0 = greedy (default %g)\n"
           "  --top-k K, --top-p P, --min-p P   sampling filters (defaults %d, %g, %g)\n"
           "  --seed S             random seed (default %llu)\n"
           "  --quant q8|q4        weight-only quantisation on load (CPU)\n"
           "  --device DEV         cpu (default), cuda or cuda:N (CUDA needs a make cuda build)\n"
           "  --weights TYPE       CUDA weights: bf16 (default), int8, int4; CPU: q8, q4 (= --quant)\n"
           "  --kv-cache TYPE      KV cache: bf16 (default), int8 (CUDA)\n"
           "  --stop STR           stop string (repeatable, up to %d)\n"
           "  --ignore-eos         keep generating through end-of-sequence tokens\n"
           "  --json               print {\"prompt_ids\", \"ids\", \"text\", \"finish_reason\"}\n"
           "                       instead of streaming\n"
           "  --image FILE         an image for a vision-language model (repeatable, up to %d)\n"
           "  --pixel-values F.npy HF processor output instead of --image (with --grid-thw)\n"
           "  --grid-thw T,H,W     the grid of each image of --pixel-values, in order\n"
           "  --dump-pixel-values F.npy, --dump-image-features F.npy   write what was computed\n"
           "  --last-logits        add the prompt's last-position logits to --json\n"
           "  --keep-ratio R       share of image tokens kept (default 1)\n"
           "  --max-image-tokens N image token budget (default none)\n",
           d.max_tokens, (double)d.temperature, d.top_k, (double)d.top_p, (double)d.min_p,
           (unsigned long long)d.seed, FRUGAL_MAX_STOP, MAX_IMAGES);
}

/* The CLI's --weights aliases: on the CPU int8/q8 and int4/q4 mean quantise on load
 * (--quant); on CUDA q8/q4 mean int8/int4. */
static int resolve_weights(const char *cmd, cli_opts *o) {
    const char *w = o->cp.weights;
    bool cpu = !o->cp.device || !strcmp(o->cp.device, "cpu");
    if (!cpu && o->mp.quant) return usage_error(cmd, "--quant is the CPU's; use --weights int8|int4");
    if (!w) return 0;
    bool w8 = !strcmp(w, "int8") || !strcmp(w, "q8"), w4 = !strcmp(w, "int4") || !strcmp(w, "q4");
    if (!w8 && !w4 && strcmp(w, "bf16"))
        return usage_error(cmd, "--weights must be bf16, int8, int4 (CUDA) or q8, q4 (CPU)");
    if (cpu) {
        if (w8 || w4) o->mp.quant = w8 ? "q8" : "q4";
        o->cp.weights = NULL;
    } else {
        o->cp.weights = w8 ? "int8" : w4 ? "int4" : "bf16";
    }
    return 0;
}

/* Parses options shared by the three commands and checks the settings through the API before
 * any model is loaded. Returns 0, -1 after --help, or an exit status. */
static int parse_opts(const char *cmd, int argc, char **argv, cli_opts *o) {
    memset(o, 0, sizeof *o);
    o->mp = frugal_model_default_params();
    o->cp = frugal_context_default_params();
    o->gp = frugal_generate_default_params();
    bool ignore_eos = false;
    const char *extra_stop, *grid = NULL;
    o->vl.keep_ratio = 1.0f;
    fr_flags f;
    fr_flags_init(&f, cmd, argc, argv);
    while (fr_flags_next(&f)) {
        if (fr_flag_help(&f)) {
            print_help(cmd);
            return -1;
        } else if (fr_flag_switch(&f, "--json", &o->json) ||
                   fr_flag_switch(&f, "--ignore-eos", &ignore_eos) ||
                   fr_flag_str(&f, "--model", &o->model) || fr_flag_str(&f, "--prompt", &o->prompt) ||
                   fr_flag_str(&f, "--messages", &o->messages) ||
                   fr_flag_str(&f, "--chat-template", &o->chat_template) ||
                   fr_flag_str(&f, "--quant", &o->mp.quant) ||
                   fr_flag_str(&f, "--device", &o->cp.device) ||
                   fr_flag_str(&f, "--weights", &o->cp.weights) ||
                   fr_flag_str(&f, "--kv-cache", &o->cp.kv_cache) ||
                   fr_flag_int(&f, "--max-tokens", 1, 1 << 20, &o->gp.max_tokens) ||
                   fr_flag_float(&f, "--temperature", 0, 100, &o->gp.temperature) ||
                   fr_flag_int(&f, "--top-k", 0, 1 << 24, &o->gp.top_k) ||
                   fr_flag_float(&f, "--top-p", 0, 1, &o->gp.top_p) ||
                   fr_flag_float(&f, "--min-p", 0, 1, &o->gp.min_p) ||
                   fr_flag_u64(&f, "--seed", &o->gp.seed)) {
            continue;
        } else if (o->n_stop < FRUGAL_MAX_STOP && fr_flag_str(&f, "--stop", &o->gp.stop[o->n_stop])) {
            if (!f.rc) o->n_stop++;
        } else if (fr_flag_str(&f, "--stop", &extra_stop)) {
            return fr_flags_fail(&f, "at most %d --stop strings", FRUGAL_MAX_STOP);
        } else if (fr_flag_str(&f, "--image", &extra_stop)) {
            if (f.rc) continue;
            if (o->vl.n_images == MAX_IMAGES) return fr_flags_fail(&f, "at most %d images", MAX_IMAGES);
            o->vl.images[o->vl.n_images++] = extra_stop;
        } else if (fr_flag_str(&f, "--grid-thw", &grid)) {
            if (f.rc) continue;
            int *g = o->vl.grids[o->vl.n_grids];
            char end;
            if (o->vl.n_grids == MAX_IMAGES) return fr_flags_fail(&f, "at most %d grids", MAX_IMAGES);
            if (sscanf(grid, "%d,%d,%d%c", &g[0], &g[1], &g[2], &end) != 3 || g[0] < 1 ||
                g[1] < 1 || g[2] < 1)
                return fr_flags_fail(&f, "--grid-thw takes T,H,W (positive integers), not '%s'",
                                     grid);
            o->vl.n_grids++;
        } else if (fr_flag_str(&f, "--pixel-values", &o->vl.pixel_values) ||
                   fr_flag_str(&f, "--dump-pixel-values", &o->vl.dump_pixels) ||
                   fr_flag_str(&f, "--dump-image-features", &o->vl.dump_features) ||
                   fr_flag_switch(&f, "--last-logits", &o->vl.last_logits) ||
                   fr_flag_float(&f, "--keep-ratio", 0, 1, &o->vl.keep_ratio) ||
                   fr_flag_int(&f, "--max-image-tokens", 0, 1 << 30, &o->vl.max_image_tokens)) {
            continue;
        } else if (!strncmp(f.arg, "--", 2) || o->text) { /* TEXT may start with one '-' */
            return fr_flags_unknown(&f);
        } else {
            o->text = f.arg;
        }
    }
    if (f.rc) return f.rc;
    o->gp.ignore_eos = ignore_eos;
    if (!o->model) return usage_error(cmd, "--model PATH is required");
    if (o->mp.quant && strcmp(o->mp.quant, "q8") && strcmp(o->mp.quant, "q4"))
        return usage_error(cmd, "--quant must be q8 or q4");
    int rc = resolve_weights(cmd, o);
    if (rc) return rc;
    frugal_error e;
    if (frugal_context_params_check(&o->cp, &e) != FRUGAL_OK) return api_error(NULL, &e, true);
    return 0;
}

static frugal_model *load_model(const cli_opts *o) {
    frugal_error e;
    frugal_model *m = frugal_model_load(o->model, o->mp, &e);
    if (!m) api_error(NULL, &e, false);
    return m;
}

static void print_ids(FILE *f, const int32_t *ids, size_t n) {
    fputc('[', f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", ids[i]);
    fputc(']', f);
}

/* The messages file's text (malloc'd), or NULL after printing why. */
static char *read_messages(const char *file) {
    fr_err err = {0};
    char *src = fr_read_file(file, MAX_MESSAGES_FILE, NULL, &err);
    if (!src) fprintf(stderr, "frugal: %s\n", err.msg);
    return src;
}

int fr_cmd_tokenize(int argc, char **argv) {
    cli_opts o;
    int rc = parse_opts("tokenize", argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.text) return usage_error("tokenize", "TEXT is required");
    frugal_model *m = load_model(&o);
    if (!m) return 1;
    int32_t *ids;
    size_t n;
    frugal_error e;
    rc = 0;
    if (frugal_tokenize(m, o.text, 1, &ids, &n, &e) != FRUGAL_OK) {
        rc = api_error(NULL, &e, false);
    } else {
        print_ids(stdout, ids, n);
        putchar('\n');
        frugal_free(ids);
    }
    frugal_model_free(m);
    return rc;
}

int fr_cmd_render(int argc, char **argv) {
    cli_opts o;
    int rc = parse_opts("render", argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.messages) return usage_error("render", "--messages FILE is required");
    char *msgs = read_messages(o.messages);
    if (!msgs) return 1;
    frugal_model *m = load_model(&o);
    if (!m) {
        free(msgs);
        return 1;
    }
    frugal_error e;
    char *s = frugal_render_chat(m, msgs, o.chat_template, &e);
    if (s) fputs(s, stdout);
    else api_error(o.messages, &e, false);
    frugal_free(s);
    free(msgs);
    frugal_model_free(m);
    return s ? 0 : 1;
}

static void stream_out(const char *piece, size_t len, void *user) {
    (void)user;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
}

/* The prompt ids of --prompt or --messages (the API owns BOS). Returns 0 or an exit status. */
static int prompt_ids(const cli_opts *o, const frugal_model *m, int32_t **ids, size_t *n) {
    frugal_error e;
    if (o->prompt) {
        if (frugal_tokenize(m, o->prompt, 1, ids, n, &e) != FRUGAL_OK) return api_error(NULL, &e, false);
        return 0;
    }
    char *msgs = read_messages(o->messages);
    if (!msgs) return 1;
    frugal_status st = frugal_tokenize_chat(m, msgs, o->chat_template, ids, n, &e);
    free(msgs);
    return st == FRUGAL_OK ? 0 : api_error(o->messages, &e, false);
}

static void print_json_result(const int32_t *prompt, size_t n_prompt, const frugal_result *r) {
    cJSON *j = cJSON_CreateObject();
    cJSON *pi = cJSON_AddArrayToObject(j, "prompt_ids");
    for (size_t i = 0; i < n_prompt; i++) cJSON_AddItemToArray(pi, cJSON_CreateNumber(prompt[i]));
    cJSON *gi = cJSON_AddArrayToObject(j, "ids");
    for (int i = 0; i < r->n_ids; i++) cJSON_AddItemToArray(gi, cJSON_CreateNumber(r->ids[i]));
    cJSON_AddStringToObject(j, "text", r->text);
    cJSON_AddStringToObject(j, "finish_reason", r->finish == FRUGAL_FINISH_STOP ? "stop" : "length");
    char *s = cJSON_PrintUnformatted(j);
    puts(s);
    free(s);
    cJSON_Delete(j);
}

/* ---- images ---- */

/* The options that need images, checked. Returns 0 or an exit status. */
static int check_vl_opts(const cli_opts *o) {
    const cli_vl *v = &o->vl;
    bool vl = v->n_images || v->pixel_values;
    if (!vl) {
        if (v->n_grids || v->dump_pixels || v->dump_features || v->last_logits ||
            v->keep_ratio != 1.0f || v->max_image_tokens)
            return usage_error("generate", "--grid-thw, the dumps, --last-logits, --keep-ratio and "
                               "--max-image-tokens need --image or --pixel-values");
        return 0;
    }
    if (v->n_images && v->pixel_values)
        return usage_error("generate", "give --image files or --pixel-values, not both");
    if (v->pixel_values && !v->n_grids)
        return usage_error("generate", "--pixel-values needs a --grid-thw per image");
    if (!v->pixel_values && v->n_grids)
        return usage_error("generate", "--grid-thw goes with --pixel-values");
    if (!o->prompt || o->messages)
        return usage_error("generate", "images go with --prompt TEXT (rendered as one user "
                           "message holding the images, then the text)");
    if (!(v->keep_ratio > 0))
        return usage_error("generate", "--keep-ratio must be in (0, 1]");
    return 0;
}

/* The images of the options into ims[] (file bytes into bufs[] or rows of *pv). Returns 0 or
 * an exit status after printing why. */
static int load_vl_images(const cli_vl *v, frugal_image *ims, char **bufs, fr_npy *pv,
                          int *n_images) {
    fr_err err = {0};
    memset(ims, 0, sizeof *ims * MAX_IMAGES);
    if (!v->pixel_values) {
        for (int i = 0; i < v->n_images; i++) {
            size_t len = 0;
            bufs[i] = fr_read_file(v->images[i], MAX_IMAGE_FILE, &len, &err);
            if (!bufs[i]) {
                fprintf(stderr, "frugal: %s\n", err.msg);
                return 1;
            }
            ims[i].data = bufs[i];
            ims[i].size = len;
        }
        *n_images = v->n_images;
        return 0;
    }
    if (fr_npy_load_f32(v->pixel_values, pv, &err)) {
        fprintf(stderr, "frugal: %s\n", err.msg);
        return 1;
    }
    if (pv->n_dims != 2) {
        fprintf(stderr, "frugal: %s: pixel values must be 2-D (patches, patch_dim), not %d-D\n",
                v->pixel_values, pv->n_dims);
        return 1;
    }
    int64_t row = 0;
    for (int i = 0; i < v->n_grids; i++) {
        const int *g = v->grids[i];
        int64_t rows = (int64_t)g[0] * g[1] * g[2];
        if (rows > pv->shape[0] - row) {
            fprintf(stderr, "frugal: %s has %lld rows, fewer than the grids need\n",
                    v->pixel_values, (long long)pv->shape[0]);
            return 1;
        }
        ims[i].pixel_values = pv->data + row * pv->shape[1];
        ims[i].n_patches = rows;
        ims[i].patch_dim = pv->shape[1];
        memcpy(ims[i].grid_thw, g, sizeof ims[i].grid_thw);
        row += rows;
    }
    if (row != pv->shape[0]) {
        fprintf(stderr, "frugal: %s has %lld rows, the grids take %lld\n", v->pixel_values,
                (long long)pv->shape[0], (long long)row);
        return 1;
    }
    *n_images = v->n_grids;
    return 0;
}

static void print_json_vl(const frugal_vl_result *r, bool last_logits) {
    cJSON *j = cJSON_CreateObject();
    cJSON *pi = cJSON_AddArrayToObject(j, "prompt_ids");
    for (size_t i = 0; i < r->n_prompt_ids; i++)
        cJSON_AddItemToArray(pi, cJSON_CreateNumber(r->prompt_ids[i]));
    cJSON *gi = cJSON_AddArrayToObject(j, "ids");
    for (int i = 0; i < r->gen.n_ids; i++) cJSON_AddItemToArray(gi, cJSON_CreateNumber(r->gen.ids[i]));
    cJSON_AddStringToObject(j, "text", r->gen.text);
    cJSON_AddStringToObject(j, "finish_reason",
                            r->gen.finish == FRUGAL_FINISH_STOP ? "stop" : "length");
    cJSON *gr = cJSON_AddArrayToObject(j, "image_grid_thw");
    for (int i = 0; i < r->n_images; i++) {
        cJSON *g = cJSON_CreateArray();
        for (int k = 0; k < 3; k++) cJSON_AddItemToArray(g, cJSON_CreateNumber(r->image_grid_thw[3 * i + k]));
        cJSON_AddItemToArray(gr, g);
    }
    cJSON_AddNumberToObject(j, "image_tokens", (double)r->image_tokens);
    cJSON_AddNumberToObject(j, "image_tokens_kept", (double)r->image_tokens_kept);
    if (last_logits) {
        cJSON *ll = cJSON_AddArrayToObject(j, "last_logits");
        for (int i = 0; i < r->n_vocab; i++)
            cJSON_AddItemToArray(ll, cJSON_CreateNumber(r->last_logits[i]));
    }
    char *s = cJSON_PrintUnformatted(j);
    puts(s);
    free(s);
    cJSON_Delete(j);
}

/* The dumps the options ask for. Returns 0 or 1 after printing why. */
static int write_dumps(const cli_vl *v, const frugal_vl_result *r) {
    fr_err err = {0};
    int64_t ps[2] = {r->n_patches, r->patch_dim}, fs[2] = {r->image_tokens, r->feature_dim};
    if (v->dump_pixels && fr_npy_save_f32(v->dump_pixels, r->pixel_values, 2, ps, &err)) {
        fprintf(stderr, "frugal: %s\n", err.msg);
        return 1;
    }
    if (v->dump_features && fr_npy_save_f32(v->dump_features, r->image_features, 2, fs, &err)) {
        fprintf(stderr, "frugal: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static int generate_vl(cli_opts *o, frugal_context *ctx) {
    frugal_image ims[MAX_IMAGES];
    char *bufs[MAX_IMAGES] = {0};
    fr_npy pv = {0};
    frugal_vl_result r = {0};
    int n_images = 0;
    int rc = load_vl_images(&o->vl, ims, bufs, &pv, &n_images);
    if (!rc) {
        frugal_vl_params vp = frugal_vl_default_params();
        vp.images = ims;
        vp.n_images = n_images;
        vp.keep_ratio = o->vl.keep_ratio;
        vp.max_image_tokens = o->vl.max_image_tokens;
        vp.chat_template = o->chat_template;
        vp.want_last_logits = o->vl.last_logits;
        vp.want_pixel_values = o->vl.dump_pixels != NULL;
        vp.want_image_features = o->vl.dump_features != NULL;
        if (!o->json) o->gp.on_text = stream_out;
        frugal_error e;
        if (frugal_generate_vl(ctx, o->prompt, &vp, &o->gp, &r, &e) != FRUGAL_OK) {
            fprintf(stderr, "frugal: %s (%s)\n", e.message, frugal_status_str(e.status));
            rc = 1;
        } else if (!(rc = write_dumps(&o->vl, &r))) {
            if (o->json) print_json_vl(&r, o->vl.last_logits);
            else putchar('\n');
            fr_info("%d images, %lld image tokens (%lld kept), vision %.3f s; prompt %zu tokens in "
                    "%.3f s, generated %d tokens in %.3f s", r.n_images, (long long)r.image_tokens,
                    (long long)r.image_tokens_kept, r.vision_s, r.n_prompt_ids, r.gen.prefill_s,
                    r.gen.n_ids, r.gen.decode_s);
        }
    }
    frugal_vl_result_free(&r);
    fr_npy_free(&pv);
    for (int i = 0; i < MAX_IMAGES; i++) free(bufs[i]);
    return rc;
}

int fr_cmd_generate(int argc, char **argv) {
    cli_opts o;
    int rc = parse_opts("generate", argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.prompt == !o.messages) return usage_error("generate", "give exactly one of --prompt or --messages");
    if ((rc = check_vl_opts(&o))) return rc;
    frugal_model *m = load_model(&o);
    if (!m) return 1;
    frugal_error e;
    frugal_context *ctx = frugal_context_new(m, o.cp, &e);
    int32_t *ids = NULL;
    size_t n = 0;
    frugal_result r = {0};
    if (!ctx) {
        rc = api_error(NULL, &e, true);
    } else if (o.vl.n_images || o.vl.pixel_values) {
        rc = generate_vl(&o, ctx);
    } else if (!(rc = prompt_ids(&o, m, &ids, &n))) {
        if (!o.json) o.gp.on_text = stream_out;
        if (frugal_generate(ctx, ids, n, &o.gp, &r, &e) != FRUGAL_OK) {
            rc = api_error(NULL, &e, false);
        } else {
            if (o.json) print_json_result(ids, n, &r);
            else putchar('\n');
            fr_info("prompt %zu tokens in %.3f s (%.1f tok/s), generated %d tokens in %.3f s "
                    "(%.1f tok/s)", n, r.prefill_s, (double)n / (r.prefill_s > 0 ? r.prefill_s : 1e-9),
                    r.n_ids, r.decode_s, (double)r.n_ids / (r.decode_s > 0 ? r.decode_s : 1e-9));
        }
    }
    frugal_result_free(&r);
    frugal_free(ids);
    frugal_context_free(ctx);
    frugal_model_free(m);
    return rc;
}

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
 *
 * PATH is an HF model folder or a .gguf file. `--temperature 0` is greedy. Text streams to stdout
 * as it is generated; with --json one object {"prompt_ids", "ids", "text", "finish_reason"} is
 * printed instead. --prompt is tokenized as HF's Tokenizer.encode (BOS as the model adds it),
 * --messages as apply_chat_template(tokenize=True) (the template's BOS only).
 * Errors are one line on stderr and exit status 1; usage errors (and settings the API calls
 * invalid) exit 2.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frugal.h"
#include "base/base.h"
#include "base/flags.h"
#include "tools/commands.h"

#define MAX_MESSAGES_FILE (64u << 20)

typedef struct cli_opts {
    const char *model, *prompt, *messages, *chat_template, *text;
    frugal_model_params mp;   /* --quant */
    frugal_context_params cp; /* --device, --weights, --kv-cache */
    frugal_generate_params gp;
    int n_stop;
    bool json;
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
           "                       instead of streaming\n",
           d.max_tokens, (double)d.temperature, d.top_k, (double)d.top_p, (double)d.min_p,
           (unsigned long long)d.seed, FRUGAL_MAX_STOP);
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
    const char *extra_stop;
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

int fr_cmd_generate(int argc, char **argv) {
    cli_opts o;
    int rc = parse_opts("generate", argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.prompt == !o.messages) return usage_error("generate", "give exactly one of --prompt or --messages");
    frugal_model *m = load_model(&o);
    if (!m) return 1;
    frugal_error e;
    frugal_context *ctx = frugal_context_new(m, o.cp, &e);
    int32_t *ids = NULL;
    size_t n = 0;
    frugal_result r = {0};
    if (!ctx) {
        rc = api_error(NULL, &e, true);
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

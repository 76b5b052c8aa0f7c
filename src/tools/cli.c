/* cli.c — the model commands of the CLI contract:
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
 * as it is generated; with --json one object {"prompt_ids", "ids", "text"} is printed instead.
 * Errors are one line on stderr and exit status 1; usage errors exit 2.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/flags.h"
#include "engine/generate.h"
#include "model/chat.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "tools/commands.h"

#define MAX_MESSAGES_FILE (64u << 20)

typedef struct cli_opts {
    const char *model, *prompt, *messages, *quant, *chat_template, *text;
    const char *device, *weights, *kv; /* generate: backend (backend/backend.h) */
    const char *stop[FR_GEN_MAX_STOP];
    int n_stop;
    int max_tokens;
    fr_sampling sampling;
    bool json, ignore_eos;
} cli_opts;

static int usage_error(const char *cmd, const char *msg) {
    fprintf(stderr, "frugal %s: %s (see `frugal %s --help`)\n", cmd, msg, cmd);
    return 2;
}


static const char *HELP =
    "  --model PATH         HF model folder or .gguf file (required)\n"
    "  --prompt TEXT        raw prompt (tokenized as HF's Tokenizer.encode does)\n"
    "  --messages FILE      JSON array of {role, content}: rendered with the chat template\n"
    "  --chat-template NAME use a built-in template (chatml, llama3) instead of the model's\n"
    "  --max-tokens N       tokens to generate (default 128)\n"
    "  --temperature T      0 = greedy (default 0.8)\n"
    "  --top-k K, --top-p P, --min-p P   sampling filters (defaults 40, 0.95, 0.05)\n"
    "  --seed S             random seed (default 0)\n"
    "  --quant q8|q4        weight-only quantisation on load (CPU)\n"
    "  --device DEV         cpu (default), cuda or cuda:N (CUDA needs a make cuda build)\n"
    "  --weights TYPE       CUDA weights: bf16 (default), int8, int4; CPU: q8, q4 (= --quant)\n"
    "  --kv-cache TYPE      KV cache: bf16 (default), int8 (CUDA)\n"
    "  --stop STR           stop string (repeatable, up to 8)\n"
    "  --ignore-eos         keep generating through end-of-sequence tokens\n"
    "  --json               print {\"prompt_ids\", \"ids\", \"text\"} instead of streaming\n";

/* Parses options shared by the three commands. Returns 0, or an exit status. */
static int parse_opts(const char *cmd, int argc, char **argv, cli_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_tokens = 128;
    o->sampling = fr_sampling_default();
    o->sampling.temperature = 0.8f;
    o->sampling.top_k = 40;
    o->sampling.top_p = 0.95f;
    o->sampling.min_p = 0.05f;
    fr_flags f;
    fr_flags_init(&f, cmd, argc, argv);
    while (fr_flags_next(&f)) {
        if (fr_flag_help(&f)) {
            printf("usage: frugal %s [options]%s\n%s", cmd, !strcmp(cmd, "tokenize") ? " TEXT" : "",
                   HELP);
            return -1;
        } else if (fr_flag_switch(&f, "--json", &o->json) ||
                   fr_flag_switch(&f, "--ignore-eos", &o->ignore_eos) ||
                   fr_flag_str(&f, "--model", &o->model) || fr_flag_str(&f, "--prompt", &o->prompt) ||
                   fr_flag_str(&f, "--messages", &o->messages) ||
                   fr_flag_str(&f, "--chat-template", &o->chat_template) ||
                   fr_flag_int(&f, "--max-tokens", 1, 1 << 20, &o->max_tokens) ||
                   fr_flag_float(&f, "--temperature", 0, 100, &o->sampling.temperature) ||
                   fr_flag_int(&f, "--top-k", 0, 1 << 24, &o->sampling.top_k) ||
                   fr_flag_float(&f, "--top-p", 0, 1, &o->sampling.top_p) ||
                   fr_flag_float(&f, "--min-p", 0, 1, &o->sampling.min_p) ||
                   fr_flag_u64(&f, "--seed", &o->sampling.seed)) {
            continue;
        } else if (fr_flag_str(&f, "--quant", &o->quant)) {
            if (o->quant && strcmp(o->quant, "q8") && strcmp(o->quant, "q4"))
                return usage_error(cmd, "--quant must be q8 or q4");
        } else if (fr_flag_str(&f, "--device", &o->device)) {
            fr_backend_kind kind;
            int idx;
            fr_err e = {{0}};
            if (o->device && fr_backend_parse_device(o->device, &kind, &idx, &e))
                return usage_error(cmd, e.msg);
        } else if (fr_flag_str(&f, "--weights", &o->weights)) {
            if (o->weights && strcmp(o->weights, "bf16") && strcmp(o->weights, "int8") &&
                strcmp(o->weights, "int4") && strcmp(o->weights, "q8") && strcmp(o->weights, "q4"))
                return usage_error(cmd, "--weights must be bf16, int8, int4 (CUDA) or q8, q4 (CPU)");
        } else if (fr_flag_str(&f, "--kv-cache", &o->kv)) {
            if (o->kv && strcmp(o->kv, "bf16") && strcmp(o->kv, "int8"))
                return usage_error(cmd, "--kv-cache must be bf16 or int8");
        } else if (!strcmp(f.arg, "--stop")) {
            if (o->n_stop >= FR_GEN_MAX_STOP) return usage_error(cmd, "at most 8 --stop strings");
            fr_flag_str(&f, "--stop", &o->stop[o->n_stop]);
            if (!f.rc) o->n_stop++;
        } else if (!strncmp(f.arg, "--", 2) || o->text) { /* TEXT may start with one '-' */
            return fr_flags_unknown(&f);
        } else {
            o->text = f.arg;
        }
    }
    if (f.rc) return f.rc;
    if (!o->model) return usage_error(cmd, "--model PATH is required");
    return 0;
}

static fr_model *load_model(const char *path, const char *quant) {
    fr_err err = {{0}};
    fr_model *m = fr_model_load(path, &err);
    if (!m) {
        fprintf(stderr, "frugal: %s\n", err.msg);
        return NULL;
    }
    if (quant && fr_model_quantize(m, quant, &err) != 0) {
        fprintf(stderr, "frugal: %s\n", err.msg);
        fr_model_free(m);
        return NULL;
    }
    return m;
}

static void print_ids(FILE *f, const int32_t *ids, size_t n) {
    fputc('[', f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", ids[i]);
    fputc(']', f);
}

/* Renders the messages file with the model's template (or a built-in one). */
static char *render_messages(const fr_model *m, const char *file, const char *builtin) {
    fr_err err = {{0}};
    char *src = fr_read_file(file, MAX_MESSAGES_FILE, NULL, &err);
    if (!src) {
        fprintf(stderr, "frugal: %s\n", err.msg);
        return NULL;
    }
    cJSON *msgs = cJSON_Parse(src);
    free(src);
    if (!msgs || !cJSON_IsArray(msgs)) {
        fprintf(stderr, "frugal: %s: expected a JSON array of {\"role\", \"content\"} objects\n", file);
        cJSON_Delete(msgs);
        return NULL;
    }
    const cJSON *it;
    int idx = 0;
    cJSON_ArrayForEach(it, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsObject(it) || !cJSON_IsString(role) ||
            !(cJSON_IsString(content) || cJSON_IsArray(content) || cJSON_IsNull(content))) {
            fprintf(stderr, "frugal: %s: message %d needs a string \"role\" and a \"content\"\n", file, idx);
            cJSON_Delete(msgs);
            return NULL;
        }
        idx++;
    }
    const char *tmpl = NULL;
    if (builtin) {
        tmpl = fr_chat_builtin(builtin);
        if (!tmpl) {
            fprintf(stderr, "frugal: unknown --chat-template '%s' (built-in: chatml, llama3)\n", builtin);
            cJSON_Delete(msgs);
            return NULL;
        }
    } else {
        tmpl = m->chat_template;
        if (!tmpl) {
            fprintf(stderr, "frugal: %s has no chat template; choose a built-in one with "
                            "--chat-template chatml|llama3\n", m->path);
            cJSON_Delete(msgs);
            return NULL;
        }
    }
    fr_chat_opts co = {.add_generation_prompt = true,
                       .bos_token = m->bos_token_str ? m->bos_token_str : "",
                       .eos_token = m->eos_token_str ? m->eos_token_str : "",
                       .tools = NULL};
    char *out = fr_chat_render(tmpl, msgs, &co, &err);
    cJSON_Delete(msgs);
    if (!out) fprintf(stderr, "frugal: %s\n", err.msg);
    return out;
}

int fr_cmd_tokenize(int argc, char **argv) {
    cli_opts o;
    int rc = parse_opts("tokenize", argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.text) return usage_error("tokenize", "TEXT is required");
    fr_model *m = load_model(o.model, NULL);
    if (!m) return 1;
    int32_t *ids = NULL;
    size_t n = 0;
    fr_err err = {{0}};
    if (fr_tokenize(m->tok, o.text, strlen(o.text), true, &ids, &n, &err) != 0) {
        fprintf(stderr, "frugal: %s\n", err.msg);
        fr_model_free(m);
        return 1;
    }
    print_ids(stdout, ids, n);
    putchar('\n');
    free(ids);
    fr_model_free(m);
    return 0;
}

int fr_cmd_render(int argc, char **argv) {
    cli_opts o;
    int rc = parse_opts("render", argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.messages) return usage_error("render", "--messages FILE is required");
    fr_model *m = load_model(o.model, NULL);
    if (!m) return 1;
    char *s = render_messages(m, o.messages, o.chat_template);
    if (s) fputs(s, stdout);
    free(s);
    fr_model_free(m);
    return s ? 0 : 1;
}

static void stream_out(const char *piece, size_t len, void *user) {
    (void)user;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
}

int fr_cmd_generate(int argc, char **argv) {
    cli_opts o;
    int rc = parse_opts("generate", argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.prompt == !o.messages) return usage_error("generate", "give exactly one of --prompt or --messages");
    bool on_cpu = !o.device || !strcmp(o.device, "cpu");
    if (!on_cpu && !fr_backend_cuda_linked()) {
        fprintf(stderr, "frugal: --device %s: built without CUDA: rebuild with make cuda "
                        "(build-cuda/frugal-cuda)\n", o.device);
        return 1;
    }
    if (!on_cpu && o.quant) return usage_error("generate", "--quant is the CPU's; use --weights int8|int4");
    if (on_cpu && o.weights && strcmp(o.weights, "bf16"))
        o.quant = !strcmp(o.weights, "int8") || !strcmp(o.weights, "q8") ? "q8" : "q4";
    if (!on_cpu && o.weights)
        o.weights = !strcmp(o.weights, "q8") ? "int8" : !strcmp(o.weights, "q4") ? "int4" : o.weights;
    fr_model *m = load_model(o.model, o.quant);
    if (!m) return 1;
    fr_err err = {{0}};
    int32_t *ids = NULL;
    size_t n_prompt = 0;
    int status = 1;
    char *rendered = NULL;
    fr_generate_result res;
    memset(&res, 0, sizeof res);

    if (o.messages) {
        rendered = render_messages(m, o.messages, o.chat_template);
        if (!rendered) goto done;
        /* like apply_chat_template(tokenize=True): the template already holds BOS */
        if (fr_tokenize(m->tok, rendered, strlen(rendered), false, &ids, &n_prompt, &err)) goto fail;
    } else if (fr_tokenize(m->tok, o.prompt, strlen(o.prompt), true, &ids, &n_prompt, &err)) {
        goto fail;
    }
    fr_gen_params gp = fr_gen_params_default();
    gp.max_tokens = o.max_tokens;
    gp.ignore_eos = o.ignore_eos;
    gp.n_stop = o.n_stop;
    for (int i = 0; i < o.n_stop; i++) gp.stop[i] = o.stop[i];
    fr_generate_device gd = {.device = o.device, .weights = on_cpu ? NULL : o.weights, .kv = o.kv};
    if (fr_generate_on(m, &gd, ids, n_prompt, &o.sampling, &gp, o.json ? NULL : stream_out, NULL,
                       &res, &err))
        goto fail;
    if (o.json) {
        cJSON *j = cJSON_CreateObject();
        cJSON *pi = cJSON_AddArrayToObject(j, "prompt_ids");
        for (size_t i = 0; i < n_prompt; i++) cJSON_AddItemToArray(pi, cJSON_CreateNumber(ids[i]));
        cJSON *gi = cJSON_AddArrayToObject(j, "ids");
        for (int i = 0; i < res.n_ids; i++) cJSON_AddItemToArray(gi, cJSON_CreateNumber(res.ids[i]));
        cJSON_AddStringToObject(j, "text", res.text);
        cJSON_AddStringToObject(j, "finish_reason", res.finish == FR_FINISH_STOP ? "stop" : "length");
        char *s = cJSON_PrintUnformatted(j);
        puts(s);
        free(s);
        cJSON_Delete(j);
    } else {
        putchar('\n');
    }
    fr_info("prompt %zu tokens in %.3f s (%.1f tok/s), generated %d tokens in %.3f s (%.1f tok/s)",
            n_prompt, res.prefill_s, (double)n_prompt / (res.prefill_s > 0 ? res.prefill_s : 1e-9),
            res.n_ids, res.decode_s, (double)res.n_ids / (res.decode_s > 0 ? res.decode_s : 1e-9));
    status = 0;
    goto done;
fail:
    fprintf(stderr, "frugal: %s\n", err.msg);
done:
    fr_generate_result_free(&res);
    free(rendered);
    free(ids);
    fr_model_free(m);
    return status;
}

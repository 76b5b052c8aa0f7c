/* assist_cmd.c — `frugal assist`: one JSON request per stdin line, one JSON response per stdout
 * line, through fr_assist_handle — the very function POST /v1/assist calls, so both doors give
 * the same bytes for the same request (the "id" and timings aside).
 *
 * Each output line is the handler's body. A request the handler refuses gives its error object
 * with one extra member, "status" (the HTTP status the server would have sent), so a script can
 * tell them apart without parsing messages; the command keeps reading. Empty lines are skipped.
 * A line longer than --max-line bytes is answered with a 413 error and skipped to its end.
 *
 *   frugal assist [--config FILE] [--intent-model PATH] [--templates PATH]
 *                 [--model PATH [--quant q8|q4] [--chat-template NAME|FILE]] [--max-line N]
 *
 * The model is loaded through the public API (frugal_model_load); the serving engine runs on it.
 *
 * Replies follow the cascade (docs/ASSIST.md): a confident intent gets its template; the rest
 * goes to the model given with --model (the LLM path), or, without one, to a hand-off reply.
 */
#include "tools/assist_cmd.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frugal.h"
#include "frugal_internal.h"
#include "base/conf.h"
#include "base/flags.h"
#include "engine/engine.h"
#include "model/chat.h"
#include "serve/assist.h"

static const char *const usage =
    "usage: frugal assist [--config FILE] [--intent-model PATH] [--templates PATH]\n"
    "                     [--model PATH [--quant q8|q4] [--chat-template NAME|FILE]]\n"
    "                     [--max-line BYTES]\n"
    "Reads one JSON request per line on stdin and writes one JSON response per line on stdout\n"
    "(docs/ASSIST.md). Errors are the error object plus \"status\".\n";

/* Writes body (with "status" added for errors) and a newline. */
static void emit(int status, char *body) {
    if (status != 200) {
        cJSON *o = cJSON_Parse(body);
        if (o) {
            cJSON_AddNumberToObject(o, "status", status);
            char *s = cJSON_PrintUnformatted(o);
            cJSON_Delete(o);
            if (s) {
                free(body);
                body = s;
            }
        }
    }
    fputs(body, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    free(body);
}

int fr_cmd_assist(int argc, char **argv) {
    const char *config = NULL, *intent = NULL, *templates = NULL, *model_path = NULL,
               *quant = NULL, *chat_tmpl = NULL;
    uint64_t max_line_u = (uint64_t)64 << 20;
    fr_flags fl;
    fr_flags_init(&fl, "assist", argc, argv);
    while (fr_flags_next(&fl)) {
        if (fr_flag_help(&fl)) {
            fputs(usage, stdout);
            return 0;
        }
        if (fr_flag_u64(&fl, "--max-line", &max_line_u)) {
            if (!fl.rc && max_line_u < 16)
                return fr_flags_fail(&fl, "--max-line must be a number >= 16");
        } else if (!(fr_flag_str(&fl, "--config", &config) ||
                     fr_flag_str(&fl, "--intent-model", &intent) ||
                     fr_flag_str(&fl, "--templates", &templates) ||
                     fr_flag_str(&fl, "--model", &model_path) || fr_flag_str(&fl, "--quant", &quant) ||
                     fr_flag_str(&fl, "--chat-template", &chat_tmpl))) {
            return fr_flags_unknown(&fl);
        }
    }
    if (fl.rc) return fl.rc;
    size_t max_line = (size_t)max_line_u;
    fr_assist_config cfg;
    fr_assist_config_init(&cfg);
    fr_err err = {0};
    int rc = 1;
    frugal_model *fm = NULL;
    fr_engine *eng = NULL;
    fr_assist *as = NULL;
    char *tmpl_owned = NULL;
    if (config) { /* the one configuration loader: errors name file:line */
        fr_conf_doc d;
        int bad = fr_conf_load(&d, config, &err) || fr_assist_config_apply(&cfg, &d, &err);
        fr_conf_free(&d);
        if (bad) {
            fprintf(stderr, "frugal assist: %s\n", err.msg);
            goto out;
        }
    }
    if (intent) {
        free(cfg.intent_model);
        cfg.intent_model = fr_xstrdup(intent);
    }
    if (templates) {
        free(cfg.templates);
        cfg.templates = fr_xstrdup(templates);
    }
    as = fr_assist_new(&cfg, &err);
    if (!as) {
        fprintf(stderr, "frugal assist: %s\n", err.msg);
        goto out;
    }
    if (model_path) {
        /* loaded (and quantised) through the public API, as `frugal serve` loads its model */
        frugal_model_params mp = frugal_model_default_params();
        mp.quant = quant;
        frugal_error fe;
        fm = frugal_model_load(model_path, mp, &fe);
        if (!fm) {
            fprintf(stderr, "frugal assist: %s (%s)\n", fe.message, frugal_status_str(fe.status));
            goto out;
        }
        const fr_model *m = frugal_model_impl(fm);
        const char *tmpl = m->chat_template;
        if (chat_tmpl) {
            tmpl = fr_chat_builtin(chat_tmpl);
            if (!tmpl) {
                tmpl_owned = fr_read_file(chat_tmpl, 1u << 20, NULL, &err);
                if (!tmpl_owned) {
                    fprintf(stderr, "frugal assist: %s\n", err.msg);
                    goto out;
                }
                tmpl = tmpl_owned;
            }
        }
        if (!tmpl) {
            fprintf(stderr, "frugal assist: the model has no chat template; give --chat-template\n");
            goto out;
        }
        fr_engine_config ec = fr_engine_config_default();
        eng = fr_engine_new(m, &ec, &err);
        if (!eng) {
            fprintf(stderr, "frugal assist: %s\n", err.msg);
            goto out;
        }
        fr_assist_set_llm(as, eng, m, tmpl);
    }
    fr_buf line = {0};
    bool too_long = false;
    int ch;
    for (;;) {
        ch = getchar();
        if (ch != EOF && ch != '\n') {
            if (line.len < max_line) {
                char c = (char)ch;
                fr_buf_append(&line, &c, 1);
            } else {
                too_long = true;
            }
            continue;
        }
        size_t n = line.len;
        while (n && (line.data[n - 1] == '\r' || line.data[n - 1] == ' ')) n--;
        if (too_long) {
            char msg[256];
            snprintf(msg, sizeof msg,
                     "{\"error\":{\"message\":\"Request line exceeds the limit of %zu bytes.\","
                     "\"type\":\"invalid_request_error\",\"param\":null,"
                     "\"code\":\"request_too_large\"}}",
                     max_line);
            emit(413, fr_xstrdup(msg));
        } else if (n) {
            char *body = NULL;
            fr_assist_call call = {.tier = -1, .default_tier = 1, .t_arrival = fr_time_s()};
            int st = fr_assist_handle(as, line.data, n, &call, &body);
            emit(st, body);
        }
        line.len = 0;
        too_long = false;
        if (ch == EOF) break;
    }
    fr_buf_free(&line);
    rc = 0;
out:
    fr_assist_free(as);
    if (eng) {
        fr_engine_close(eng);
        fr_engine_free(eng);
    }
    frugal_model_free(fm);
    free(tmpl_owned);
    fr_assist_config_free(&cfg);
    return rc;
}

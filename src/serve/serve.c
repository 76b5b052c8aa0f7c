/* serve.c — the `frugal serve` command: options, model load, server start, wait for SIGTERM or
 * SIGINT, graceful drain, exit 0.
 *
 * Signals are blocked in every thread (the mask is set before any thread starts) and taken
 * synchronously with sigwait in the main thread, so no work happens in a signal handler.
 * SIGPIPE is ignored (a client that vanishes mid-write is an ordinary error).
 *
 * Device and meter: on the CPU, --weights q8|q4 (or int8|int4) is the load-time quantisation
 * (--quant); on CUDA it is passed to the backend. The command's ledger default is
 * $XDG_STATE_HOME/frugal/ledger.db (~/.local/state/frugal/ledger.db; frugal-ledger.db in the
 * working directory when neither variable is set): a state file, so a server started from a
 * checkout does not leave a database in it. The library's default is none (embedding programs
 * and tests write no file unless asked); --ledger "" turns it off.
 */
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "serve/serve.h"

/* The command's default ledger path (malloc'd); creates its folder. */
static char *default_ledger(void) {
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char dir[1024];
    if (xdg && *xdg) snprintf(dir, sizeof dir, "%s/frugal", xdg);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.local/state/frugal", home);
    else return fr_xstrdup("frugal-ledger.db");
    for (char *p = dir + 1; *p; p++) /* mkdir -p */
        if (*p == '/') {
            *p = 0;
            if (mkdir(dir, 0700) && errno != EEXIST) return fr_xstrdup("frugal-ledger.db");
            *p = '/';
        }
    if (mkdir(dir, 0700) && errno != EEXIST) return fr_xstrdup("frugal-ledger.db");
    char path[1100];
    snprintf(path, sizeof path, "%s/ledger.db", dir);
    return fr_xstrdup(path);
}

int fr_cmd_serve(int argc, char **argv) {
    fr_serve_config cfg;
    fr_serve_config_init(&cfg);
    fr_err err = {{0}};
    int rc = fr_serve_config_from_args(&cfg, argc, argv, &err);
    if (rc) {
        if (rc > 0) fprintf(stderr, "frugal serve: %s%s\n", err.msg,
                            rc == 2 ? " (see `frugal serve --help`)" : "");
        fr_serve_config_free(&cfg);
        return rc < 0 ? 0 : rc;
    }
    if (fr_serve_config_load_keys(&cfg, "FRUGAL_API_KEYS", &err)) {
        fprintf(stderr, "frugal serve: %s\n", err.msg);
        fr_serve_config_free(&cfg);
        return 1;
    }

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (cfg.meter && !cfg.ledger) cfg.ledger = default_ledger();
    if (cfg.device && strcmp(cfg.device, "cpu") && !fr_backend_cuda_linked()) {
        fprintf(stderr, "frugal serve: --device %s: built without CUDA: rebuild with make cuda "
                        "(build-cuda/frugal-cuda)\n", cfg.device);
        fr_serve_config_free(&cfg);
        return 1;
    }
    bool on_cpu = !cfg.device || !strcmp(cfg.device, "cpu");
    if (on_cpu && cfg.weights && strcmp(cfg.weights, "f32") && strcmp(cfg.weights, "bf16")) {
        const char *q = !strcmp(cfg.weights, "int8") || !strcmp(cfg.weights, "q8") ? "q8" : "q4";
        free(cfg.quant);
        cfg.quant = fr_xstrdup(q);
    }
    if (!on_cpu && cfg.quant) {
        fprintf(stderr, "frugal serve: --quant is the CPU's; on %s use --weights int8|int4\n",
                cfg.device);
        fr_serve_config_free(&cfg);
        return 2;
    }

    fr_model *m = fr_model_load(cfg.model, &err);
    if (!m) {
        fprintf(stderr, "frugal serve: %s\n", err.msg);
        fr_serve_config_free(&cfg);
        return 1;
    }
    if (cfg.quant && fr_model_quantize(m, cfg.quant, &err) != 0) {
        fprintf(stderr, "frugal serve: %s\n", err.msg);
        fr_model_free(m);
        fr_serve_config_free(&cfg);
        return 1;
    }
    fr_server *s = fr_server_start(&cfg, m, &err);
    if (!s) {
        fprintf(stderr, "frugal serve: %s\n", err.msg);
        fr_model_free(m);
        fr_serve_config_free(&cfg);
        return 1;
    }
    /* one machine-readable line for scripts that start the server on port 0 */
    printf("listening on http://%s:%d\n", cfg.host, fr_server_port(s));
    fflush(stdout);

    int sig = 0;
    sigwait(&set, &sig);
    fr_info("received %s: draining (grace %.1f s)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
            cfg.shutdown_grace_s);
    fr_server_shutdown(s, cfg.shutdown_grace_s);
    fr_server_free(s);
    fr_model_free(m);
    fr_serve_config_free(&cfg);
    fr_info("stopped");
    return 0;
}

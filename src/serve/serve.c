/* serve.c — the `frugal serve` command: options, model load, server start, wait for SIGTERM or
 * SIGINT, graceful drain, exit 0.
 *
 * Signals are blocked in every thread (the mask is set before any thread starts) and taken
 * synchronously with sigwait in the main thread, so no work happens in a signal handler.
 * SIGPIPE is ignored (a client that vanishes mid-write is an ordinary error). The first SIGTERM /
 * SIGINT starts the drain (fr_server_shutdown: grace period, then every request cancelled) and a
 * watchdog thread: a second signal, or the drain still not done at grace + 4.8 s, ends the
 * process at once (exit status 1, logged), so the server always exits within grace + 5 s.
 *
 * Model and device through the public API (frugal.h), as any program would load them: the
 * options become frugal_model_params and frugal_context_params (fr_serve_api_params: on the CPU,
 * --weights q8|q4 or int8|int4 is the load-time quantisation, --quant; on CUDA it is the
 * context's weights), frugal_context_params_check refuses a device this build cannot use before
 * the load, frugal_model_load loads and quantises, frugal_context_new chooses the device, and the
 * server runs its engine on what those handles hold (frugal_internal.h). Their failures are one
 * line with the API's message and status name ("... (unsupported)"), exit status 2 for a setting
 * the API calls invalid, else 1.
 *
 * Meter: the ledger is --ledger, else the meter config's
 * ledger.path, else the command's default: one file per server, named after the served model
 * and the port, $XDG_STATE_HOME/frugal/ledger-MODEL-PORT.db (~/.local/state/frugal/...; in the
 * working directory when neither variable is set; PORT is "pPID" for --port 0, whose port is
 * only known once bound), so unrelated servers never mix their rows in one audit. The start-up
 * line names the file. The library's default is none (embedding programs and tests write no
 * file unless asked); --ledger "" turns it off.
 *
 * SIGXFSZ is ignored: a file-size limit (RLIMIT_FSIZE) then fails the ledger's write with EFBIG,
 * which the ledger treats as any other write error (docs/METERING.md, "Ledger"), instead of
 * killing the server.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frugal.h"
#include "frugal_internal.h"
#include "serve/serve.h"

/* The shutdown watchdog: waits for a second signal or the deadline, then exits at once. */
typedef struct watchdog {
    sigset_t set;       /* the signals taken */
    double limit_s;     /* seconds from the first signal */
    double t_end;       /* fr_time_s() at which it fires */
    atomic_bool done;   /* the shutdown finished: stand down */
} watchdog;

static void *watchdog_main(void *arg) {
    watchdog *w = arg;
    for (;;) {
        double left = w->t_end - fr_time_s();
        if (left <= 0) break;
        struct timespec ts = {(time_t)left, (long)((left - floor(left)) * 1e9)};
        int sig = sigtimedwait(&w->set, NULL, &ts);
        if (sig > 0 && !atomic_load(&w->done)) {
            fr_warn("second %s: exiting now", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            _exit(1);
        }
        /* EINTR (a sanitizer's leak check stops every thread at exit, for one) or EAGAIN:
         * look at the clock again */
    }
    if (atomic_load(&w->done)) return NULL;
    fr_warn("shutdown not done %.1f s after the signal: exiting now", w->limit_s);
    _exit(1);
    return NULL;
}

/* The command's default ledger path for a server of `model` on `port` (malloc'd); creates its
 * folder. */
static char *default_ledger(const char *model, int port) {
    char name[160];
    size_t n = (size_t)snprintf(name, sizeof name, "ledger-");
    for (const char *p = model && *model ? model : "model"; *p && n < 72; p++) /* a file name */
        name[n++] = (isalnum((unsigned char)*p) || *p == '.' || *p == '_' || *p == '-') ? *p : '_';
    if (port > 0) snprintf(name + n, sizeof name - n, "-%d.db", port);
    else snprintf(name + n, sizeof name - n, "-p%ld.db", (long)getpid());
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char dir[1024];
    if (xdg && *xdg) snprintf(dir, sizeof dir, "%s/frugal", xdg);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.local/state/frugal", home);
    else return fr_xstrdup(name);
    for (char *p = dir + 1; *p; p++) /* mkdir -p */
        if (*p == '/') {
            *p = 0;
            if (mkdir(dir, 0700) && errno != EEXIST) return fr_xstrdup(name);
            *p = '/';
        }
    if (mkdir(dir, 0700) && errno != EEXIST) return fr_xstrdup(name);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return fr_xstrdup(path);
}

/* A failure of the public API: one line with its message and status name; exit 2 for a setting
 * the API calls invalid when `usage`, else 1. */
static int api_failure(const frugal_error *e, bool usage) {
    fprintf(stderr, "frugal serve: %s (%s)\n", e->message, frugal_status_str(e->status));
    return usage && e->status == FRUGAL_ERR_INVALID_ARGUMENT ? 2 : 1;
}

/* The model and its device through the public API, the device checked before the load. Returns 0
 * with *m and *dev set, or an exit status after printing why. */
static int open_model(const fr_serve_config *cfg, frugal_model **m, frugal_context **dev) {
    if (cfg->device && strcmp(cfg->device, "cpu") && cfg->quant) {
        fprintf(stderr, "frugal serve: --quant is the CPU's; on %s use --weights int8|int4\n",
                cfg->device);
        return 2;
    }
    frugal_model_params mp;
    frugal_context_params cp;
    fr_serve_api_params(cfg, &mp, &cp);
    frugal_error e;
    if (frugal_context_params_check(&cp, &e) != FRUGAL_OK) return api_failure(&e, true);
    *m = frugal_model_load(cfg->model, mp, &e);
    if (!*m) return api_failure(&e, false);
    *dev = frugal_context_new(*m, cp, &e);
    if (!*dev) return api_failure(&e, true);
    return 0;
}

int fr_cmd_serve(int argc, char **argv) {
    fr_serve_config cfg;
    fr_serve_config_init(&cfg);
    fr_err err = {0};
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
    signal(SIGXFSZ, SIG_IGN);

    frugal_model *m = NULL;
    frugal_context *dev = NULL;
    fr_server *s = NULL;
    if ((rc = open_model(&cfg, &m, &dev))) goto fail;
    if (cfg.meter && !cfg.ledger) { /* used unless the meter config names one */
        const char *name = cfg.served_name ? cfg.served_name : frugal_model_impl(m)->name;
        cfg.ledger_default = default_ledger(name, cfg.port);
    }
    s = fr_server_start(&cfg, m, dev, &err);
    if (!s) {
        fprintf(stderr, "frugal serve: %s\n", err.msg);
        rc = 1;
        goto fail;
    }
    fr_info("data root %s (intent model, reply templates, speech LM; FRUGAL_DATA_DIR overrides)",
            fr_data_dir());
    /* one machine-readable line for scripts that start the server on port 0 */
    printf("listening on http://%s:%d\n", cfg.host, fr_server_port(s));
    fflush(stdout);

    int sig = 0;
    sigwait(&set, &sig);
    fr_info("received %s: draining (grace %.1f s)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
            cfg.shutdown_grace_s);
    static watchdog wd; /* lives until exit */
    wd.set = set;
    wd.limit_s = cfg.shutdown_grace_s + 4.8;
    wd.t_end = fr_time_s() + wd.limit_s;
    atomic_init(&wd.done, false);
    pthread_t wt;
    if (pthread_create(&wt, NULL, watchdog_main, &wd) == 0) pthread_detach(wt);
    fr_server_shutdown(s, cfg.shutdown_grace_s);
    fr_server_free(s);
    frugal_context_free(dev);
    frugal_model_free(m);
    fr_serve_config_free(&cfg);
    atomic_store(&wd.done, true); /* what is left is the process's own exit */
    fr_info("stopped");
    return 0;
fail:
    frugal_context_free(dev);
    frugal_model_free(m);
    fr_serve_config_free(&cfg);
    return rc;
}

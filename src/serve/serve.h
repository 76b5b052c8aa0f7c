/* serve.h — `frugal serve`: an OpenAI-compatible HTTP server (libmicrohttpd, one thread per
 * connection) in front of the serving engine (engine/engine.h). See docs/SERVING.md.
 *
 * Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models[/ID], GET /health,
 * GET /ready, GET /metrics. The server owns the engine; the model is loaded by the caller through
 * the public API (frugal.h) and outlives the server, as does the context that chose the device.
 */
#ifndef FRUGAL_SERVE_H
#define FRUGAL_SERVE_H

#include "frugal.h"
#include "serve/config.h"

/* The command: parse options, load the model, serve until SIGTERM/SIGINT, drain, exit 0. */
int fr_cmd_serve(int argc, char **argv);

typedef struct fr_server fr_server;

/* Starts the engine and the HTTP listener on the model `m` loaded by frugal_model_load, on the
 * device of `dev` (a frugal_context on m; NULL: the API's default, the CPU). The engine's device,
 * weights, KV type and KV fraction are dev's: cfg->device, weights and kv_cache are the command's
 * options, which fr_cmd_serve turns into dev (fr_serve_api_params), and are not read here.
 * `cfg`, `m` and `dev` must outlive the server. NULL with err (bad template, port in use, the
 * device cannot be opened, ...). */
fr_server *fr_server_start(const fr_serve_config *cfg, const frugal_model *m,
                           const frugal_context *dev, fr_err *err);
/* The port actually bound (useful with port 0). */
int fr_server_port(const fr_server *s);
/* Graceful stop: refuse new work (503; /ready 503 "draining", connections still accepted), let
 * in-flight requests finish for up to grace_s seconds, then cancel what is left (clients get an
 * error), stop accepting and close. */
void fr_server_shutdown(fr_server *s, double grace_s);
/* Frees a server (shut down first, or this does an immediate shutdown). */
void fr_server_free(fr_server *s);

#endif

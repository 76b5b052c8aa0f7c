/* serve.h — `frugal serve`: an OpenAI-compatible HTTP server (libmicrohttpd, one thread per
 * connection) in front of the serving engine (engine/engine.h). See docs/SERVING.md.
 *
 * Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models[/ID], GET /health,
 * GET /ready, GET /metrics. The server owns the engine; the model is loaded by the caller and
 * outlives the server.
 */
#ifndef FRUGAL_SERVE_H
#define FRUGAL_SERVE_H

#include "model/model.h"
#include "serve/config.h"

/* The command: parse options, load the model, serve until SIGTERM/SIGINT, drain, exit 0. */
int fr_cmd_serve(int argc, char **argv);

typedef struct fr_server fr_server;

/* Starts the engine and the HTTP listener. `cfg` and `m` must outlive the server. NULL with err
 * (bad template, port in use, ...). */
fr_server *fr_server_start(const fr_serve_config *cfg, const fr_model *m, fr_err *err);
/* The port actually bound (useful with port 0). */
int fr_server_port(const fr_server *s);
/* Graceful stop: refuse new work (503; /ready 503 "draining", connections still accepted), let
 * in-flight requests finish for up to grace_s seconds, then cancel what is left (clients get an
 * error), stop accepting and close. */
void fr_server_shutdown(fr_server *s, double grace_s);
/* Frees a server (shut down first, or this does an immediate shutdown). */
void fr_server_free(fr_server *s);

#endif

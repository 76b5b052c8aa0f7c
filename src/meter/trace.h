/* trace.h — W3C trace context and an OTLP/HTTP JSON exporter.
 *
 * One trace per request: a root span "request" (continuing an incoming traceparent when there is
 * one) and one child span per stage the request went through. The meter builds each trace's
 * spans as cJSON objects (fr_otlp_span_* helpers) and hands the array to the exporter, which
 * batches traces on its own thread and POSTs them to <url>/v1/traces (libcurl) and/or appends one
 * line per trace to a JSON-lines file. The queue is bounded: when it is full the trace is dropped and
 * counted, a request never waits.
 */
#ifndef FRUGAL_METER_TRACE_H
#define FRUGAL_METER_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct fr_traceparent {
    uint8_t version;      /* 0 for the current spec */
    uint8_t trace_id[16]; /* not all zero */
    uint8_t parent_id[8]; /* not all zero */
    uint8_t flags;        /* bit 0: sampled */
} fr_traceparent;

/* Parse a traceparent header value (surrounding spaces/tabs allowed). 0 on success, -1 when the
 * value is invalid (then a new trace must be started). Follows W3C Trace Context level 1:
 * lowercase hex only, version ff invalid, version 00 exactly 55 characters, higher versions may
 * carry more fields after a '-'. */
int fr_traceparent_parse(const char *s, size_t n, fr_traceparent *out);
/* "00-<trace>-<span>-<flags>" into out[56]. */
void fr_traceparent_format(const uint8_t trace_id[16], const uint8_t span_id[8], uint8_t flags,
                           char out[56]);
void fr_meter_hex(const uint8_t *b, size_t n, char *out); /* 2n lowercase hex digits + NUL */

/* ---- span JSON (cJSON) ----------------------------------------------------------------------- */

typedef struct cJSON cJSON;
/* A new span object (OTLP/JSON Span: ids as hex, times as decimal nanoseconds, an empty
 * "attributes" array); add attributes, then fr_otlp_span_end. parent may be NULL. kind: 1
 * internal, 2 server. Times are unix seconds. The caller owns the object (cJSON_Delete, or hand
 * an array of spans to fr_otlp_put). Aborts only when memory runs out. */
cJSON *fr_otlp_span_new(const uint8_t trace_id[16], const uint8_t span_id[8],
                        const uint8_t *parent_id, const char *name, int kind, double t0,
                        double t1);
/* Attributes: string values pass the log masker (base/mask.h) and are made valid UTF-8; an int is
 * written as a decimal string (OTLP int64), a non-finite double as 0. */
void fr_otlp_attr_str(cJSON *span, const char *key, const char *v);
void fr_otlp_attr_int(cJSON *span, const char *key, long long v);
void fr_otlp_attr_dbl(cJSON *span, const char *key, double v);
void fr_otlp_attr_bool(cJSON *span, const char *key, bool v);
/* Adds "status": {"code": status[, "message": masked message]}; status: 0 unset, 1 ok, 2 error. */
void fr_otlp_span_end(cJSON *span, int status, const char *message);
/* One OTLP ExportTraceServiceRequest around `spans` (an array of span objects, owned by the
 * result): resourceSpans[0] with service.name and the scope "frugal.meter". */
cJSON *fr_otlp_wrap(const char *service, cJSON *spans);

/* ---- exporter -------------------------------------------------------------------------------- */

typedef struct fr_otlp_config {
    const char *url;        /* collector base URL or full …/v1/traces URL; NULL/"" = none */
    const char *file;       /* JSON-lines output; NULL/"" = none */
    const char *service;    /* resource service.name */
    int queue;              /* bounded queue of traces */
    int batch;              /* traces per POST */
    double flush_ms;        /* longest wait for a partial batch */
    double timeout_ms;      /* HTTP timeout */
} fr_otlp_config;

typedef struct fr_otlp fr_otlp;
fr_otlp *fr_otlp_open(const fr_otlp_config *c, fr_err *err); /* NULL with no sink = not an error */
/* Queue one trace: `spans` is a cJSON array of span objects, owned by the exporter from here on
 * (freed when sent, dropped, or when o is NULL). False when dropped (queue full, closing). */
bool fr_otlp_put(fr_otlp *o, cJSON *spans);
void fr_otlp_flush(fr_otlp *o); /* wait until everything queued so far is sent or dropped */
void fr_otlp_close(fr_otlp *o);
long fr_otlp_exported(fr_otlp *o); /* traces sent (HTTP 2xx or written to the file) */
long fr_otlp_dropped(fr_otlp *o);  /* traces dropped (queue full, HTTP failure) */

#endif

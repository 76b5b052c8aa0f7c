/* error.h — the one place where the kind of a failure (base.h fr_err_code) becomes an HTTP
 * status and an OpenAI error type. Every door (HTTP, `frugal assist`) answers an fr_err raised
 * below serve through these functions; nothing reads the message text to decide.
 *
 *   code                 status  type
 *   FR_ERR_BAD_REQUEST   400     invalid_request_error
 *   FR_ERR_NOT_FOUND     404     invalid_request_error
 *   FR_ERR_TOO_LARGE     413     invalid_request_error
 *   FR_ERR_UNSUPPORTED   415     invalid_request_error
 *   FR_ERR_CANCELLED     499     invalid_request_error (the client went away; nginx's status)
 *   FR_ERR_INTERNAL      500     server_error
 *   FR_ERR_UNAVAILABLE   503     server_error
 *   FR_ERR_TIMEOUT       504     timeout_error
 *
 * A refused admission (engine/engine.h fr_admit) is answered here too: queue full, overload and
 * the request's deadline 429 rate_limit_error (code: the verdict's name, with Retry-After),
 * too large 400 context_length_exceeded, closed 503 shutting_down.
 *
 * Thread safety: pure functions.
 */
#ifndef FRUGAL_SERVE_ERROR_H
#define FRUGAL_SERVE_ERROR_H

#include "base/base.h"
#include "engine/engine.h"
#include "serve/api.h"

/* The HTTP status of an error code (500 for a value out of range). */
int fr_http_status_of(fr_err_code code);
/* The OpenAI error type of an error code (a static string; "server_error" out of range). */
const char *fr_http_error_type_of(fr_err_code code);

/* Fills *e from err: status and type from err->code; the JSON "code" is `code` when given (a
 * static string: a more specific name the caller knows, e.g. "ocr_timeout"), else
 * fr_err_code_name(err->code); "param" is param (NULL: none); the message is err->msg (masked,
 * as every fr_api_error_set message). */
void fr_api_error_from_err(fr_api_error *e, const fr_err *err, const char *code,
                           const char *param);

/* Fills *e from a refused admission (adm->verdict != FR_ADMIT_OK): status, type and code as in
 * the table above, the message adm->msg. */
void fr_api_error_from_admission(fr_api_error *e, const fr_admission *adm);

#endif

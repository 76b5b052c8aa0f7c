/* error.c — see error.h. */
#include "serve/error.h"

int fr_http_status_of(fr_err_code code) {
    switch (code) {
    case FR_ERR_BAD_REQUEST: return 400;
    case FR_ERR_NOT_FOUND: return 404;
    case FR_ERR_TOO_LARGE: return 413;
    case FR_ERR_UNSUPPORTED: return 415;
    case FR_ERR_CANCELLED: return 499;
    case FR_ERR_INTERNAL: return 500;
    case FR_ERR_UNAVAILABLE: return 503;
    case FR_ERR_TIMEOUT: return 504;
    }
    return 500;
}

const char *fr_http_error_type_of(fr_err_code code) {
    switch (code) {
    case FR_ERR_BAD_REQUEST:
    case FR_ERR_NOT_FOUND:
    case FR_ERR_TOO_LARGE:
    case FR_ERR_UNSUPPORTED:
    case FR_ERR_CANCELLED: return "invalid_request_error";
    case FR_ERR_TIMEOUT: return "timeout_error";
    case FR_ERR_INTERNAL:
    case FR_ERR_UNAVAILABLE: return "server_error";
    }
    return "server_error";
}

void fr_api_error_from_err(fr_api_error *e, const fr_err *err, const char *code,
                           const char *param) {
    fr_api_error_set(e, fr_http_status_of(err->code), fr_http_error_type_of(err->code),
                     code ? code : fr_err_code_name(err->code), param, "%s",
                     err->msg[0] ? err->msg : fr_err_code_name(err->code));
}

void fr_api_error_from_admission(fr_api_error *e, const fr_admission *adm) {
    switch (adm->verdict) {
    case FR_ADMIT_QUEUE_FULL:
    case FR_ADMIT_OVERLOAD:
    case FR_ADMIT_DEADLINE:
        fr_api_error_set(e, 429, "rate_limit_error", fr_admit_name(adm->verdict), NULL, "%s",
                         adm->msg);
        return;
    case FR_ADMIT_TOO_LARGE:
        fr_api_error_set(e, 400, "invalid_request_error", "context_length_exceeded", NULL, "%s",
                         adm->msg);
        return;
    case FR_ADMIT_INVALID:
        fr_api_error_set(e, 400, "invalid_request_error", "invalid_image_input", NULL, "%s",
                         adm->msg);
        return;
    case FR_ADMIT_OK:
    case FR_ADMIT_CLOSED:
    case FR_ADMIT_COUNT: break;
    }
    fr_api_error_set(e, 503, "server_error", "shutting_down", NULL, "%s", adm->msg);
}

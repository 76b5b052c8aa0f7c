/* fuzz_meter_config.c — libFuzzer harness for the binary's configuration loader (src/base/conf.c:
 * JSON through cJSON, lines, duplicate keys), the meter's sections on top of it
 * (src/meter/config.c), the deprecated `key = value` reader (src/meter/config_legacy.c), the
 * serve config with its "metering" section (src/serve/config.c) and the cost model on what the
 * meter accepts (src/meter/cost.c).
 *
 * The input is a configuration file of any bytes (JSON when it starts with '{', else the older
 * syntax). The parse must succeed or fail with a one-line message; an accepted configuration must
 * hold every number inside its documented range (finite prices, PUE >= 1, host share in (0, 1],
 * residual <= purchase), and its dump (JSON) must parse again to the same dump (a fixed point).
 * Pricing one kWh and one host-hour must give finite, non-negative parts. The same bytes applied
 * as a `frugal serve --config` document, and as a /v1/assist settings file, must be accepted or
 * refused with a one-line message that names a line ("line N").
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "meter/meter.h"
#include "serve/assist.h"
#include "serve/config.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size ? size : 1);
    if (size) memcpy(text, data, size);
    fr_meter_config c;
    fr_meter_config_default(&c);
    fr_err err;
    err.msg[0] = 0;
    if (fr_meter_config_parse(&c, text, size, &err) == 0) {
        const fr_cost_model *k = &c.cost;
        if (!(isfinite(k->usd_per_kwh) && k->usd_per_kwh >= 0)) abort();
        if (!(k->pue >= 1 && k->pue <= 10)) abort();
        if (!(k->host_share > 0 && k->host_share <= 1)) abort();
        if (k->hw_residual_usd > k->hw_purchase_usd) abort();
        if (c.n_slo > FR_METER_MAX_TIERS || c.n_arms > FR_METER_MAX_ARMS) abort();
        for (int i = 0; i < c.n_arms; i++)
            if (!(c.arms[i].weight > 0)) abort();
        double parts[FR_COST_N];
        double t = fr_cost_price(k, 3.6e6, 3600, parts);
        if (!isfinite(t) || t < 0) abort();
        for (int i = 0; i < FR_COST_N; i++)
            if (!(parts[i] >= 0)) abort();
        if (c.n_arms && !fr_meter_ab_assign(&c, "k")) abort();
        fr_buf d1 = {0}, d2 = {0};
        fr_meter_config_dump(&c, &d1);
        fr_meter_config c2;
        fr_meter_config_default(&c2);
        if (fr_meter_config_parse(&c2, d1.data, d1.len, &err)) abort();
        fr_meter_config_dump(&c2, &d2);
        if (d1.len != d2.len || memcmp(d1.data, d2.data, d1.len)) abort();
        fr_buf_free(&d1);
        fr_buf_free(&d2);
    } else if (!err.msg[0] || strchr(err.msg, '\n')) {
        abort(); /* a failure says why, on one line */
    }
    fr_serve_config sc;
    fr_serve_config_init(&sc);
    err.msg[0] = 0;
    if (fr_serve_config_apply_json(&sc, text, size, &err)) {
        if (!err.msg[0] || strchr(err.msg, '\n') || strncmp(err.msg, "line ", 5)) abort();
    } else {
        if (!sc.host || sc.port < 0 || sc.port > 65535 || sc.max_body_bytes < 256) abort();
        if (!(sc.metering.cost.pue >= 1 && sc.metering.cost.pue <= 10)) abort();
    }
    fr_serve_config_free(&sc);
    fr_assist_config ac; /* and as the /v1/assist settings file */
    fr_assist_config_init(&ac);
    err.msg[0] = 0;
    if (fr_assist_config_apply_json(&ac, text, size, &err) &&
        (!err.msg[0] || strchr(err.msg, '\n') || strncmp(err.msg, "assist config: line ", 20)))
        abort();
    fr_assist_config_free(&ac);
    free(text);
    return 0;
}

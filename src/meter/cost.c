/* cost.c — the cost model: what a joule and a host-second cost.
 *
 * A request's cost has four parts:
 *   energy        = IT joules / 3.6e6 × $/kWh
 *   cooling       = energy × (PUE − 1)            (the facility overhead on top of IT energy)
 *   depreciation  = hardware $/s × occupancy       (see fr_cost_hw_usd_per_s for the rate)
 *   labour        = ops labour $/s × occupancy     ($/month × 12 / year)
 * where hardware and labour are already multiplied by the replica's share of the host, and
 * occupancy is the host-seconds the request used (its attributed device time divided by the
 * number of capacity devices; see meter.c). A year is 365.25 days.
 *
 * The default hardware rate, when neither a rental rate nor a purchase price is configured, is
 * the host's devices at public list prices (config.c cites them; docs/METERING.md "Cost model"):
 * a host with GPUs is priced by the GPU-hour, a host without by the vCPU-hour, so the audit and
 * the ROI table show money under the default configuration.
 */
#include "meter/meter.h"

#include <stdio.h>
#include <unistd.h>

#define YEAR_S (365.25 * 86400.0)

const char *fr_cost_component_name(fr_cost_component c) {
    static const char *n[] = {"energy", "cooling", "depreciation", "labour"};
    return (unsigned)c < FR_COST_N ? n[c] : "?";
}

/* The host's rate in $/s before the host share. */
static double host_usd_per_s(const fr_cost_model *c) {
    if (c->hw_usd_per_hour > 0) return c->hw_usd_per_hour / 3600.0;
    if (c->hw_purchase_usd > 0) {
        if (c->hw_depreciation_years > 0 && c->hw_purchase_usd > c->hw_residual_usd)
            return (c->hw_purchase_usd - c->hw_residual_usd) / (c->hw_depreciation_years * YEAR_S);
        return 0;
    }
    if (c->gpus > 0) return c->gpus * c->gpu_usd_per_hour / 3600.0;
    if (c->cpus > 0) return c->cpus * c->cpu_usd_per_hour / 3600.0;
    return 0;
}

double fr_cost_hw_usd_per_s(const fr_cost_model *c) { return host_usd_per_s(c) * c->host_share; }

void fr_cost_hw_basis(const fr_cost_model *c, char *out, size_t n) {
    if (c->hw_usd_per_hour > 0) snprintf(out, n, "rental $%.4f/h", c->hw_usd_per_hour);
    else if (c->hw_purchase_usd > 0)
        snprintf(out, n, "$%.0f purchase over %.1f years", c->hw_purchase_usd, c->hw_depreciation_years);
    else if (c->gpus > 0)
        snprintf(out, n, "%.0f GPU%s x $%.4f/h list price", c->gpus, c->gpus == 1 ? "" : "s", c->gpu_usd_per_hour);
    else if (c->cpus > 0)
        snprintf(out, n, "%.0f vCPU%s x $%.4f/h list price", c->cpus, c->cpus == 1 ? "" : "s", c->cpu_usd_per_hour);
    else snprintf(out, n, "none");
}

void fr_cost_resolve_host(fr_cost_model *c, int n_gpus) {
    if (c->gpus <= 0 && n_gpus > 0) c->gpus = n_gpus;
    if (c->cpus <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        c->cpus = n > 0 ? (double)n : 1;
    }
}

double fr_cost_labour_usd_per_s(const fr_cost_model *c) {
    return c->labour_usd_per_month * 12.0 / YEAR_S * c->host_share;
}

double fr_cost_price(const fr_cost_model *c, double joules, double occupancy_s, double *out) {
    double e = joules / 3.6e6 * c->usd_per_kwh;
    out[FR_COST_ENERGY] = e;
    out[FR_COST_COOLING] = e * (c->pue - 1.0);
    out[FR_COST_DEPRECIATION] = fr_cost_hw_usd_per_s(c) * occupancy_s;
    out[FR_COST_LABOUR] = fr_cost_labour_usd_per_s(c) * occupancy_s;
    return out[0] + out[1] + out[2] + out[3];
}

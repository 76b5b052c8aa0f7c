/* cost.c — the cost model: what a joule and a host-second cost.
 *
 * A request's cost has four parts:
 *   energy        = IT joules / 3.6e6 × $/kWh
 *   cooling       = energy × (PUE − 1)            (the facility overhead on top of IT energy)
 *   depreciation  = hardware $/s × occupancy       ($/hour rental, or (price − residual) / years)
 *   labour        = ops labour $/s × occupancy     ($/month × 12 / year)
 * where hardware and labour are already multiplied by the replica's share of the host, and
 * occupancy is the host-seconds the request used (its attributed device time divided by the
 * number of capacity devices; see meter.c). A year is 365.25 days.
 */
#include "meter/meter.h"

#define YEAR_S (365.25 * 86400.0)

const char *fr_cost_component_name(fr_cost_component c) {
    static const char *n[] = {"energy", "cooling", "depreciation", "labour"};
    return (unsigned)c < FR_COST_N ? n[c] : "?";
}

double fr_cost_hw_usd_per_s(const fr_cost_model *c) {
    double per_s;
    if (c->hw_usd_per_hour > 0) per_s = c->hw_usd_per_hour / 3600.0;
    else if (c->hw_depreciation_years > 0 && c->hw_purchase_usd > c->hw_residual_usd)
        per_s = (c->hw_purchase_usd - c->hw_residual_usd) / (c->hw_depreciation_years * YEAR_S);
    else per_s = 0;
    return per_s * c->host_share;
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

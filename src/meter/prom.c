/* prom.c — Prometheus text exposition (format 0.0.4) of the meter's aggregates.
 *
 * Every energy series carries a `source` label ("nvml-energy", "rapl", "estimated", …) so an
 * estimate is visibly an estimate wherever it is charted. Label values are escaped (\\, \", \n);
 * GPU gauges NVML did not answer are left out rather than reported as zero.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "meter/meter_int.h"
#include "meter/prom.h"

void fr_prom_escape(fr_buf *o, const char *s) {
    bool utf8 = fr_utf8_valid(s, strlen(s)); /* label values must be UTF-8: else '?' */
    for (; *s; s++) {
        if ((unsigned char)*s >= 0x80 && !utf8) fr_buf_puts(o, "?");
        else if (*s == '\\') fr_buf_puts(o, "\\\\");
        else if (*s == '"') fr_buf_puts(o, "\\\"");
        else if (*s == '\n') fr_buf_puts(o, "\\n");
        else fr_buf_append(o, s, 1);
    }
}

void fr_prom_head(fr_buf *o, const char *name, const char *type, const char *help) {
    fr_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void num(fr_buf *o, double v) {
    if (isnan(v)) fr_buf_puts(o, "NaN");
    else if (isinf(v)) fr_buf_puts(o, v > 0 ? "+Inf" : "-Inf");
    else fr_buf_printf(o, "%.17g", v);
}

static void gpu_gauge(fr_buf *o, const fr_meter_prom *p, const double *v, const char *name,
                      const char *help) {
    bool any = false;
    for (int d = 1; d < p->n_dev; d++) any |= !isnan(v[d]);
    if (!any) return;
    fr_prom_head(o, name, "gauge", help);
    for (int d = 1; d < p->n_dev; d++) {
        if (isnan(v[d])) continue;
        fr_buf_printf(o, "%s{device=\"%s\"} ", name, p->dev[d]);
        num(o, v[d]);
        fr_buf_puts(o, "\n");
    }
}

void fr_meter_prom_format(const fr_meter_prom *p, fr_buf *o) {
    gpu_gauge(o, p, p->power_w, "frugal_gpu_power_watts",
              "GPU board power from NVML (a 1-s average on recent GPUs; display only).");
    gpu_gauge(o, p, p->util, "frugal_gpu_utilization_ratio", "Fraction of time a GPU kernel ran.");
    gpu_gauge(o, p, p->mem_used, "frugal_gpu_memory_used_bytes", "GPU memory in use.");
    gpu_gauge(o, p, p->sm_hz, "frugal_gpu_sm_clock_hertz", "GPU SM clock.");
    gpu_gauge(o, p, p->temp_c, "frugal_gpu_temperature_celsius", "GPU temperature.");

    fr_prom_head(o, "frugal_energy_source_info", "gauge",
         "Where each device's energy comes from (source=\"estimated\" marks an estimate).");
    for (int d = 0; d < p->n_dev; d++)
        fr_buf_printf(o, "frugal_energy_source_info{device=\"%s\",source=\"%s\"} 1\n", p->dev[d],
                      fr_meter_source_name(p->src[d]));

    fr_prom_head(o, "frugal_device_energy_joules_total", "counter",
         "Energy measured on each device since the meter started.");
    for (int d = 0; d < p->n_dev; d++) {
        fr_buf_printf(o, "frugal_device_energy_joules_total{device=\"%s\",source=\"%s\"} ", p->dev[d],
                      fr_meter_source_name(p->src[d]));
        num(o, p->measured_j[d]);
        fr_buf_puts(o, "\n");
    }

    fr_prom_head(o, "frugal_energy_joules_total", "counter",
         "Energy attributed to requests, by device and stage.");
    for (int d = 0; d < p->n_dev; d++)
        for (int s = 0; s < FR_MSTAGE_COUNT; s++) {
            if (p->stage_j[d][s] == 0) continue;
            fr_buf_printf(o, "frugal_energy_joules_total{device=\"%s\",stage=\"%s\",source=\"%s\"} ",
                          p->dev[d], fr_meter_stage_name((fr_meter_stage)s),
                          fr_meter_source_name(p->src[d]));
            num(o, p->stage_j[d][s]);
            fr_buf_puts(o, "\n");
        }

    fr_prom_head(o, "frugal_stage_seconds_total", "counter",
         "Wall time of the stages of closed requests (the sum of their steps), by stage.");
    for (int s = 0; s < FR_MSTAGE_COUNT; s++) {
        if (p->stage_n[s] == 0) continue;
        fr_buf_printf(o, "frugal_stage_seconds_total{stage=\"%s\"} ", fr_meter_stage_name((fr_meter_stage)s));
        num(o, p->stage_s[s]);
        fr_buf_puts(o, "\n");
    }
    fr_prom_head(o, "frugal_stage_requests_total", "counter", "Closed requests that ran the stage, by stage.");
    for (int s = 0; s < FR_MSTAGE_COUNT; s++) {
        if (p->stage_n[s] == 0) continue;
        fr_buf_printf(o, "frugal_stage_requests_total{stage=\"%s\"} %ld\n",
                      fr_meter_stage_name((fr_meter_stage)s), p->stage_n[s]);
    }

    fr_prom_head(o, "frugal_idle_energy_joules_total", "counter",
         "Energy measured while no step ran on the device (not attributed to any request).");
    for (int d = 0; d < p->n_dev; d++) {
        fr_buf_printf(o, "frugal_idle_energy_joules_total{device=\"%s\",source=\"%s\"} ", p->dev[d],
                      fr_meter_source_name(p->src[d]));
        num(o, p->idle_j[d]);
        fr_buf_puts(o, "\n");
    }
    fr_prom_head(o, "frugal_idle_energy_amortised_joules_total", "counter",
         "Part of the idle energy charged to requests by the amortisation policy.");
    fr_buf_puts(o, "frugal_idle_energy_amortised_joules_total ");
    num(o, p->idle_amortised_j);
    fr_buf_puts(o, "\n");

    if (p->n_routes) {
        fr_prom_head(o, "frugal_cost_usd_total", "counter", "Cost of closed requests in US dollars, by route and component.");
        for (int r = 0; r < p->n_routes; r++)
            for (int c = 0; c < FR_COST_N; c++) {
                fr_buf_puts(o, "frugal_cost_usd_total{route=\"");
                fr_prom_escape(o, p->routes[r].name);
                fr_buf_printf(o, "\",component=\"%s\"} ", fr_cost_component_name((fr_cost_component)c));
                num(o, p->routes[r].usd[c]);
                fr_buf_puts(o, "\n");
            }
        fr_prom_head(o, "frugal_route_requests_total", "counter", "Closed requests by route and status.");
        for (int r = 0; r < p->n_routes; r++)
            for (int s = 0; s < 4; s++) {
                fr_buf_puts(o, "frugal_route_requests_total{route=\"");
                fr_prom_escape(o, p->routes[r].name);
                fr_buf_printf(o, "\",status=\"%s\"} %ld\n", fr_meter_status_name((fr_meter_status)s),
                              p->routes[r].n_status[s]);
            }
        fr_prom_head(o, "frugal_request_energy_joules", "histogram",
             "Energy per request (attributed + amortised idle), by route.");
        for (int r = 0; r < p->n_routes; r++) {
            long cum = 0;
            for (int b = 0; b < FR_PROM_NBUCKETS; b++) {
                cum += p->routes[r].bucket[b];
                fr_buf_puts(o, "frugal_request_energy_joules_bucket{route=\"");
                fr_prom_escape(o, p->routes[r].name);
                if (b < FR_PROM_NBUCKETS - 1) fr_buf_printf(o, "\",le=\"%g\"} %ld\n", fr_prom_buckets[b], cum);
                else fr_buf_printf(o, "\",le=\"+Inf\"} %ld\n", cum);
            }
            fr_buf_puts(o, "frugal_request_energy_joules_sum{route=\"");
            fr_prom_escape(o, p->routes[r].name);
            fr_buf_puts(o, "\"} ");
            num(o, p->routes[r].j_sum);
            fr_buf_puts(o, "\nfrugal_request_energy_joules_count{route=\"");
            fr_prom_escape(o, p->routes[r].name);
            fr_buf_printf(o, "\"} %ld\n", cum);
        }
    }
    if (p->n_tiers) {
        fr_prom_head(o, "frugal_slo_attainment_ratio", "gauge", "Fraction of closed requests that met their tier's SLO.");
        for (int t = 0; t < p->n_tiers; t++) {
            long n = p->tiers[t].met + p->tiers[t].missed;
            fr_buf_puts(o, "frugal_slo_attainment_ratio{tier=\"");
            fr_prom_escape(o, p->tiers[t].name);
            fr_buf_puts(o, "\"} ");
            num(o, n ? (double)p->tiers[t].met / (double)n : 1.0);
            fr_buf_puts(o, "\n");
        }
        fr_prom_head(o, "frugal_slo_requests_total", "counter", "Closed requests with an SLO verdict, by tier and result.");
        for (int t = 0; t < p->n_tiers; t++) {
            for (int k = 0; k < 2; k++) {
                fr_buf_puts(o, "frugal_slo_requests_total{tier=\"");
                fr_prom_escape(o, p->tiers[t].name);
                fr_buf_printf(o, "\",result=\"%s\"} %ld\n", k ? "missed" : "met",
                              k ? p->tiers[t].missed : p->tiers[t].met);
            }
        }
    }
    fr_prom_head(o, "frugal_ledger_rows_total", "counter", "Ledger rows committed.");
    fr_buf_printf(o, "frugal_ledger_rows_total %ld\n", p->ledger_rows);
    fr_prom_head(o, "frugal_ledger_dropped_total", "counter", "Ledger rows dropped (queue full or write failure).");
    fr_buf_printf(o, "frugal_ledger_dropped_total %ld\n", p->ledger_dropped);
    fr_prom_head(o, "frugal_traces_exported_total", "counter", "Traces exported.");
    fr_buf_printf(o, "frugal_traces_exported_total %ld\n", p->traces_exported);
    fr_prom_head(o, "frugal_traces_dropped_total", "counter", "Traces dropped (queue full or export failure).");
    fr_buf_printf(o, "frugal_traces_dropped_total %ld\n", p->traces_dropped);
}

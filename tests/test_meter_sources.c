/* test_meter_sources.c — energy sources and attribution, deterministically: the fake NVML
 * (scripted counters) through the meter's own dlopen path, a hand-moved clock, RAPL from a fake
 * powercap tree, and the estimate when neither exists. */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "meter/ledger.h"
#include "meter/sources.h"
#include "meter_util.h"
#include "t.h"

/* ---- rows seen by on_row ---- */
#define MAXROWS 64
static fr_ledger_row rows[MAXROWS];
static fr_ledger_cell cells[MAXROWS][256];
static int nrows;

static void on_row(void *ctx, const fr_ledger_row *r) {
    (void)ctx;
    if (nrows == MAXROWS) return;
    rows[nrows] = *r;
    memcpy(cells[nrows], r->cells, (size_t)r->n_cells * sizeof *r->cells);
    rows[nrows].cells = cells[nrows];
    nrows++;
}

static const fr_ledger_row *row_of(const char *id) {
    for (int i = 0; i < nrows; i++)
        if (!strcmp(rows[i].req_id, id)) return &rows[i];
    return NULL;
}

static double cell_j(const fr_ledger_row *r, const char *dev, fr_meter_stage st) {
    double j = 0;
    for (int i = 0; i < r->n_cells; i++)
        if (!strcmp(r->cells[i].device, dev) && r->cells[i].stage == st) j += r->cells[i].joules;
    return j;
}

static fr_meter *open_with(const char *script, fr_meter_config *c) {
    const char *dir = mu_tmpdir();
    mu_config(c, dir, script);
    c->on_row = on_row;
    nrows = 0;
    fr_err err;
    fr_meter *m = fr_meter_open(c, &err);
    if (!m) fprintf(stderr, "open: %s\n", err.msg);
    return m;
}

static fr_meter_req *req(fr_meter *m, const char *id) {
    fr_meter_req_info in = {0};
    in.id = id;
    in.route = "chat";
    in.tier = "interactive";
    in.modality = "text";
    return fr_meter_request_begin(m, &in);
}

static void end_ok(fr_meter *m, fr_meter_req *r) {
    fr_meter_req_result res = {FR_REQ_OK, 200, NULL, 10, 5, -1, -1};
    fr_meter_request_end(m, r, &res, NULL);
}

TEST(counter_delta_wraps_and_resets) {
    bool reset;
    CHECK_NEAR(fr_nvml_counter_delta_mj(1000, 1500, 0.1, 1000, &reset), 500, 0);
    CHECK(!reset);
    /* 32-bit wrap: 2^32 − 1000 → 3000 is 4000 mJ */
    CHECK_NEAR(fr_nvml_counter_delta_mj(4294966296ULL, 3000, 0.1, 1000, &reset), 4000, 0);
    CHECK(!reset);
    /* 64-bit wrap */
    CHECK_NEAR(fr_nvml_counter_delta_mj(UINT64_MAX - 99, 100, 0.1, 1000, &reset), 200, 0);
    CHECK(!reset);
    /* a reset (driver reload): the new value is the energy since, when plausible */
    CHECK_NEAR(fr_nvml_counter_delta_mj(50000000, 2000, 0.1, 1000, &reset), 2000, 0);
    CHECK(reset);
    /* implausible either way: nothing rather than a spike */
    CHECK_NEAR(fr_nvml_counter_delta_mj(50000000, 40000000, 0.1, 1000, &reset), 0, 0);
    CHECK(reset);
}

TEST(missing_library_is_no_gpu_said_once) {
    const char *dir = mu_tmpdir();
    fr_meter_config c;
    mu_config(&c, dir, NULL);
    snprintf(c.nvml_lib, sizeof c.nvml_lib, "%s/libnvidia-ml.so.1", dir);
    char logp[600];
    snprintf(logp, sizeof logp, "%s/log", dir);
    fflush(stderr);
    int saved = dup(2), fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
    fr_err err;
    fr_log_level = FR_LOG_INFO;
    fr_meter *m = fr_meter_open(&c, &err);
    for (int i = 1; i <= 5; i++) {
        mu_now = i;
        fr_meter_tick(m);
    }
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    fr_meter_close(m);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fr_log_level = FR_LOG_WARN;
    CHECK_EQ_INT(t.n_dev, 1);
    CHECK_STR(t.name[0], "cpu");
    size_t n;
    char *log = fr_read_file(logp, 1 << 20, &n, NULL);
    int count = 0;
    for (const char *p = log; (p = strstr(p, "no GPU energy source")); p++) count++;
    CHECK_EQ_INT(count, 1);
    CHECK(strstr(log, "estimated") != NULL);
    free(log);
}

TEST(env_selects_the_library_and_init_failure_is_no_gpu) {
    const char *dir = mu_tmpdir();
    fr_meter_config c;
    mu_config(&c, dir, "count 2\n");
    snprintf(c.nvml_lib, sizeof c.nvml_lib, "/nonexistent/libnvidia-ml.so.1");
    setenv("FRUGAL_NVML_LIB", mu_fakenvml(), 1);
    fr_err err;
    fr_meter *m = fr_meter_open(&c, &err);
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    fr_meter_close(m);
    CHECK_EQ_INT(t.n_dev, 3);
    CHECK_STR(t.name[2], "gpu1");
    CHECK(t.source[1] == FR_MSRC_NVML_ENERGY);

    mu_config(&c, dir, "count 2\ninit_fail\n");
    m = fr_meter_open(&c, &err);
    fr_meter_get_totals(m, &t);
    fr_meter_close(m);
    CHECK_EQ_INT(t.n_dev, 1);
}

/* The response figure of a request whose GPU step ends after the last knot: the unaccounted part
 * is extrapolated at the GPU's power over its last knot interval (1 W here), so it is 0.5 J and
 * not 0 (the pass drops the knots it has passed; the power must survive it); once the next knot
 * is accounted the final figure is the same 0.5 J and fr_meter_request_final returns it. */
TEST(provisional_figure_uses_the_last_power) {
    fr_meter_config c;
    fr_meter *m = open_with("count 1\nenergy 0 0 1000 2000 3000\n", &c); /* the first read probes */
    fr_meter_req *r = req(m, "p1");
    mu_now = 1.0;
    fr_meter_tick(m);
    mu_now = 2.0;
    fr_meter_tick(m);
    fr_meter_step *s = fr_meter_stage_begin(m, r, FR_MSTAGE_DECODE, fr_meter_dev_gpu(0));
    mu_now = 2.5;
    fr_meter_step_end(m, s);
    fr_meter_req_summary sum, fin;
    fr_meter_req_result res = {FR_REQ_OK, 200, NULL, 1, 1, -1, -1};
    fr_meter_request_end(m, r, &res, &sum);
    CHECK_NEAR(sum.joules, 0.5, 1e-9);
    CHECK(!sum.final);
    mu_now = 3.0;
    fr_meter_tick(m);
    CHECK(fr_meter_request_final(m, "p1", &fin));
    CHECK(fin.final);
    CHECK_NEAR(fin.joules, 0.5, 1e-9);
    const fr_ledger_row *x = row_of("p1");
    CHECK(x != NULL);
    if (x) CHECK_NEAR(fin.joules, x->joules + x->joules_idle, 1e-12);
    fr_meter_close(m);
}

/* Counter: 0 J at t=0, 1 J at t=1, 3 J at t=2, unchanged at t=3, 7 J at t=4.
 * Step A [0.5, 1.5] serves r1 (3 tokens) and r2 (1), step B [1.0, 2.0] serves r3.
 *   [0, 0.5] idle 0.5 J; [0.5, 1] A 0.5 J; [1, 1.5] A and B share 1 J; [1.5, 2] B 1 J
 *   A = 1 J → r1 0.75, r2 0.25; B = 1.5 J → r3; then [2, 4] idle 4 J. */
TEST(interpolation_and_share_split) {
    fr_meter_config c;
    fr_meter *m = open_with("count 1\nenergy 0 1000 2000 4000 4000 8000\n", &c);
    fr_meter_req *r1 = req(m, "r1"), *r2 = req(m, "r2"), *r3 = req(m, "r3");
    mu_now = 0.5;
    fr_meter_share a[2] = {{r1, 3, FR_MSTAGE_DECODE}, {r2, 1, FR_MSTAGE_DECODE}};
    fr_meter_step *sa = fr_meter_step_begin(m, fr_meter_dev_gpu(0), a, 2);
    mu_now = 1.0;
    fr_meter_tick(m);
    fr_meter_share b = {r3, 7, FR_MSTAGE_PREFILL};
    fr_meter_step *sb = fr_meter_step_begin(m, fr_meter_dev_gpu(0), &b, 1);
    mu_now = 1.5;
    fr_meter_step_end(m, sa);
    mu_now = 2.0;
    fr_meter_step_end(m, sb);
    fr_meter_tick(m);
    end_ok(m, r1);
    end_ok(m, r2);
    fr_meter_req_summary sum;
    fr_meter_req_result res = {FR_REQ_OK, 200, NULL, 7, 0, -1, -1};
    fr_meter_request_end(m, r3, &res, &sum);
    CHECK_NEAR(sum.joules, 1.5, 1e-9); /* fully accounted already: exact */
    CHECK(!sum.estimated);
    mu_now = 3.0;
    fr_meter_tick(m); /* unchanged counter: no knot, but the ready requests close */
    CHECK_EQ_INT(nrows, 3);
    const fr_ledger_row *x1 = row_of("r1"), *x2 = row_of("r2"), *x3 = row_of("r3");
    CHECK(x1 && x2 && x3);
    if (x1 && x2 && x3) {
        CHECK_NEAR(x1->joules, 0.75, 1e-9);
        CHECK_NEAR(x2->joules, 0.25, 1e-9);
        CHECK_NEAR(x3->joules, 1.5, 1e-9);
        CHECK_NEAR(cell_j(x3, "gpu0", FR_MSTAGE_PREFILL), 1.5, 1e-9);
        CHECK_STR(x1->stages, "decode");
        CHECK_STR(x3->stages, "prefill");
        CHECK_STR(x1->energy_source, "gpu0:nvml-energy");
        CHECK(!x1->estimated && !x1->incomplete);
        CHECK_NEAR(x1->t_start, 1700000000.0, 1e-6);
        CHECK_NEAR(x3->latency_s, 2.0, 1e-9);
    }
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    CHECK_NEAR(t.measured_j[1], 3.0, 1e-9);
    CHECK_NEAR(t.attributed_j[1], 2.5, 1e-9);
    CHECK_NEAR(t.idle_j[1], 0.5, 1e-9);
    mu_now = 4.0;
    fr_meter_tick(m);
    fr_meter_get_totals(m, &t);
    CHECK_NEAR(t.measured_j[1], 7.0, 1e-9);
    CHECK_NEAR(t.idle_j[1], 4.5, 1e-9);
    CHECK_NEAR(t.attributed_j[1] + t.idle_j[1], t.measured_j[1], 1e-12);
    fr_meter_close(m);
}

TEST(counter_wrap_is_unfolded) {
    fr_meter_config c;
    fr_meter *m = open_with("energy 0 4294966296 4294967000 3000 3000\n", &c);
    mu_now = 1;
    fr_meter_tick(m);
    mu_now = 2;
    fr_meter_tick(m);
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    CHECK_NEAR(t.measured_j[1], 0.704 + 3.296, 1e-9);
    fr_meter_close(m);
}

TEST(counter_reset_counts_energy_since_reset) {
    fr_meter_config c;
    fr_meter *m = open_with("energy 0 10000000 10001000 500\n", &c);
    mu_now = 1;
    fr_meter_tick(m);
    mu_now = 2;
    fr_meter_tick(m);
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    CHECK_NEAR(t.measured_j[1], 1.5, 1e-9);
    fr_meter_close(m);
}

TEST(unchanged_counter_becomes_a_knot_after_max_stale) {
    fr_meter_config c;
    fr_meter *m = open_with("energy 0 1000 1000 1000 1000 2000\n", &c);
    fr_meter_totals t;
    mu_now = 0.4;
    fr_meter_tick(m);
    fr_meter_get_totals(m, &t);
    CHECK_NEAR(t.frontier_s, 0.0, 1e-12); /* no news yet */
    mu_now = 0.8;
    fr_meter_tick(m);
    mu_now = 1.2; /* 1.2 s since the last knot > max_stale 1 s: a knot, 0 J */
    fr_meter_tick(m);
    fr_meter_get_totals(m, &t);
    CHECK_NEAR(t.frontier_s, 1.2, 1e-12);
    CHECK_NEAR(t.measured_j[1], 0, 1e-12);
    mu_now = 1.6;
    fr_meter_tick(m);
    fr_meter_get_totals(m, &t);
    CHECK_NEAR(t.measured_j[1], 1.0, 1e-12);
    fr_meter_close(m);
}

TEST(not_supported_counter_integrates_power) {
    fr_meter_config c;
    fr_meter *m = open_with("energy 0 NS\npower 0 200000\nutil 0 NS\nclock 0 NS\n", &c);
    fr_meter_req *r = req(m, "p1");
    fr_meter_step *s = fr_meter_stage_begin(m, r, FR_MSTAGE_VISION, fr_meter_dev_gpu(0));
    mu_now = 1;
    fr_meter_tick(m);
    fr_meter_step_end(m, s);
    end_ok(m, r);
    mu_now = 2;
    fr_meter_tick(m);
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    CHECK(t.source[1] == FR_MSRC_NVML_POWER);
    CHECK_NEAR(t.measured_j[1], 400, 1e-9);
    const fr_ledger_row *x = row_of("p1");
    CHECK(x != NULL);
    if (x) {
        CHECK_NEAR(x->joules, 200, 1e-9);
        CHECK_STR(x->energy_source, "gpu0:nvml-power");
    }
    fr_buf b = {0};
    fr_meter_prometheus(m, &b);
    const char *txt = fr_buf_cstr(&b);
    CHECK(strstr(txt, "frugal_gpu_power_watts{device=\"gpu0\"} 200\n") != NULL);
    CHECK(strstr(txt, "frugal_gpu_utilization_ratio") == NULL); /* NOT_SUPPORTED: absent, not 0 */
    CHECK(strstr(txt, "frugal_gpu_sm_clock_hertz") == NULL);
    CHECK(strstr(txt, "frugal_gpu_temperature_celsius{device=\"gpu0\"} 45") != NULL);
    fr_buf_free(&b);
    fr_meter_close(m);
}

TEST(no_energy_at_all_is_unmeasured_not_zero) {
    fr_meter_config c;
    fr_meter *m = open_with("energy 0 NS\npower 0 NS\n", &c);
    fr_meter_req *r = req(m, "n1");
    fr_meter_step *s = fr_meter_stage_begin(m, r, FR_MSTAGE_DECODE, fr_meter_dev_gpu(0));
    mu_now = 1;
    fr_meter_step_end(m, s);
    end_ok(m, r);
    fr_meter_tick(m);
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    CHECK(t.source[1] == FR_MSRC_NONE);
    CHECK_NEAR(t.unmeasured_s, 1.0, 1e-9);
    const fr_ledger_row *x = row_of("n1");
    CHECK(x && x->incomplete);
    if (x) CHECK_STR(x->energy_source, "gpu0:none");
    fr_meter_close(m);
}

TEST(gpu_that_disappears) {
    fr_meter_config c;
    fr_meter *m = open_with("energy 0 1000 2000 3000 4000 5000\nlost_after 0 3\n", &c);
    fr_meter_req *r = req(m, "l1");
    mu_now = 1;
    fr_meter_tick(m); /* 2000 */
    mu_now = 1.5;
    fr_meter_step *s = fr_meter_stage_begin(m, r, FR_MSTAGE_DECODE, fr_meter_dev_gpu(0));
    mu_now = 2;
    fr_meter_tick(m); /* 3000: the step gets [1.5, 2] = 0.5 J */
    mu_now = 3;
    fr_meter_tick(m); /* lost */
    mu_now = 3.5;
    fr_meter_step_end(m, s);
    end_ok(m, r);
    mu_now = 4;
    fr_meter_tick(m);
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    CHECK(t.source[1] == FR_MSRC_LOST);
    CHECK_NEAR(t.measured_j[1], 2.0, 1e-9);
    CHECK_NEAR(t.unmeasured_s, 1.5, 1e-9);
    const fr_ledger_row *x = row_of("l1");
    CHECK(x != NULL);
    if (x) {
        CHECK(x->incomplete);
        CHECK_NEAR(x->joules, 0.5, 1e-9);
        CHECK_STR(x->energy_source, "gpu0:lost");
    }
    /* a step begun on the lost GPU closes at once as unmeasured */
    fr_meter_req *r2 = req(m, "l2");
    fr_meter_step *s2 = fr_meter_stage_begin(m, r2, FR_MSTAGE_DECODE, fr_meter_dev_gpu(0));
    mu_now = 5;
    fr_meter_step_end(m, s2);
    end_ok(m, r2);
    fr_meter_tick(m);
    const fr_ledger_row *y = row_of("l2");
    CHECK(y && y->incomplete);
    fr_buf b = {0};
    fr_meter_prometheus(m, &b);
    CHECK(strstr(fr_buf_cstr(&b), "frugal_energy_source_info{device=\"gpu0\",source=\"lost\"} 1") != NULL);
    fr_buf_free(&b);
    fr_meter_close(m);
}

TEST(step_on_a_device_that_does_not_exist) {
    fr_meter_config c;
    fr_meter *m = open_with("count 1\n", &c);
    fr_meter_req *r = req(m, "x1");
    fr_meter_step *s = fr_meter_stage_begin(m, r, FR_MSTAGE_VISION, fr_meter_dev_gpu(5));
    mu_now = 0.25;
    fr_meter_step_end(m, s);
    end_ok(m, r);
    mu_now = 1;
    fr_meter_tick(m);
    const fr_ledger_row *x = row_of("x1");
    CHECK(x && x->incomplete);
    if (x) CHECK_NEAR(x->joules, 0, 0);
    fr_meter_close(m);
}

/* ---- RAPL ---- */

static void rapl_zone(const char *root, const char *zone, const char *name, const char *energy,
                      const char *max) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", root, zone);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/%s/name", root, zone);
    mu_write(p, name);
    if (energy) {
        snprintf(p, sizeof p, "%s/%s/energy_uj", root, zone);
        mu_write(p, energy);
    }
    if (max) {
        snprintf(p, sizeof p, "%s/%s/max_energy_range_uj", root, zone);
        mu_write(p, max);
    }
}

TEST(rapl_packages_and_wrap) {
    const char *root = mu_tmpdir();
    rapl_zone(root, "intel-rapl:0", "package-0\n", "999000\n", "1000000\n");
    rapl_zone(root, "intel-rapl:0:0", "core\n", "5\n", "1000000\n"); /* sub-zone: not added */
    rapl_zone(root, "intel-rapl:1", "package-1\n", "100\n", "262143328850\n");
    rapl_zone(root, "intel-rapl:2", "psys\n", "7\n", "1000000\n"); /* not a package */
    char why[256];
    fr_cpu_energy *c = fr_cpu_energy_open(root, 0, 5, why, sizeof why);
    CHECK(c != NULL);
    CHECK(fr_cpu_energy_source(c) == FR_MSRC_RAPL);
    CHECK(strstr(why, "2 packages") != NULL);
    double j = -1;
    CHECK_EQ_INT(fr_cpu_energy_read(c, &j), 0);
    CHECK_NEAR(j, 0, 0);
    char p[1024];
    snprintf(p, sizeof p, "%s/intel-rapl:0/energy_uj", root);
    mu_write(p, "1000\n"); /* wrapped: 1000000 − 999000 + 1000 = 2000 µJ */
    snprintf(p, sizeof p, "%s/intel-rapl:1/energy_uj", root);
    mu_write(p, "3000100\n"); /* +3 J */
    CHECK_EQ_INT(fr_cpu_energy_read(c, &j), 0);
    CHECK_NEAR(j, 3.002, 1e-9);
    fr_cpu_energy_close(c);

    /* mode "rapl" on a tree without readable counters fails; auto falls back to the estimate */
    const char *empty = mu_tmpdir();
    rapl_zone(empty, "intel-rapl:0", "package-0\n", NULL, "1000\n");
    CHECK(fr_cpu_energy_open(empty, 1, 5, why, sizeof why) == NULL);
    c = fr_cpu_energy_open(empty, 0, 5, why, sizeof why);
    CHECK(c && fr_cpu_energy_source(c) == FR_MSRC_ESTIMATED);
    CHECK(strstr(why, "estimated") != NULL);
    fr_cpu_energy_close(c);
}

TEST(rapl_through_the_meter) {
    const char *dir = mu_tmpdir();
    fr_meter_config c;
    mu_config(&c, dir, "count 0\n");
    char root[300];
    snprintf(root, sizeof root, "%s/powercap", dir);
    mkdir(root, 0755);
    rapl_zone(root, "intel-rapl:0", "package-0\n", "0\n", "1000000000\n");
    snprintf(c.rapl_root, sizeof c.rapl_root, "%s", root);
    c.cpu_source = 0;
    c.on_row = on_row;
    nrows = 0;
    fr_err err;
    fr_meter *m = fr_meter_open(&c, &err);
    fr_meter_req *r = req(m, "c1");
    mu_now = 1;
    fr_meter_step *s = fr_meter_stage_begin(m, r, FR_MSTAGE_OCR, FR_METER_DEV_CPU);
    char p[1024];
    snprintf(p, sizeof p, "%s/intel-rapl:0/energy_uj", root);
    mu_write(p, "40000000\n"); /* 40 J at t = 2 */
    mu_now = 2;
    fr_meter_tick(m);
    mu_now = 3;
    fr_meter_step_end(m, s);
    end_ok(m, r);
    mu_write(p, "60000000\n"); /* 60 J at t = 3 */
    fr_meter_tick(m);
    mu_now = 4;
    fr_meter_tick(m);
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    CHECK(t.source[0] == FR_MSRC_RAPL);
    CHECK_NEAR(t.measured_j[0], 60, 1e-9);
    CHECK_NEAR(t.idle_j[0], 20, 1e-9);
    const fr_ledger_row *x = row_of("c1");
    CHECK(x != NULL);
    if (x) {
        CHECK_NEAR(x->joules, 40, 1e-9);
        CHECK_STR(x->energy_source, "cpu:rapl");
        CHECK(!x->estimated);
    }
    fr_meter_close(m);
}

TEST(estimate_when_neither_exists_is_labelled) {
    const char *dir = mu_tmpdir();
    fr_meter_config c;
    mu_config(&c, dir, NULL);
    c.nvml = false;
    c.cpu_source = 0;
    c.cpu_watts_per_core = 10;
    c.on_row = on_row;
    nrows = 0;
    fr_err err;
    fr_meter *m = fr_meter_open(&c, &err);
    fr_meter_req *r = req(m, "e1");
    fr_meter_step *s = fr_meter_stage_begin(m, r, FR_MSTAGE_NLU, FR_METER_DEV_CPU);
    double cpu0 = fr_process_cpu_s();
    volatile double x = 0;
    while (fr_process_cpu_s() - cpu0 < 0.05)
        for (int i = 0; i < 10000; i++) x += i * 1e-9;
    mu_now = 1;
    fr_meter_tick(m);
    fr_meter_step_end(m, s);
    fr_meter_req_summary sum;
    fr_meter_req_result res = {FR_REQ_OK, 200, NULL, 1, 1, -1, -1};
    fr_meter_request_end(m, r, &res, &sum);
    CHECK(sum.estimated);
    mu_now = 2;
    fr_meter_tick(m);
    fr_meter_totals t;
    fr_meter_get_totals(m, &t);
    CHECK(t.source[0] == FR_MSRC_ESTIMATED);
    CHECK(t.measured_j[0] >= 0.5 * 0.9); /* ≥ 50 ms × 10 W */
    const fr_ledger_row *y = row_of("e1");
    CHECK(y != NULL);
    if (y) {
        CHECK(y->estimated);
        CHECK_STR(y->energy_source, "cpu:estimated");
        CHECK(y->joules > 0.4); /* never a silent zero */
    }
    fr_buf b = {0};
    fr_meter_prometheus(m, &b);
    const char *txt = fr_buf_cstr(&b);
    CHECK(strstr(txt, "frugal_energy_joules_total{device=\"cpu\",stage=\"nlu\",source=\"estimated\"}") != NULL);
    CHECK(strstr(txt, "frugal_energy_source_info{device=\"cpu\",source=\"estimated\"} 1") != NULL);
    fr_buf_free(&b);
    fr_meter_close(m);
}

int main(void) {
    unsetenv("FRUGAL_LOG"); /* the log test below needs info messages */
    fr_log_level = FR_LOG_WARN;
    return t_main();
}

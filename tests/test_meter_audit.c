/* test_meter_audit.c — audit, A/B and ROI on the recorded ledger fixtures
 * (tests/fixtures/ledger/run.sql, after.sql); the expected numbers are printed by
 * tests/fixtures/ledger/make_fixture.py, which computes them independently. Also: the fixture's
 * schema is the ledger's, the PNG is valid, the HTML has the heatmap, statistics. */
#include <sqlite3.h>
#include <png.h>

#include "meter/audit.h"
#include "meter/ledger.h"
#include "meter_util.h"
#include "t.h"

static char run_sql[512], after_sql[512];

static void paths(void) {
    snprintf(run_sql, sizeof run_sql, "%s/ledger/run.sql", t_fixtures());
    snprintf(after_sql, sizeof after_sql, "%s/ledger/after.sql", t_fixtures());
}

static int load(fr_audit *a, const char *path) {
    fr_err err;
    fr_audit_opts o = {0, 0, NULL};
    int rc = fr_audit_load(a, path, &o, &err);
    if (rc) fprintf(stderr, "  load: %s\n", err.msg);
    return rc;
}

/* "name type" of every column of every table, sorted. */
static void schema_of(sqlite3 *db, fr_buf *out) {
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db,
                       "SELECT m.name || '.' || p.name || ' ' || p.type FROM sqlite_master m, pragma_table_info(m.name) p"
                       " WHERE m.type = 'table' ORDER BY m.name, p.cid",
                       -1, &st, NULL);
    while (sqlite3_step(st) == SQLITE_ROW) {
        fr_buf_puts(out, (const char *)sqlite3_column_text(st, 0));
        fr_buf_puts(out, "\n");
    }
    sqlite3_finalize(st);
}

TEST(fixture_schema_is_the_ledgers) {
    paths();
    sqlite3 *a, *b;
    sqlite3_open(":memory:", &a);
    sqlite3_open(":memory:", &b);
    CHECK_EQ_INT(fr_ledger_schema(a, NULL), 0);
    size_t n;
    char *sql = fr_read_file(run_sql, 1 << 24, &n, NULL);
    CHECK(sql && sqlite3_exec(b, sql, NULL, NULL, NULL) == SQLITE_OK);
    free(sql);
    fr_buf x = {0}, y = {0};
    schema_of(a, &x);
    schema_of(b, &y);
    CHECK(x.len > 100);
    CHECK_STR(fr_buf_cstr(&x), fr_buf_cstr(&y));
    fr_buf_free(&x);
    fr_buf_free(&y);
    sqlite3_close(a);
    sqlite3_close(b);
}

static int cand(const fr_audit_report *r, const char *id) {
    for (int i = 0; i < r->n_cand; i++)
        if (!strcmp(r->cand[i].id, id)) return i;
    return -1;
}

static int modi(const fr_audit_report *r, const char *m) {
    for (int i = 0; i < r->n_mod; i++)
        if (!strcmp(r->mod[i], m)) return i;
    return -1;
}

TEST(audit_on_the_recorded_ledger) {
    paths();
    fr_audit a;
    CHECK_EQ_INT(load(&a, run_sql), 0);
    CHECK(a.cfg_from_ledger);
    CHECK_NEAR(a.cfg.cost.usd_per_kwh, 0.15, 0);
    fr_audit_report r;
    fr_audit_compute(&a, &r);
    /* (1) window */
    CHECK_EQ_INT(r.n, 200);
    CHECK_EQ_INT(r.n_status[FR_REQ_OK], 179);
    CHECK_EQ_INT(r.n_status[FR_REQ_REJECTED], 8);
    CHECK_EQ_INT(r.n_status[FR_REQ_CANCELLED], 5);
    CHECK_EQ_INT(r.n_status[FR_REQ_FAILED], 8);
    CHECK_NEAR(r.window_s, 1000, 1e-6);
    CHECK_NEAR(r.measured_j, 113615.089693, 1e-5);
    CHECK_NEAR(r.idle_j, 49581.889674, 1e-5);
    CHECK_NEAR(r.usd_total, 0.697868422527, 1e-10);
    CHECK(r.any_estimated);
    /* (2) heatmap, (3) bottleneck */
    CHECK_EQ_INT(r.n_mod, 3);
    CHECK_STR(r.mod[r.bot_mod], "text");
    CHECK_STR(fr_audit_col_name(r.bot_stage), "decode");
    double row = 0, col = 0;
    for (int c = 0; c < FR_AUDIT_COLS; c++) row += r.usd[r.bot_mod][c];
    for (int m = 0; m < r.n_mod; m++) col += r.usd[m][FR_MSTAGE_DECODE];
    CHECK_NEAR(100 * row / r.tot_usd, 50.907318, 1e-5);
    CHECK_NEAR(100 * col / r.tot_usd, 79.364079, 1e-5);
    int img = modi(&r, "image");
    CHECK(img >= 0);
    if (img >= 0) CHECK_NEAR(100 * r.usd[img][FR_MSTAGE_VISION] / r.tot_usd, 3.143003, 1e-5);
    CHECK_STR(fr_audit_col_name(r.lat_stage), "decode");
    /* (4) candidates, ranked */
    CHECK_EQ_INT(r.n_cand, 5);
    CHECK_STR(r.cand[0].id, "idle_capacity");
    CHECK_STR(r.cand[1].id, "waste");
    CHECK_STR(r.cand[2].id, "skip_vision");
    CHECK_STR(r.cand[3].id, "idle_energy");
    CHECK_STR(r.cand[4].id, "cooling");
    CHECK_NEAR(r.cand[cand(&r, "skip_vision")].usd, 0.006655607649, 1e-11);
    CHECK(strstr(r.cand[2].text, "(12 of 40)") != NULL);
    CHECK(strstr(r.cand[2].text, "on 30 %") != NULL);
    CHECK_NEAR(r.cand[cand(&r, "waste")].usd, 0.020619362359, 1e-11);
    CHECK_NEAR(r.cand[cand(&r, "idle_energy")].usd, 0.003098868105, 1e-11);
    CHECK_NEAR(r.cand[cand(&r, "idle_capacity")].usd, 2.139466985808, 1e-9);
    CHECK_NEAR(r.cand[cand(&r, "cooling")].usd, 0.001420188621, 1e-11);
    CHECK_NEAR(r.cand[0].usd_year, 2.139466985808 * 31557.6, 1e-4);
    fr_audit_free(&a);

    /* the optimised configuration: nothing left to skip */
    CHECK_EQ_INT(load(&a, after_sql), 0);
    fr_audit_compute(&a, &r);
    CHECK_EQ_INT(cand(&r, "skip_vision"), -1);
    CHECK_NEAR(r.measured_j, 84294.477621, 1e-5);
    CHECK_NEAR(r.usd_total, 0.690605293660, 1e-10);
    fr_audit_free(&a);
}

TEST(audit_window_filter_and_config_override) {
    paths();
    fr_audit a;
    fr_err err;
    fr_audit_opts o = {1718000500.0, 0, NULL};
    CHECK_EQ_INT(fr_audit_load(&a, run_sql, &o, &err), 0);
    CHECK_EQ_INT(a.n, 100); /* requests 100..199 end after T0 + 500 */
    fr_audit_free(&a);
    fr_meter_config c;
    fr_meter_config_default(&c);
    c.cost.pue = 1.0; /* no cooling candidate */
    o.since = 0;
    o.config = &c;
    CHECK_EQ_INT(fr_audit_load(&a, run_sql, &o, &err), 0);
    CHECK(!a.cfg_from_ledger);
    fr_audit_report r;
    fr_audit_compute(&a, &r);
    CHECK_EQ_INT(cand(&r, "cooling"), -1);
    fr_audit_free(&a);
    CHECK_EQ_INT(fr_audit_load(&a, "/nonexistent/ledger.db", &o, &err), -1);
    CHECK(strstr(err.msg, "no such file") != NULL);
}

TEST(statistics) {
    CHECK_NEAR(fr_meter_stat_t_quantile(0.975, 1), 12.706204736, 1e-6);
    CHECK_NEAR(fr_meter_stat_t_quantile(0.975, 10), 2.228138852, 1e-8);
    CHECK_NEAR(fr_meter_stat_t_quantile(0.975, 30), 2.042272456, 1e-8);
    CHECK_NEAR(fr_meter_stat_t_quantile(0.975, 1e6), 1.959966, 1e-5);
    CHECK_NEAR(fr_meter_stat_t_quantile(0.025, 10), -2.228138852, 1e-8);
    double v[] = {5, 1, 4, 2, 3};
    CHECK_NEAR(fr_meter_stat_percentile(v, 5, 0.5), 3, 0);
    CHECK_NEAR(fr_meter_stat_percentile(v, 5, 0.99), 4.96, 1e-12);
    double ci[2];
    fr_meter_stat_wilson(84, 100, 1.959963984540054, ci);
    CHECK_NEAR(ci[0], 0.75573, 1e-4);
    CHECK_NEAR(ci[1], 0.89905, 1e-4);
}

TEST(ab_on_the_recorded_ledger) {
    paths();
    fr_audit a;
    CHECK_EQ_INT(load(&a, run_sql), 0);
    fr_ab_report r;
    fr_err err;
    CHECK_EQ_INT(fr_audit_ab(&a, NULL, 0, &r, &err), 0);
    CHECK_EQ_INT(r.n_arms, 2);
    CHECK_STR(r.arm[0].name, "control");
    CHECK_STR(r.arm[1].name, "vision_off");
    CHECK_EQ_INT(r.arm[0].n, 100);
    CHECK_NEAR(r.arm[0].usd_1k, 3.606258421894, 1e-9);
    CHECK_NEAR(r.arm[1].usd_1k, 3.372425803373, 1e-9);
    CHECK_NEAR(r.arm[0].j_req, 330.123748911, 1e-6);
    CHECK_NEAR(r.arm[1].j_req, 310.208251275, 1e-6);
    CHECK_NEAR(r.arm[0].p50, 1.447926531, 1e-8);
    CHECK_NEAR(r.arm[0].p99, 2.432629399, 1e-8);
    CHECK_NEAR(r.arm[1].p50, 1.467335717, 1e-8);
    CHECK_NEAR(r.arm[1].p99, 2.642033079, 1e-8);
    CHECK_NEAR(r.arm[0].slo, 0.84, 1e-12);
    CHECK_NEAR(r.arm[1].slo, 0.84, 1e-12);
    for (int k = 0; k < 2; k++) {
        const fr_ab_arm *x = &r.arm[k];
        CHECK(x->usd_1k_ci[0] < x->usd_1k && x->usd_1k < x->usd_1k_ci[1]);
        CHECK(x->j_req_ci[0] < x->j_req && x->j_req < x->j_req_ci[1]);
        CHECK(x->p50_ci[0] <= x->p50 && x->p50 <= x->p50_ci[1]);
        CHECK(x->p99_ci[0] <= x->p99 + 1e-9 && x->p99_ci[1] >= x->p99 - 0.5);
        CHECK_NEAR(x->slo_ci[0], 0.75573, 1e-4);
    }
    const fr_ab_diff *d = &r.diff[1];
    CHECK_NEAR(d->usd_1k, 3.372425803373 - 3.606258421894, 1e-9);
    CHECK(d->usd_1k_ci[0] < d->usd_1k && d->usd_1k < d->usd_1k_ci[1]);
    CHECK_NEAR(d->j_req, 310.208251275 - 330.123748911, 1e-6);
    CHECK_NEAR(d->slo, 0, 1e-12);
    CHECK(d->slo_ci[0] < 0 && d->slo_ci[1] > 0);
    /* deterministic: the same intervals twice */
    fr_ab_report r2;
    const char *arms[] = {"control", "vision_off"};
    CHECK_EQ_INT(fr_audit_ab(&a, arms, 2, &r2, &err), 0);
    CHECK_NEAR(r2.diff[1].p99_ci[0], d->p99_ci[0], 0);
    CHECK_NEAR(r2.arm[1].p50_ci[1], r.arm[1].p50_ci[1], 0);
    const char *bad[] = {"control", "nope"};
    CHECK_EQ_INT(fr_audit_ab(&a, bad, 2, &r2, &err), -1);
    CHECK(strstr(err.msg, "'nope'") != NULL);
    fr_audit_free(&a);
    CHECK_EQ_INT(load(&a, after_sql), 0);
    CHECK_EQ_INT(fr_audit_ab(&a, NULL, 0, &r2, &err), -1); /* no arms there */
    fr_audit_free(&a);
}

TEST(roi_two_arms_and_two_ledgers) {
    paths();
    fr_audit a, b;
    fr_err err;
    CHECK_EQ_INT(load(&a, run_sql), 0);
    CHECK_EQ_INT(load(&b, after_sql), 0);
    fr_roi_side c, v, all, aft;
    CHECK_EQ_INT(fr_roi_measure(&a, "control", NULL, &c, &err), 0);
    CHECK_EQ_INT(fr_roi_measure(&a, "vision_off", NULL, &v, &err), 0);
    CHECK_EQ_INT(fr_roi_measure(&a, NULL, "before", &all, &err), 0);
    CHECK_EQ_INT(fr_roi_measure(&b, NULL, "after", &aft, &err), 0);
    CHECK_NEAR(c.qps, 0.2, 1e-12);
    CHECK_NEAR(c.sla, 0.84, 1e-12);
    CHECK_NEAR(c.j_req, 578.033197282, 1e-6);
    CHECK_NEAR(c.power_w, 115.606639456, 1e-6);
    CHECK_NEAR(c.elec_yr, 152.011170221, 1e-6);
    CHECK_NEAR(c.cool_yr, 76.005585111, 1e-6);
    CHECK_NEAR(c.dep_yr, 63115.2, 1e-6);
    CHECK_NEAR(c.labour_yr, 26298, 1e-6);
    CHECK_NEAR(c.tco_yr, 89641.216755332, 1e-6);
    CHECK_NEAR(c.usd_req, 0.0142027937415, 1e-12);
    CHECK_NEAR(v.j_req, 558.117699646, 1e-6);
    CHECK_NEAR(v.tco_yr, 89633.360688979, 1e-6);
    CHECK_NEAR(v.usd_req, 0.0142015490229, 1e-12);
    CHECK_NEAR(all.j_req, 568.075448464, 1e-6);
    CHECK_NEAR(all.tco_yr, 89637.288722155, 1e-6);
    CHECK_NEAR(aft.j_req, 421.472388107, 1e-6);
    CHECK_NEAR(aft.power_w, 84.294477621, 1e-6);
    CHECK_NEAR(aft.tco_yr, 89579.458212937, 1e-6);
    CHECK_NEAR(aft.usd_req, 0.0141930086909, 1e-12);
    CHECK_STR(aft.label, "after");
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    fr_roi_print(&all, &aft, f);
    fclose(f);
    CHECK(strstr(out, "energy / request (J)") != NULL);
    CHECK(strstr(out, "568.08") && strstr(out, "421.47") && strstr(out, "-146.60") && strstr(out, "-25.8 %"));
    free(out);
    CHECK_EQ_INT(fr_roi_measure(&a, "nope", NULL, &c, &err), -1);
    fr_audit_free(&a);
    fr_audit_free(&b);
}

/* Decodes a PNG with libpng into 8-bit RGB (malloc'd, w*h*3 bytes), or NULL. */
static unsigned char *png_decode_rgb(const unsigned char *png, size_t n, uint32_t *w, uint32_t *h) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&im, png, n)) return NULL;
    im.format = PNG_FORMAT_RGB;
    unsigned char *px = malloc(PNG_IMAGE_SIZE(im));
    if (!px || !png_image_finish_read(&im, NULL, px, 0, NULL)) {
        png_image_free(&im);
        free(px);
        return NULL;
    }
    *w = im.width;
    *h = im.height;
    return px;
}

/* The encoder keeps every pixel: random images of awkward sizes decode back byte for byte. */
TEST(png_encode_round_trip) {
    static const int sizes[][2] = {{1, 1}, {3, 2}, {17, 5}, {640, 3}, {257, 129}};
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t k = 0; k < FR_ARRAY_LEN(sizes); k++) {
        int w = sizes[k][0], h = sizes[k][1];
        size_t nb = (size_t)w * (size_t)h * 3;
        unsigned char *rgb = malloc(nb);
        for (size_t i = 0; i < nb; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            rgb[i] = k == 3 ? (unsigned char)(i % 251) : (unsigned char)(s >> 24);
        }
        size_t n = 0;
        unsigned char *png = fr_meter_png_encode(rgb, w, h, &n);
        CHECK(png != NULL);
        uint32_t dw = 0, dh = 0;
        unsigned char *back = png ? png_decode_rgb(png, n, &dw, &dh) : NULL;
        CHECK(back != NULL);
        if (back) {
            CHECK_EQ_INT(dw, w);
            CHECK_EQ_INT(dh, h);
            CHECK(dw == (uint32_t)w && dh == (uint32_t)h && !memcmp(back, rgb, nb));
        }
        free(back);
        free(png);
        free(rgb);
    }
    size_t n = 0;
    unsigned char one[3] = {1, 2, 3};
    CHECK(fr_meter_png_encode(one, 0, 1, &n) == NULL);
    CHECK(fr_meter_png_encode(one, 1, 16385, &n) == NULL);
}

TEST(png_and_html_reports) {
    paths();
    fr_audit a;
    CHECK_EQ_INT(load(&a, run_sql), 0);
    fr_audit_report r;
    fr_audit_compute(&a, &r);
    size_t n;
    unsigned char *png = fr_audit_png(&r, &n);
    CHECK(png && n > 100);
    if (!png) return;
    CHECK(!memcmp(png, "\x89PNG\r\n\x1a\n", 8));
    /* libpng reads it back as an RGB image of the heatmap's size */
    uint32_t w = 0, h = 0;
    unsigned char *raw = png_decode_rgb(png, n, &w, &h);
    CHECK(raw != NULL);
    CHECK(w > 400 && h > 100);
    /* the heatmap has colour (a red-ish cell) and dark text */
    bool red = false, dark = false;
    for (uint32_t y = 0; raw && y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            const unsigned char *px = raw + (size_t)y * 3 * w + 3 * x;
            red |= px[0] > 150 && px[1] < 120 && px[2] < 120;
            dark |= px[0] < 60 && px[1] < 60 && px[2] < 60;
        }
    CHECK(red && dark);
    free(raw);
    free(png);
    const char *dir = mu_tmpdir();
    char html[400], pngp[400];
    snprintf(html, sizeof html, "%s/audit.html", dir);
    snprintf(pngp, sizeof pngp, "%s/audit.png", dir);
    fr_err err;
    CHECK_EQ_INT(fr_audit_write_png(&r, pngp, &err), 0);
    CHECK_EQ_INT(fr_audit_write_html(&a, &r, html, "audit.png", &err), 0);
    char *text = fr_read_file(html, 1 << 24, &n, NULL);
    CHECK(text != NULL);
    if (text) {
        CHECK(strstr(text, "<h2>2. Modality &times; stage heatmap</h2>") != NULL);
        CHECK(strstr(text, "src=\"data:image/png;base64,iVBORw0KGgo") != NULL);
        CHECK(strstr(text, "<td class=l>idle_capacity</td>") != NULL);
        CHECK(strstr(text, "style=\"background:#") != NULL);
        CHECK(strstr(text, "Modality <b>text</b>") != NULL);
    }
    free(text);
    fr_audit_free(&a);
}

TEST(traces_matched_to_ledger_rows) {
    paths();
    fr_audit a;
    CHECK_EQ_INT(load(&a, run_sql), 0);
    const char *dir = mu_tmpdir();
    char p[400];
    snprintf(p, sizeof p, "%s/traces.jsonl", dir);
    mu_write(p,
             "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"00000000000000000000000000abc005\","
             "\"name\":\"request\"},{\"traceId\":\"00000000000000000000000000abc005\",\"name\":\"ocr\"}]}]}]}\n"
             "not json\n"
             "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"ffffffffffffffffffffffffffffffff\","
             "\"name\":\"request\"}]}]}]}\n");
    fr_err err;
    CHECK_EQ_INT(fr_audit_load_traces(&a, p, &err), 0);
    CHECK_EQ_INT(a.n_traces, 2);
    CHECK_EQ_INT(a.n_spans, 3);
    CHECK_EQ_INT(a.traces_matched, 1);
    fr_audit_free(&a);
}

int main(void) {
    fr_log_level = FR_LOG_ERROR;
    return t_main();
}

/* test_vl_tools.c — `frugal eval-vqa` and the CLI of `frugal analyze heads`.
 *
 * - ANLS and Levenshtein on hand-computed values (DocVQA's definition: code points, threshold
 *   0.5 strict, lowercase and collapsed whitespace); the VQA normal form on vqaEval's rules.
 * - eval-vqa on a tiny set written here from the fixture images (and HF's pixel values of a
 *   two-image case) for qwen25vl-tiny, its
 *   answers taken from the model's own greedy output at keep ratio 1 (a first run): the second
 *   run must give exact match 100 % and ANLS 1 at keep ratio 1 for pruning and for downsampling;
 *   the kept counts follow the ratios and the budget.
 * - Hostile lines and bad inputs: exit status and error code names; analyze heads writes its
 *   three kinds of files.
 */
#include "tools/vqa_score.h"
#include "cli_util.h"
#include "t.h"

/* ------------------------------------------------------------------ metrics */

static size_t lev(const char *a, const char *b) {
    uint32_t x[64], y[64];
    size_t na = strlen(a), nb = strlen(b);
    for (size_t i = 0; i < na; i++) x[i] = (unsigned char)a[i];
    for (size_t i = 0; i < nb; i++) y[i] = (unsigned char)b[i];
    return fr_levenshtein(x, na, y, nb);
}

TEST(levenshtein_known_values) {
    CHECK_EQ_INT(lev("kitten", "sitting"), 3);
    CHECK_EQ_INT(lev("sitting", "kitten"), 3);
    CHECK_EQ_INT(lev("flaw", "lawn"), 2);
    CHECK_EQ_INT(lev("intention", "execution"), 5);
    CHECK_EQ_INT(lev("", "abc"), 3);
    CHECK_EQ_INT(lev("abc", ""), 3);
    CHECK_EQ_INT(lev("", ""), 0);
    CHECK_EQ_INT(lev("same", "same"), 0);
}

TEST(anls_known_values) {
    CHECK_NEAR(fr_anls_pair("kitten", "sitting", 0.5), 1 - 3.0 / 7, 1e-12);
    CHECK_NEAR(fr_anls_pair("abc", "abd", 0.5), 1 - 1.0 / 3, 1e-12);
    CHECK_NEAR(fr_anls_pair("abc", "xyz", 0.5), 0, 0);
    CHECK_NEAR(fr_anls_pair("ab", "ac", 0.5), 0, 0);          /* NL = 0.5 is not < 0.5 */
    CHECK_NEAR(fr_anls_pair("abcd", "abce", 0.5), 0.75, 1e-12);
    CHECK_NEAR(fr_anls_pair("  Hello   World ", "hello world", 0.5), 1, 0);
    CHECK_NEAR(fr_anls_pair("", "", 0.5), 1, 0);
    CHECK_NEAR(fr_anls_pair("", "a", 0.5), 0, 0);
    CHECK_NEAR(fr_anls_pair("caf\xc3\xa9", "cafe", 0.5), 0.75, 1e-12); /* code points, not bytes */
    CHECK_NEAR(fr_anls_pair("\xc3\x89T\xc3\x89", "\xc3\xa9t\xc3\xa9", 0.5), 1, 0); /* É -> é */
    const char *ans[] = {"xyz", "sitting", "kitten"};
    CHECK_NEAR(fr_anls("kitten", ans, 3, 0.5), 1, 0);
    CHECK_NEAR(fr_anls("kitten", ans, 2, 0.5), 1 - 3.0 / 7, 1e-12);
    CHECK_NEAR(fr_anls("kitten", ans, 0, 0.5), 0, 0);
    CHECK_NEAR(fr_anls_pair("\xff\xfe", "\xff\xfe", 0.5), 1, 0); /* invalid UTF-8: byte-wise */
}

static void norm_is(const char *in, const char *want) {
    char *got = fr_vqa_normalize(in);
    CHECK_STR(got, want);
    free(got);
}

TEST(vqa_normal_form) {
    norm_is("The Dog.", "dog");
    norm_is("two", "2");
    norm_is("None", "0");
    norm_is("yes!", "yes");
    norm_is("1,000", "1000");
    norm_is("3.5", "3.5");
    norm_is("a cat, a dog", "cat dog");
    norm_is("left-hand", "left hand");
    norm_is("red/blue", "red blue");
    norm_is("dont know", "don't know");
    norm_is("  An\tapple\n", "apple");
    norm_is("\xc3\x9cNICODE", "\xc3\xbcnicode");
    norm_is("", "");
    norm_is("...", "");
    const char *ans[] = {"two dogs", "Two"};
    CHECK(fr_vqa_exact("2", ans, 2));
    CHECK(fr_vqa_exact("The 2 dogs.", ans, 2));
    CHECK(!fr_vqa_exact("3", ans, 2));
    CHECK(!fr_vqa_exact("2", ans, 0));
}

/* ------------------------------------------------------------------ the commands */

static char tmp[64], model[512], ref[1024];

static void cleanup(void) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) fprintf(stderr, "  could not remove %s\n", tmp);
}

static void setup(void) {
    if (tmp[0]) return;
    snprintf(tmp, sizeof tmp, "/tmp/test_vl_tools_%d", (int)getpid());
    fr_err err = {0};
    FR_ASSERT(!fr_mkdir_p(tmp, 0755, &err));
    atexit(cleanup);
    char cwd[256];
    FR_ASSERT(getcwd(cwd, sizeof cwd));
    const char *fx = t_fixtures();
    snprintf(ref, sizeof ref, "%s%s%s/ref/qwen25vl-tiny", fx[0] == '/' ? "" : cwd,
             fx[0] == '/' ? "" : "/", fx);
    snprintf(model, sizeof model, "%s/qwen25vl-tiny", fx);
}

/* Three samples from the fixture: two image files (decoded and preprocessed here) and HF's pixel
 * values of a two-image case; answers[i] (with a wrong one before it) or none. */
static void write_data(const char *path, const char *const answers[3]) {
    static const char *const cases[3][3] = {
        {"one_image", "odd-123x77.jpg", "What is in this image?"},
        {"two_images", NULL, "Which picture is brighter?"},
        {"regions", "regions-112x56.png", "What colour is the left half?"}};
    FILE *f = fopen(path, "w");
    FR_ASSERT(f);
    for (int i = 0; i < 3; i++) {
        cJSON *o = cJSON_CreateObject();
        char pv[1200];
        cJSON_AddStringToObject(o, "id", cases[i][0]);
        if (cases[i][1]) {
            snprintf(pv, sizeof pv, "%s/../../vl-images/%s", ref, cases[i][1]);
            cJSON_AddStringToObject(o, "image", pv);
        } else {
            snprintf(pv, sizeof pv, "%s/two_images-pixel_values.npy", ref);
            cJSON_AddStringToObject(o, "pixel_values", pv);
            cJSON_AddItemToObject(o, "grid_thw", cJSON_Parse("[[1, 6, 4], [1, 8, 4]]"));
        }
        cJSON_AddStringToObject(o, "question", cases[i][2]);
        if (answers) {
            cJSON *a = cJSON_CreateArray();
            cJSON_AddItemToArray(a, cJSON_CreateString("a wrong answer"));
            cJSON_AddItemToArray(a, cJSON_CreateString(answers[i]));
            cJSON_AddItemToObject(o, "answers", a);
        }
        char *s = cJSON_PrintUnformatted(o);
        fprintf(f, "%s\n", s);
        free(s);
        cJSON_Delete(o);
    }
    fclose(f);
}

static const cJSON *setting(const cJSON *j, const char *method, const char *key, double v) {
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(j, "settings")) {
        const cJSON *m = cJSON_GetObjectItem(s, "method"), *x = cJSON_GetObjectItem(s, key);
        if (m && !strcmp(m->valuestring, method) && x && x->valuedouble == v) return s;
    }
    return NULL;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *x = o ? cJSON_GetObjectItem(o, k) : NULL;
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

TEST(eval_vqa_self_answers_score_100_at_ratio_1) {
    setup();
    char d0[128], d1[128];
    snprintf(d0, sizeof d0, "%s/noanswers.jsonl", tmp);
    snprintf(d1, sizeof d1, "%s/answers.jsonl", tmp);
    write_data(d0, NULL);
    const char *a0[] = {NULL, "eval-vqa", "--model", model, "--data", d0, "--keep-ratios", "1",
                        "--no-baseline", "--max-tokens", "6", "--json", "--quiet", NULL};
    cli_result r = cli_run(a0);
    CHECK_EQ_INT(r.status, 0);
    if (r.status) fprintf(stderr, "  %s", r.err);
    cJSON *j = cJSON_Parse(r.out);
    const cJSON *s1 = setting(j, "prune", "keep_ratio", 1);
    CHECK(s1 != NULL);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "settings")), 1);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(s1, "exact_match"))); /* nothing to score */
    const cJSON *preds = cJSON_GetObjectItem(s1, "predictions");
    CHECK_EQ_INT(cJSON_GetArraySize(preds), 3);
    const char *ans[3] = {"", "", ""};
    char *keep[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3 && i < cJSON_GetArraySize(preds); i++) {
        keep[i] = fr_xstrdup(cJSON_GetObjectItem(cJSON_GetArrayItem(preds, i), "text")->valuestring);
        ans[i] = keep[i];
    }
    CHECK(strlen(ans[0]) > 0); /* the tiny model says something */
    cJSON_Delete(j);
    cli_free(&r);

    write_data(d1, ans);
    const char *a1[] = {NULL, "eval-vqa", "--model", model, "--data", d1, "--keep-ratios",
                        "1,0.5,0.25", "--budgets", "4", "--max-tokens", "6", "--json", "--quiet",
                        NULL};
    r = cli_run(a1);
    CHECK_EQ_INT(r.status, 0);
    if (r.status) fprintf(stderr, "  %s", r.err);
    j = cJSON_Parse(r.out);
    CHECK(j != NULL);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "settings")), 8);
    CHECK_EQ_INT((int)num(j, "samples"), 3);
    CHECK(cJSON_IsString(cJSON_GetObjectItem(j, "energy_source")));
    const cJSON *p1 = setting(j, "prune", "keep_ratio", 1), *d1s = setting(j, "downsample",
                                                                             "keep_ratio", 1);
    CHECK_NEAR(num(p1, "exact_match"), 1.0, 0);
    CHECK_NEAR(num(p1, "anls"), 1.0, 0);
    CHECK_NEAR(num(d1s, "exact_match"), 1.0, 0); /* k = n: every cell is one token */
    CHECK_NEAR(num(p1, "samples_scored"), 3, 0);
    /* tokens: 12, 6 + 8, 8 -> mean 34/3; kept at 0.5: 6, 3 + 4, 4 -> 17/3; at 0.25: 3, 2+2, 2 */
    CHECK_NEAR(num(p1, "image_tokens"), 34.0 / 3, 1e-9);
    CHECK_NEAR(num(p1, "image_tokens_kept"), 34.0 / 3, 1e-9);
    CHECK_NEAR(num(setting(j, "prune", "keep_ratio", 0.5), "image_tokens_kept"), 17.0 / 3, 1e-9);
    CHECK_NEAR(num(setting(j, "downsample", "keep_ratio", 0.5), "image_tokens_kept"), 17.0 / 3,
               1e-9);
    CHECK_NEAR(num(setting(j, "prune", "keep_ratio", 0.25), "image_tokens_kept"), 9.0 / 3, 1e-9);
    const cJSON *b4 = setting(j, "prune", "max_image_tokens", 4);
    CHECK_NEAR(num(b4, "image_tokens_kept"), 4, 0); /* each sample has more than 4 */
    CHECK(num(p1, "latency_ms") > 0);
    CHECK(num(p1, "joules") >= 0);
    const cJSON *pr;
    cJSON_ArrayForEach(pr, cJSON_GetObjectItem(b4, "predictions"))
        CHECK(num(pr, "image_tokens_kept") == 4);
    cJSON_Delete(j);
    cli_free(&r);

    /* the table */
    const char *a2[] = {NULL, "eval-vqa", "--model", model, "--data", d1, "--keep-ratios", "1",
                        "--max-tokens", "6", "--quiet", NULL};
    r = cli_run(a2);
    CHECK_EQ_INT(r.status, 0);
    CHECK(strstr(r.out, "prune keep 1") && strstr(r.out, "downsample keep 1") &&
          strstr(r.out, "100.0"));
    cli_free(&r);
    for (int i = 0; i < 3; i++) free(keep[i]);
}

/* Runs argv; checks the exit status and that stderr names the code. */
static void fails_with(const char **argv, int status, const char *code) {
    cli_result r = cli_run(argv);
    CHECK_EQ_INT(r.status, status);
    if (code && !strstr(r.err, code)) {
        fprintf(stderr, "  expected (%s) in: %s", code, r.err);
        CHECK(0);
    }
    cli_free(&r);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    FR_ASSERT(f);
    fputs(text, f);
    fclose(f);
}

TEST(hostile_lines_and_bad_inputs) {
    setup();
    char bad[128], good[1400], nopix[128], d[128], fx[600];
    snprintf(bad, sizeof bad, "%s/bad.jsonl", tmp);
    snprintf(nopix, sizeof nopix, "%s/nopix.jsonl", tmp);
    snprintf(d, sizeof d, "%s/good.jsonl", tmp);
    snprintf(good, sizeof good, "{\"pixel_values\": \"%s/one_image-pixel_values.npy\", "
             "\"grid_thw\": [[1, 6, 8]], \"question\": \"q\", \"answers\": [\"x\"]}\n", ref);
    write_text(d, good);
    const char *lines[] = {
        "{\"pixel_values\": \"p.npy\", \"grid_thw\": [[1, 6, 8]], \"question\": \"q\"", /* cut */
        "{\"image\": \"a.png\", \"pixel_values\": \"p.npy\", \"question\": \"q\"}",      /* both */
        "{\"image\": \"a.png\", \"question\": 7}",
        "{\"image\": \"a.png\", \"question\": \"q\", \"answers\": \"x\"}",
        "{\"pixel_values\": \"p.npy\", \"grid_thw\": [[1, -6, 8]], \"question\": \"q\"}",
        "{\"pixel_values\": \"p.npy\", \"grid_thw\": [], \"question\": \"q\"}",
        "\"just a string\"",
        "{\"image\": [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"i\", \"j\", \"k\", "
        "\"l\", \"m\", \"n\", \"o\", \"p\", \"q\"], \"question\": \"q\"}"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        fr_buf b = {0};
        fr_buf_puts(&b, good);
        fr_buf_printf(&b, "%s\n", lines[i]);
        write_text(bad, fr_buf_cstr(&b));
        fr_buf_free(&b);
        const char *a[] = {NULL, "eval-vqa", "--model", model, "--data", bad, "--quiet", NULL};
        cli_result r = cli_run(a);
        CHECK_EQ_INT(r.status, 1);
        if (!strstr(r.err, "bad.jsonl:2") ||
            !(strstr(r.err, "(bad_request)") || strstr(r.err, "(too_large)"))) {
            fprintf(stderr, "  line %zu: %s", i, r.err);
            CHECK(0);
        }
        cli_free(&r);
        const char *h[] = {NULL, "analyze", "heads", "--model", model, "--data", bad, "--out", tmp,
                           "--quiet", NULL};
        fails_with(h, 1, "bad.jsonl:2");
    }
    /* a pixel file that is not there */
    write_text(nopix, "{\"pixel_values\": \"missing.npy\", \"grid_thw\": [[1, 4, 4]], "
                      "\"question\": \"q\"}\n");
    const char *a1[] = {NULL, "eval-vqa", "--model", model, "--data", nopix, "--quiet", NULL};
    fails_with(a1, 1, "(not_found)");
    /* an image file that is not there, one that is not an image */
    write_text(nopix, "{\"image\": \"missing.png\", \"question\": \"q\"}\n");
    fails_with(a1, 1, "(not_found)");
    write_text(nopix, "{\"image\": \"nopix.jsonl\", \"question\": \"q\"}\n");
    cli_result rn = cli_run(a1);
    CHECK_EQ_INT(rn.status, 1);
    CHECK(strstr(rn.err, "(bad_request)") || strstr(rn.err, "(unsupported_media)"));
    cli_free(&rn);
    /* grids that disagree with the pixel rows */
    snprintf(good, sizeof good, "{\"pixel_values\": \"%s/one_image-pixel_values.npy\", "
             "\"grid_thw\": [[1, 4, 8]], \"question\": \"q\"}\n", ref);
    write_text(bad, good);
    const char *a2[] = {NULL, "eval-vqa", "--model", model, "--data", bad, "--quiet", NULL};
    fails_with(a2, 1, "(bad_request)");
    /* no model, no data file, a text-only model */
    const char *a3[] = {NULL, "eval-vqa", "--model", "/nonexistent/model", "--data", d, NULL};
    fails_with(a3, 1, "(not_found)");
    const char *a4[] = {NULL, "eval-vqa", "--model", model, "--data", "/nonexistent.jsonl", NULL};
    fails_with(a4, 1, "(not_found)");
    snprintf(fx, sizeof fx, "%s/qwen2-tiny", t_fixtures());
    const char *a5[] = {NULL, "eval-vqa", "--model", fx, "--data", d, "--quiet", NULL};
    fails_with(a5, 1, "(unsupported_media)");
    const char *h5[] = {NULL, "analyze", "heads", "--model", fx, "--data", d, "--out", tmp,
                        "--quiet", NULL};
    fails_with(h5, 1, "(unsupported_media)");
    /* usage errors */
    const char *u1[] = {NULL, "eval-vqa", "--model", model, "--data", d, "--keep-ratios", "0", NULL};
    fails_with(u1, 2, NULL);
    const char *u2[] = {NULL, "eval-vqa", "--model", model, "--data", d, "--keep-ratios", "1,x",
                        NULL};
    fails_with(u2, 2, NULL);
    const char *u3[] = {NULL, "eval-vqa", "--model", model, "--data", d, "--budgets", "2.5", NULL};
    fails_with(u3, 2, NULL);
    const char *u4[] = {NULL, "eval-vqa", "--model", model, NULL};
    fails_with(u4, 2, NULL);
    const char *u5[] = {NULL, "analyze", "heads", "--model", model, "--data", d, NULL};
    fails_with(u5, 2, NULL);
    const char *u6[] = {NULL, "analyze", "tails", NULL};
    fails_with(u6, 2, NULL);
    const char *u7[] = {NULL, "analyze", "heads", "--model", model, "--data", d, "--out", tmp,
                        "--rows", "all", NULL};
    fails_with(u7, 2, NULL);
}

TEST(analyze_heads_cli_writes_its_files) {
    setup();
    char d[128], out[128], p[256];
    snprintf(d, sizeof d, "%s/heads.jsonl", tmp);
    snprintf(out, sizeof out, "%s/heads-out", tmp);
    write_data(d, NULL);
    const char *a[] = {NULL, "analyze", "heads", "--model", model, "--data", d, "--out", out,
                       "--threshold", "0.5", NULL};
    cli_result r = cli_run(a);
    CHECK_EQ_INT(r.status, 0);
    CHECK(strstr(r.err, "analyze heads: 3/3 regions") != NULL); /* progress */
    CHECK(strstr(r.out, "3 samples, 2 layers x 4 heads") != NULL);
    cli_free(&r);
    snprintf(p, sizeof p, "%s/heads.json", out);
    cJSON *j = cli_load_json(p);
    CHECK(j && num(j, "threshold") == 0.5 && num(j, "samples") == 3 && num(j, "n_head") == 4);
    cJSON_Delete(j);
    const char *files[] = {"layer_00.png", "layer_01.png", "index.html"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", out, files[i]);
        CHECK(access(p, R_OK) == 0);
    }
}

int main(void) { return t_main(); }

/* test_engine.c — the serving engine: pure scheduling decisions (sched.h) and the engine thread
 * on the tiny fp32 Qwen2 fixture: batched greedy output equals the same request alone (also
 * through preemption and recompute), cancellation and deadlines free blocks, admission refuses
 * what it should, P0 preempts P2 for a slot. */
#include "engine/engine.h"
#include "model/tokenizer.h"
#include "t.h"

#include <pthread.h>
#include <unistd.h>

/* ---- pure decisions ---- */

TEST(tier_names) {
    CHECK_EQ_INT(fr_tier_parse("P0"), 0);
    CHECK_EQ_INT(fr_tier_parse("P2"), 2);
    /* strict: no other spelling is a tier (issue: p0, "P0 " and 0 were accepted) */
    CHECK_EQ_INT(fr_tier_parse("p2"), -1);
    CHECK_EQ_INT(fr_tier_parse("1"), -1);
    CHECK_EQ_INT(fr_tier_parse("P0 "), -1);
    CHECK_EQ_INT(fr_tier_parse(" P0"), -1);
    CHECK_EQ_INT(fr_tier_parse("p0"), -1);
    CHECK_EQ_INT(fr_tier_parse("0"), -1);
    CHECK_EQ_INT(fr_tier_parse("P3"), -1);
    CHECK_EQ_INT(fr_tier_parse("P0x"), -1);
    CHECK_EQ_INT(fr_tier_parse(""), -1);
    CHECK_STR(fr_tier_name(1), "P1");
}

TEST(split_weighted_water_filling) {
    double w[3] = {70, 20, 10}, out[3];
    int64_t d1[3] = {1000, 1000, 1000};
    fr_sched_split(w, d1, 100, out);
    CHECK_NEAR(out[0], 70, 1e-9);
    CHECK_NEAR(out[1], 20, 1e-9);
    CHECK_NEAR(out[2], 10, 1e-9);
    int64_t d2[3] = {10, 1000, 1000}; /* P0 needs little: the rest is shared 2:1 */
    fr_sched_split(w, d2, 100, out);
    CHECK_NEAR(out[0], 10, 1e-9);
    CHECK_NEAR(out[1], 60, 1e-9);
    CHECK_NEAR(out[2], 30, 1e-9);
    int64_t d3[3] = {0, 0, 5}; /* alone: gets only its demand */
    fr_sched_split(w, d3, 100, out);
    CHECK_NEAR(out[2], 5, 1e-9);
    CHECK_NEAR(out[0] + out[1], 0, 1e-9);
}

TEST(plan_shares_and_no_starvation) {
    double w[3] = {70, 20, 10};
    fr_sched_fair f;
    fr_sched_fair_init(&f, w);
    /* Three long prefills, one per tier, budget 4 per step: P2's share is 0.4 token a step. */
    fr_sched_item it[3] = {{0, 100000, 0}, {1, 100000, 0}, {2, 100000, 0}};
    long got[3] = {0, 0, 0};
    for (int s = 0; s < 1000; s++) {
        int n = fr_sched_plan(&f, it, 3, 4, 64);
        CHECK_EQ_INT(n, 4);
        for (int i = 0; i < 3; i++) got[i] += it[i].take;
    }
    CHECK_NEAR((double)got[0], 2800, 2);
    CHECK_NEAR((double)got[1], 800, 2);
    CHECK_NEAR((double)got[2], 400, 2);
}

TEST(plan_decodes_first_rotating) {
    double w[3] = {70, 20, 10};
    fr_sched_fair f;
    fr_sched_fair_init(&f, w);
    /* P0: a long prefill; P2: five decodes. Budget 10, chunk 8: P0 wants 8, P2 gets the rest. */
    fr_sched_item it[6] = {{0, 500, 0}, {2, 1, 0}, {2, 1, 0}, {2, 1, 0}, {2, 1, 0}, {2, 1, 0}};
    int served[6] = {0};
    for (int s = 0; s < 5; s++) {
        int n = fr_sched_plan(&f, it, 6, 10, 8);
        CHECK(n <= 10);
        CHECK_EQ_INT(it[0].take, 8);
        for (int i = 1; i < 6; i++) served[i] += it[i].take;
    }
    for (int i = 1; i < 6; i++) CHECK_EQ_INT(served[i], 2); /* 2 per step, rotating: 10 = 5 x 2 */
    /* When everything fits, everything runs. */
    fr_sched_item small[3] = {{1, 3, 0}, {2, 1, 0}, {0, 1, 0}};
    CHECK_EQ_INT(fr_sched_plan(&f, small, 3, 16, 16), 5);
    CHECK_EQ_INT(small[0].take, 3);
}

TEST(plan_chunk_bound) {
    double w[3] = {70, 20, 10};
    fr_sched_fair f;
    fr_sched_fair_init(&f, w);
    fr_sched_item it[2] = {{1, 1000, 0}, {1, 1000, 0}};
    int n = fr_sched_plan(&f, it, 2, 256, 64);
    CHECK_EQ_INT(n, 128);
    CHECK_EQ_INT(it[0].take, 64);
    CHECK_EQ_INT(it[1].take, 64);
}

TEST(victim_choice) {
    fr_sched_cand c[4] = {{0, 1, true}, {2, 2, true}, {2, 5, true}, {1, 9, true}};
    CHECK_EQ_INT(fr_sched_victim(c, 4, -1), 2); /* lowest tier, newest */
    c[2].eligible = false;
    CHECK_EQ_INT(fr_sched_victim(c, 4, -1), 1);
    CHECK_EQ_INT(fr_sched_victim(c, 4, 2), -1); /* nothing below P2 */
    fr_sched_cand d[2] = {{0, 1, true}, {1, 2, true}};
    CHECK_EQ_INT(fr_sched_victim(d, 2, 1), -1); /* a P1 requester cannot preempt P1 or P0 */
    CHECK_EQ_INT(fr_sched_victim(d, 2, 0), 1);
}

TEST(aging) {
    CHECK_EQ_INT(fr_sched_effective_tier(2, 0.5, 1.0), 2);
    CHECK_EQ_INT(fr_sched_effective_tier(2, 1.5, 1.0), 1);
    CHECK_EQ_INT(fr_sched_effective_tier(2, 9.0, 1.0), 0);
    CHECK_EQ_INT(fr_sched_effective_tier(2, 9.0, 0.0), 2);
}

TEST(predict_wait) {
    double w[3] = {70, 20, 10};
    fr_sched_load l;
    memset(&l, 0, sizeof l);
    l.max_running = 4;
    l.budget = 64;
    l.step_s = 0.01;
    l.token_s = 0.001;
    CHECK_NEAR(fr_sched_predict_wait(&l, w, 2), 0, 1e-12); /* idle */
    /* Four P2 requests running with 100 tokens left each, eight more queued with 100 each. */
    l.running[2] = 4;
    l.decode_left[2] = 400;
    l.waiting[2] = 8;
    l.queued_out[2] = 800;
    l.backlog[2] = 8 * 20;
    double p2 = fr_sched_predict_wait(&l, w, 2);
    /* 9 requests need a slot that is not free: 3 waves of 100 steps of 10 ms, plus 160 tokens of
     * prefill at 1 ms each (P2 alone has the whole step). */
    CHECK_NEAR(p2, 3 * 100 * 0.01 + 0.16, 1e-9);
    /* A P0 request preempts P2: no slot wait, no P0 backlog. */
    CHECK_NEAR(fr_sched_predict_wait(&l, w, 0), 0, 1e-12);
    l.backlog[0] = 70;
    /* 70 P0 tokens ahead at P0's share while P2 also has work: 70 / (70+10) */
    CHECK_NEAR(fr_sched_predict_wait(&l, w, 0), 70 * 0.001 / (70.0 / 80.0), 1e-9);
}

/* ---- the engine on the tiny model ---- */

static fr_model *g_model;
static fr_model *tiny(void) {
    fr_model *m = g_model;
    if (!m) {
        char path[512];
        snprintf(path, sizeof path, "%s/qwen2-tiny", t_fixtures());
        fr_err err = {0};
        m = g_model = fr_model_load(path, &err);
        if (!m) fprintf(stderr, "  load: %s\n", err.msg);
    }
    return m;
}

static fr_engine_config small_cfg(void) {
    fr_engine_config c = fr_engine_config_default();
    c.kv_blocks = 256;
    c.step_tokens = 64;
    c.prefill_chunk = 32;
    c.max_running = 32;
    c.max_ctx = 512;
    c.warmup = false;
    return c;
}

static int32_t *prompt_ids(const fr_model *m, int i, int *n) {
    static const char *texts[] = {"Hello world! How are you today?",
                                  "The quick brown fox jumps over the lazy dog. ",
                                  "I can't find my card - it's been 2 weeks. What's the status?",
                                  "Transfer 1234567.89 USD on 2024-03-15 at 10:30",
                                  "Once upon a time"};
    char buf[1024];
    int reps = 1 + i % 4; /* prompt lengths differ so prefills overlap with decodes */
    buf[0] = 0;
    for (int r = 0; r < reps; r++) {
        strncat(buf, texts[(i + r) % 5], sizeof buf - strlen(buf) - 1);
        strncat(buf, " ", sizeof buf - strlen(buf) - 1);
    }
    int32_t *ids = NULL;
    size_t nn = 0;
    fr_err err = {0};
    if (fr_tokenize(m->tok, buf, strlen(buf), false, &ids, &nn, &err)) return NULL;
    *n = (int)nn;
    return ids;
}

static fr_req_params greedy(const int32_t *ids, int n, int max_tokens, int tier) {
    fr_req_params p;
    memset(&p, 0, sizeof p);
    p.prompt = ids;
    p.n_prompt = n;
    p.gen = fr_gen_params_default();
    p.gen.max_tokens = max_tokens;
    p.gen.ignore_eos = true;
    p.sampling = fr_sampling_default();
    p.sampling.temperature = 0;
    p.tier = tier;
    return p;
}

static bool wait_done(fr_req *r, fr_buf *text, fr_req_info *info, double limit_s) {
    double t0 = fr_time_s();
    while (fr_time_s() - t0 < limit_s)
        if (fr_req_wait(r, text, 0.05, info)) return true;
    return false;
}

#define NREQ 32
#define NOUT 24

/* Runs NREQ requests alone (one at a time) and then all at once; outputs must match. */
static void run_batch_equivalence(fr_engine_config cfg, bool expect_preempt) {
    fr_model *m = tiny();
    CHECK(m != NULL);
    if (!m) return;
    fr_err err = {0};
    fr_engine_config solo_cfg = small_cfg();
    fr_engine *solo = fr_engine_new(m, &solo_cfg, &err);
    CHECK(solo != NULL);
    if (!solo) return;
    int32_t *prompts[NREQ];
    int np[NREQ];
    int32_t ref[NREQ][NOUT], got[NOUT];
    int n_ref[NREQ];
    for (int i = 0; i < NREQ; i++) {
        prompts[i] = prompt_ids(m, i, &np[i]);
        fr_req_params p = greedy(prompts[i], np[i], NOUT, i % 3);
        fr_req *r = fr_engine_submit(solo, &p, NULL);
        CHECK(r != NULL);
        fr_req_info info;
        CHECK(wait_done(r, NULL, &info, 30));
        CHECK_EQ_INT(info.end, FR_END_LENGTH);
        n_ref[i] = fr_req_output_ids(r, ref[i], NOUT);
        CHECK_EQ_INT(n_ref[i], NOUT);
        fr_req_release(r);
    }
    fr_engine_free(solo);

    fr_engine *e = fr_engine_new(m, &cfg, &err);
    CHECK(e != NULL);
    if (!e) return;
    fr_req *rs[NREQ];
    for (int i = 0; i < NREQ; i++) {
        fr_req_params p = greedy(prompts[i], np[i], NOUT, i % 3);
        fr_admission adm;
        rs[i] = fr_engine_submit(e, &p, &adm);
        CHECK(rs[i] != NULL);
    }
    int preempted = 0;
    for (int i = 0; i < NREQ; i++) {
        if (!rs[i]) continue;
        fr_req_info info;
        CHECK(wait_done(rs[i], NULL, &info, 60));
        CHECK_EQ_INT(info.end, FR_END_LENGTH);
        preempted += info.n_preempted;
        int n = fr_req_output_ids(rs[i], got, NOUT);
        CHECK_EQ_INT(n, n_ref[i]);
        bool same = n == n_ref[i] && !memcmp(got, ref[i], (size_t)n * sizeof(int32_t));
        if (!same) fprintf(stderr, "  request %d differs from its solo run\n", i);
        CHECK(same);
        fr_req_release(rs[i]);
    }
    if (expect_preempt) CHECK(preempted > 0);
    fr_engine_stats st;
    fr_engine_stats_get(e, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    CHECK(st.steps > 0);
    fr_engine_free(e);
    for (int i = 0; i < NREQ; i++) free(prompts[i]);
}

TEST(batched_equals_alone) { run_batch_equivalence(small_cfg(), false); }

TEST(batched_equals_alone_under_preemption) {
    fr_engine_config c = small_cfg();
    c.kv_blocks = 24; /* far too few for 32 sequences of ~60 tokens: constant preemption */
    run_batch_equivalence(c, true);
}

TEST(cancel_and_deadline_free_blocks) {
    fr_model *m = tiny();
    if (!m) return;
    fr_err err = {0};
    fr_engine_config c = small_cfg();
    fr_engine *e = fr_engine_new(m, &c, &err);
    CHECK(e != NULL);
    if (!e) return;
    int n = 0;
    int32_t *ids = prompt_ids(m, 3, &n);
    fr_req_params p = greedy(ids, n, 400, 1);
    fr_req *r = fr_engine_submit(e, &p, NULL);
    CHECK(r != NULL);
    fr_buf text = {0};
    fr_req_info info;
    while (!fr_req_wait(r, &text, 0.05, &info) && info.n_generated < 3) {
    }
    fr_engine_stats st;
    fr_engine_stats_get(e, &st);
    CHECK(st.kv_blocks_used > 0);
    fr_req_cancel(r, FR_END_CANCELLED);
    CHECK(wait_done(r, &text, &info, 10));
    CHECK_EQ_INT(info.end, FR_END_CANCELLED);
    CHECK(info.n_generated < 400);
    fr_req_release(r);
    fr_engine_stats_get(e, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    CHECK_EQ_INT(st.ended[1][FR_END_CANCELLED], 1);

    p.deadline = fr_time_s() + 0.002;
    r = fr_engine_submit(e, &p, NULL);
    CHECK(r != NULL);
    CHECK(wait_done(r, &text, &info, 10));
    CHECK_EQ_INT(info.end, FR_END_DEADLINE);
    fr_req_release(r);
    fr_engine_stats_get(e, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    fr_buf_free(&text);
    free(ids);
    fr_engine_free(e);
}

TEST(admission_refusals) {
    fr_model *m = tiny();
    if (!m) return;
    fr_err err = {0};
    fr_engine_config c = small_cfg();
    c.max_running = 1;
    c.queue_max[2] = 1;
    c.max_wait_s[1] = 0; /* any predicted wait refuses P1 */
    c.aging_s = 0;
    fr_engine *e = fr_engine_new(m, &c, &err);
    CHECK(e != NULL);
    if (!e) return;
    int n = 0;
    int32_t *ids = prompt_ids(m, 1, &n);
    fr_admission adm;
    /* too large for the context */
    fr_req_params big = greedy(ids, n, 10000, 2);
    CHECK(fr_engine_submit(e, &big, &adm) == NULL);
    CHECK_EQ_INT(adm.verdict, FR_ADMIT_TOO_LARGE);
    CHECK(strstr(adm.msg, "context") != NULL);
    /* one P1 running; another P1 would wait for the slot: refused (its wait limit is 0) */
    fr_req_params p = greedy(ids, n, 300, 1);
    fr_req *a = fr_engine_submit(e, &p, &adm);
    CHECK(a != NULL);
    fr_req_info info;
    while (!fr_req_wait(a, NULL, 0.02, &info) && info.n_generated < 1) {
    }
    fr_req *x = fr_engine_submit(e, &p, &adm);
    CHECK(x == NULL);
    CHECK_EQ_INT(adm.verdict, FR_ADMIT_OVERLOAD);
    CHECK(adm.predicted_wait_s > 0);
    CHECK(adm.retry_after_s >= 1);
    /* P2: one queued, the next refused because the queue is full */
    fr_req_params p2 = greedy(ids, n, 300, 2);
    fr_req *b = fr_engine_submit(e, &p2, &adm);
    CHECK(b != NULL);
    x = fr_engine_submit(e, &p2, &adm);
    CHECK(x == NULL);
    CHECK_EQ_INT(adm.verdict, FR_ADMIT_QUEUE_FULL);
    CHECK(adm.retry_after_s >= 1);
    /* P0 preempts the running P1 for the only slot and finishes first */
    fr_req_params p0 = greedy(ids, n, 4, 0);
    fr_req *z = fr_engine_submit(e, &p0, &adm);
    CHECK(z != NULL);
    CHECK(wait_done(z, NULL, &info, 20));
    CHECK_EQ_INT(info.end, FR_END_LENGTH);
    fr_req_info ia;
    fr_req_wait(a, NULL, 0, &ia);
    CHECK(ia.n_preempted >= 1);
    fr_engine_stats st;
    fr_engine_stats_get(e, &st);
    CHECK(st.preempted[1] >= 1);
    CHECK_EQ_INT(st.rejected[2][FR_ADMIT_QUEUE_FULL], 1);
    CHECK_EQ_INT(st.rejected[1][FR_ADMIT_OVERLOAD], 1);
    /* closing refuses new work; freeing ends the rest with SHUTDOWN */
    fr_engine_close(e);
    CHECK(fr_engine_submit(e, &p0, &adm) == NULL);
    CHECK_EQ_INT(adm.verdict, FR_ADMIT_CLOSED);
    fr_req_release(z);
    fr_engine_free(e);
    CHECK(fr_req_wait(a, NULL, 0, &info));
    CHECK_EQ_INT(info.end, FR_END_SHUTDOWN);
    CHECK(fr_req_wait(b, NULL, 0, &info));
    CHECK_EQ_INT(info.end, FR_END_SHUTDOWN);
    fr_req_release(a);
    fr_req_release(b);
    free(ids);
}

TEST(p0_preempts_p2_for_blocks) {
    fr_model *m = tiny();
    if (!m) return;
    fr_err err = {0};
    fr_engine_config c = small_cfg();
    c.kv_blocks = 10; /* 160 tokens: one long P2 request fills it */
    c.aging_s = 0;
    fr_engine *e = fr_engine_new(m, &c, &err);
    CHECK(e != NULL);
    if (!e) return;
    int n = 0;
    int32_t *ids = prompt_ids(m, 3, &n);
    fr_req_params p2 = greedy(ids, n, 150 - n, 2);
    fr_req *a = NULL;
    fr_req_info info;
    fr_engine_stats st;
    /* wait until the P2 request holds nearly every block. The window (its last ~20 tokens) is
     * short on this tiny model, and on a loaded machine the request can finish between two
     * polls: then the setup is tried again (the blocks are free once it has ended). */
    bool held = false;
    for (int attempt = 0; attempt < 20 && !held; attempt++) {
        if (a) fr_req_release(a);
        a = fr_engine_submit(e, &p2, NULL);
        CHECK(a != NULL);
        if (!a) break;
        do {
            fr_req_wait(a, NULL, 0.01, &info);
            fr_engine_stats_get(e, &st);
        } while (!info.done && st.kv_blocks_used < 9);
        held = !info.done;
        for (int w = 0; !held && w < 2000 && st.kv_blocks_used > 0; w++) {
            usleep(1000);
            fr_engine_stats_get(e, &st);
        }
    }
    CHECK(held);
    if (!held) {
        if (a) fr_req_release(a);
        free(ids);
        fr_engine_free(e);
        return;
    }
    fr_req_params p0 = greedy(ids, n, 8, 0);
    fr_req *z = fr_engine_submit(e, &p0, NULL);
    CHECK(z != NULL);
    CHECK(wait_done(z, NULL, &info, 20));
    CHECK_EQ_INT(info.end, FR_END_LENGTH);
    CHECK(wait_done(a, NULL, &info, 20)); /* the P2 request is recomputed and still finishes */
    CHECK_EQ_INT(info.end, FR_END_LENGTH);
    CHECK(info.n_preempted >= 1);
    CHECK_EQ_INT(info.n_generated, 150 - n);
    fr_engine_stats_get(e, &st);
    CHECK(st.preempted[2] >= 1);
    CHECK_EQ_INT(st.preempted[0], 0);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    fr_req_release(a);
    fr_req_release(z);
    free(ids);
    fr_engine_free(e);
}

int main(void) {
    int rc = t_main();
    fr_model_free(g_model);
    return rc;
}

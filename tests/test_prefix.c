/* test_prefix.c — automatic prefix caching (backend/kv.h, engine/engine.h).
 *
 * The pool alone: publish / match / share / release / LRU eviction, the hash table against a
 * reference map over thousands of random operations, and a key that only collides by hash is
 * never shared. On the tiny fp32 Qwen2 fixture: a sequence that takes a cached prefix gives
 * bit-identical logits (every suffix row and greedy decode steps) to one that computed the whole
 * prompt, for a prefix that ends inside a block and for a fully cached prompt. Through the
 * engine, with the cache on and off: greedy ids equal for a second request that shares a
 * prefix, multi-turn requests that reuse the previous turn's generated blocks, after eviction,
 * with many requests in flight at once (also under preemption), with the per-request opt-out and
 * salts, and on the tiny Qwen2.5-VL fixture where image rows and M-RoPE positions are part of
 * the key (a different image is a miss from its first block on). usage.cached_tokens is
 * fr_req_info.n_cached: checked against the exact block arithmetic everywhere.
 */
#include "backend/cpu/decoder.h"
#include "backend/kv.h"
#include "engine/engine.h"
#include "model/mrope.h"
#include "t.h"

/* ---- the pool alone ---- */

static fr_hparams small_hp(void) {
    fr_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_layer = 1, hp.n_head_kv = 1, hp.head_dim = 1;
    return hp;
}

/* Keys of the n_blocks leading blocks of tokens (block size bs). */
static void chain_keys(const int32_t *tokens, int n_blocks, int bs, uint64_t salt,
                       fr_kv_block_key *k) {
    for (int i = 0; i < n_blocks; i++) {
        k[i].parent = i ? k[i - 1].hash : fr_kv_chain_root(salt);
        k[i].extra = 0;
        k[i].hash = fr_kv_block_hash(k[i].parent, tokens + i * bs, bs, 0);
    }
}

TEST(pool_publish_match_share_evict) {
    fr_hparams hp = small_hp();
    fr_kv_pool *p = fr_kv_pool_new(&hp, 8, 4);
    CHECK(p && fr_kv_prefix_enable(p) == 0);
    if (!p) return;
    int32_t t[12] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    fr_kv_block_key k[3];
    chain_keys(t, 3, 4, 0, k);
    fr_seq a = {0};
    CHECK(fr_seq_reserve(&a, p, 12) == 0);
    /* not written yet: nothing can be published */
    CHECK(!fr_kv_prefix_publish(p, &a, 0, &k[0], t));
    a.n_pos = 12; /* as a forward would */
    for (int i = 0; i < 3; i++) CHECK(fr_kv_prefix_publish(p, &a, i, &k[i], t + 4 * i));
    CHECK(!fr_kv_prefix_publish(p, &a, 1, &k[1], t + 4)); /* already published */
    int ids[4];
    CHECK_EQ_INT(fr_kv_prefix_match(p, k, t, 3, ids), 3);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(ids[i], a.blocks[i]);
    /* another block content: the chain breaks at block 1 and every key after it differs */
    int32_t u[12];
    memcpy(u, t, sizeof u);
    u[5] = 99;
    fr_kv_block_key ku[3];
    chain_keys(u, 3, 4, 0, ku);
    CHECK_EQ_INT(fr_kv_prefix_match(p, ku, u, 3, ids), 1);
    CHECK(ku[2].hash != k[2].hash);
    /* a salt gives a different chain from block 0 on */
    chain_keys(t, 3, 4, 7, ku);
    CHECK_EQ_INT(fr_kv_prefix_match(p, ku, t, 3, ids), 0);
    /* a key whose hash matches but whose ids differ (a forced collision) is not shared */
    CHECK_EQ_INT(fr_kv_prefix_match(p, k, u, 3, ids), 1);
    fr_kv_block_key kx[1] = {k[0]};
    kx[0].extra = 3; /* same hash, other extra */
    CHECK_EQ_INT(fr_kv_prefix_match(p, kx, t, 1, ids), 0);

    fr_kv_prefix_stats st;
    fr_kv_prefix_stats_get(p, &st);
    CHECK_EQ_INT(st.cached, 3);
    CHECK_EQ_INT(st.evictable, 0);
    CHECK_EQ_INT(fr_kv_pool_available(p), 5);
    CHECK_EQ_INT(fr_seq_sole_blocks(&a, p), 3);

    fr_seq b = {0};
    fr_seq_share(&b, p, ids, 2); /* ids still holds a's first two blocks */
    CHECK_EQ_INT(b.n_pos, 8);
    CHECK_EQ_INT(fr_seq_sole_blocks(&a, p), 1);
    fr_seq_release(&a, p);
    fr_kv_prefix_stats_get(p, &st);
    CHECK_EQ_INT(st.cached, 3);
    CHECK_EQ_INT(st.evictable, 1); /* block 2: the others are b's */
    CHECK_EQ_INT(fr_kv_pool_available(p), 6);
    CHECK_EQ_INT(fr_kv_prefix_match(p, k, t, 3, ids), 3);
    CHECK_EQ_INT(fr_kv_prefix_unheld(p, ids, 3), 1);

    /* 6 blocks: the 5 free ones first, then the unheld cached one is evicted */
    fr_seq c = {0};
    CHECK(fr_seq_reserve(&c, p, 6 * 4) == 0);
    CHECK(fr_seq_reserve(&c, p, 7 * 4) != 0); /* nothing left: b holds the rest */
    fr_kv_prefix_stats_get(p, &st);
    CHECK_EQ_INT(st.cached, 2);
    CHECK_EQ_INT(st.evictions, 1);
    CHECK_EQ_INT(fr_kv_prefix_match(p, k, t, 3, ids), 2);
    fr_seq_release(&c, p);
    fr_seq_release(&b, p);
    fr_kv_prefix_stats_get(p, &st);
    CHECK_EQ_INT(st.evictable, 2);
    CHECK_EQ_INT(fr_kv_pool_available(p), 8);
    fr_kv_prefix_disable(p);
    CHECK_EQ_INT(p->n_free, 8);
    fr_kv_pool_free(p);
}

TEST(pool_lru_evicts_oldest_release_and_deepest_block_first) {
    fr_hparams hp = small_hp();
    fr_kv_pool *p = fr_kv_pool_new(&hp, 6, 2);
    CHECK(p && fr_kv_prefix_enable(p) == 0);
    if (!p) return;
    int32_t x[4] = {1, 2, 3, 4}, y[4] = {7, 8, 9, 10};
    fr_kv_block_key kx[2], ky[2];
    chain_keys(x, 2, 2, 0, kx);
    chain_keys(y, 2, 2, 0, ky);
    fr_seq a = {0}, b = {0};
    CHECK(fr_seq_reserve(&a, p, 4) == 0 && fr_seq_reserve(&b, p, 4) == 0);
    a.n_pos = b.n_pos = 4;
    for (int i = 0; i < 2; i++) {
        CHECK(fr_kv_prefix_publish(p, &a, i, &kx[i], x + 2 * i));
        CHECK(fr_kv_prefix_publish(p, &b, i, &ky[i], y + 2 * i));
    }
    fr_seq_release(&a, p); /* released first: evicted first, its block 1 before its block 0 */
    fr_seq_release(&b, p);
    int ids[2];
    fr_seq c = {0};
    CHECK(fr_seq_reserve(&c, p, 2 * 3) == 0); /* the 2 free + 1 eviction */
    CHECK_EQ_INT(fr_kv_prefix_match(p, kx, x, 2, ids), 1);
    CHECK_EQ_INT(fr_kv_prefix_match(p, ky, y, 2, ids), 2);
    CHECK(fr_seq_reserve(&c, p, 2 * 4) == 0);
    CHECK_EQ_INT(fr_kv_prefix_match(p, kx, x, 2, ids), 0);
    CHECK_EQ_INT(fr_kv_prefix_match(p, ky, y, 2, ids), 2);
    CHECK(fr_seq_reserve(&c, p, 2 * 5) == 0);
    CHECK_EQ_INT(fr_kv_prefix_match(p, ky, y, 2, ids), 1);
    fr_seq_release(&c, p);
    fr_kv_pool_free(p);
}

/* Random publish / evict cycles on a small table (many home-slot collisions) against a map of
 * what each block should hold: every published block is found, every evicted one is gone. */
TEST(pool_table_against_reference) {
    fr_hparams hp = small_hp();
    enum { NB = 13, NT = 40 };
    fr_kv_pool *p = fr_kv_pool_new(&hp, NB, 1);
    CHECK(p && fr_kv_prefix_enable(p) == 0);
    if (!p) return;
    int holds[NB]; /* token id block b is published for, or -1 */
    for (int b = 0; b < NB; b++) holds[b] = -1;
    uint64_t rng = 12345;
    fr_seq s[NB];
    memset(s, 0, sizeof s);
    int n_live = 0, bad = 0;
    for (int it = 0; it < 20000 && bad < 5; it++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int32_t tok = (int32_t)((rng >> 33) % NT);
        fr_kv_block_key k;
        chain_keys(&tok, 1, 1, 0, &k);
        int id;
        if (fr_kv_prefix_match(p, &k, &tok, 1, &id) == 1) {
            if (holds[id] != tok) bad++;
            continue;
        }
        for (int b = 0; b < NB; b++) /* a miss: no block may hold tok */
            if (holds[b] == tok) bad++;
        if (n_live == NB || (rng >> 20) % 3 == 0) { /* release the oldest holder */
            if (n_live == 0) continue;
            fr_seq_release(&s[0], p);
            memmove(&s[0], &s[1], sizeof(fr_seq) * (size_t)(n_live - 1));
            memset(&s[n_live - 1], 0, sizeof(fr_seq));
            n_live--;
            continue;
        }
        fr_seq *q = &s[n_live];
        if (fr_seq_reserve(q, p, 1) != 0) {
            bad++;
            continue;
        }
        holds[q->blocks[0]] = -1; /* free or evicted: whatever it held is gone */
        q->n_pos = 1;
        if (fr_kv_prefix_publish(p, q, 0, &k, &tok)) holds[q->blocks[0]] = tok;
        n_live++;
    }
    CHECK_EQ_INT(bad, 0);
    fr_kv_prefix_stats st;
    fr_kv_prefix_stats_get(p, &st);
    CHECK(st.evictions > 100);
    for (int i = 0; i < n_live; i++) fr_seq_release(&s[i], p);
    CHECK_EQ_INT(fr_kv_pool_available(p), NB);
    fr_kv_pool_free(p);
}

TEST(hash_changes_with_every_input) {
    int32_t t[4] = {1, 2, 3, 4}, u[4] = {1, 2, 3, 5};
    uint64_t h = fr_kv_block_hash(9, t, 4, 0);
    CHECK(h != fr_kv_block_hash(8, t, 4, 0));
    CHECK(h != fr_kv_block_hash(9, u, 4, 0));
    CHECK(h != fr_kv_block_hash(9, t, 4, 1));
    CHECK(h != fr_kv_block_hash(9, t, 3, 0));
    CHECK(h == fr_kv_block_hash(9, t, 4, 0));
    CHECK(fr_kv_chain_root(0) != fr_kv_chain_root(1));
    float a[3] = {1, 2, 3}, b[3] = {1, 2, 3.0000002f};
    CHECK(fr_kv_hash_bytes(a, sizeof a) != fr_kv_hash_bytes(b, sizeof b));
    CHECK(fr_kv_hash_bytes(a, 8) != fr_kv_hash_bytes(a, 9));
}

/* ---- the decoder over shared blocks (tiny fp32 Qwen2) ---- */

static fr_model *g_text, *g_vl;
static fr_model *load_fixture(fr_model **slot, const char *name) {
    if (!*slot) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", t_fixtures(), name);
        fr_err err = {0};
        *slot = fr_model_load(path, &err);
        if (!*slot) fprintf(stderr, "  load %s: %s\n", name, err.msg);
    }
    return *slot;
}

static void random_ids(uint64_t *rng, int32_t *out, int n, int vocab, int avoid) {
    for (int i = 0; i < n; i++) {
        int32_t v;
        do {
            *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
            v = (int32_t)((*rng >> 33) % (uint64_t)vocab);
        } while (v == avoid);
        out[i] = v;
    }
}

/* Forward tokens[from, n) of s (reserved as needed): logits of every row into out. */
static int forward_rows(fr_decoder *d, fr_kv_pool *kv, fr_seq *s, const int32_t *tokens, int from,
                        int n, float *out) {
    if (fr_seq_reserve(s, kv, n) != 0) return -1;
    int32_t pos[256];
    fr_seq *seqs[256];
    int m = n - from;
    if (m < 1 || m > 256) return -1;
    for (int j = 0; j < m; j++) pos[j] = from + j, seqs[j] = s;
    fr_batch b = {.n_tokens = m, .tokens = tokens + from, .pos = pos, .seqs = seqs, .logits = NULL};
    fr_err err = {0};
    if (fr_decoder_forward(d, kv, &b, out, &err)) {
        fprintf(stderr, "  forward: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Prompt q shares its first `shared` tokens with p, already computed and published in s_p. The
 * sequence that takes the cached blocks must give the same logits, bit for bit, as one that
 * computes all of q: every row from the first uncached position on, then 6 greedy decodes. */
static int check_shared_logits(fr_decoder *d, fr_kv_pool *kv, const fr_model *m,
                               const int32_t *q, int nq, int want_hit_blocks) {
    const int bs = kv->block_size, V = m->hp.n_vocab;
    fr_kv_block_key keys[32];
    int max = (nq - 1) / bs, ids[32];
    chain_keys(q, max, bs, 0, keys);
    int hit = fr_kv_prefix_match(kv, keys, q, max, ids);
    if (want_hit_blocks >= 0) CHECK_EQ_INT(hit, want_hit_blocks); /* -1: whatever is left */
    fr_seq a = {0}, b = {0};
    fr_seq_share(&a, kv, ids, hit);
    int from = hit * bs, rows = nq - from;
    float *la = malloc(sizeof(float) * (size_t)V * 256), *lb = malloc(sizeof(float) * (size_t)V * 256);
    CHECK(forward_rows(d, kv, &a, q, from, nq, la) == 0);
    CHECK(forward_rows(d, kv, &b, q, 0, nq, lb) == 0); /* the whole prompt, nothing shared */
    CHECK(!memcmp(la, lb + (size_t)from * V, sizeof(float) * (size_t)V * (size_t)rows));
    int32_t seq_ids[512];
    memcpy(seq_ids, q, sizeof(int32_t) * (size_t)nq);
    int n = nq;
    int32_t next = argmax(la + (size_t)(rows - 1) * V, V);
    for (int step = 0; step < 6; step++) {
        seq_ids[n++] = next;
        CHECK(forward_rows(d, kv, &a, seq_ids, n - 1, n, la) == 0);
        CHECK(forward_rows(d, kv, &b, seq_ids, n - 1, n, lb) == 0);
        CHECK(!memcmp(la, lb, sizeof(float) * (size_t)V));
        next = argmax(la, V);
    }
    fr_seq_release(&a, kv);
    fr_seq_release(&b, kv);
    free(la);
    free(lb);
    return hit;
}

/* Two sequences over the same cached blocks and one computing everything, in one batch: each
 * shared row equals the row of the same prompt computed alone without the cache. */
static void check_shared_batch(fr_decoder *d, fr_kv_pool *kv, const fr_model *m,
                               const int32_t *q1, int n1, const int32_t *q2, int n2) {
    const int bs = kv->block_size, V = m->hp.n_vocab;
    const int32_t *qs[3] = {q1, q2, q1};
    int ns[3] = {n1, n2, n1}, from[3] = {0, 0, 0};
    fr_seq s[3] = {{0}, {0}, {0}};
    for (int k = 0; k < 2; k++) { /* s[0], s[1] share; s[2] computes all of q1 */
        fr_kv_block_key keys[32];
        int ids[32], max = (ns[k] - 1) / bs;
        chain_keys(qs[k], max, bs, 0, keys);
        int hit = fr_kv_prefix_match(kv, keys, qs[k], max, ids);
        CHECK(hit > 0);
        fr_seq_share(&s[k], kv, ids, hit);
        from[k] = hit * bs;
    }
    int32_t tok[256], pos[256];
    fr_seq *seqs[256];
    int nb = 0;
    for (int k = 0; k < 3; k++) {
        CHECK(fr_seq_reserve(&s[k], kv, ns[k]) == 0);
        for (int i = from[k]; i < ns[k]; i++, nb++) tok[nb] = qs[k][i], pos[nb] = i, seqs[nb] = &s[k];
    }
    float *lg = malloc(sizeof(float) * (size_t)V * (size_t)nb);
    float *ref = malloc(sizeof(float) * (size_t)V * 256);
    fr_batch b = {.n_tokens = nb, .tokens = tok, .pos = pos, .seqs = seqs, .logits = NULL};
    fr_err err = {0};
    CHECK(fr_decoder_forward(d, kv, &b, lg, &err) == 0);
    int row = 0;
    for (int k = 0; k < 3; k++) {
        fr_seq alone = {0}; /* the same prompt alone, nothing shared */
        CHECK(forward_rows(d, kv, &alone, qs[k], 0, ns[k], ref) == 0);
        int rows = ns[k] - from[k];
        CHECK(!memcmp(lg + (size_t)row * V, ref + (size_t)from[k] * V,
                      sizeof(float) * (size_t)V * (size_t)rows));
        row += rows;
        fr_seq_release(&alone, kv);
    }
    for (int k = 0; k < 3; k++) fr_seq_release(&s[k], kv);
    free(lg);
    free(ref);
}

TEST(decoder_logits_identical_over_cached_prefix) {
    fr_model *m = load_fixture(&g_text, "qwen2-tiny");
    CHECK(m != NULL);
    if (!m) return;
    fr_err err = {0};
    fr_decoder *d = fr_decoder_new(m, 256, 512, &err);
    fr_kv_pool *kv = fr_kv_pool_new(&m->hp, 64, 16);
    CHECK(d && kv && fr_kv_prefix_enable(kv) == 0);
    if (!d || !kv) return;
    uint64_t rng = 7;
    int32_t p[70], q[75];
    random_ids(&rng, p, 70, m->hp.n_vocab, -1);
    /* the cached sequence: p computed in two chunks, its 4 full blocks published */
    fr_seq s = {0};
    float *tmp = malloc(sizeof(float) * (size_t)m->hp.n_vocab * 256);
    CHECK(forward_rows(d, kv, &s, p, 0, 37, tmp) == 0);
    CHECK(forward_rows(d, kv, &s, p, 37, 70, tmp) == 0);
    fr_kv_block_key keys[4];
    chain_keys(p, 4, 16, 0, keys);
    for (int i = 0; i < 4; i++) CHECK(fr_kv_prefix_publish(kv, &s, i, &keys[i], p + 16 * i));
    /* a prefix that ends inside block 2 (45 tokens): blocks 0 and 1 are shared */
    memcpy(q, p, sizeof(int32_t) * 45);
    random_ids(&rng, q + 45, 30, m->hp.n_vocab, -1);
    check_shared_logits(d, kv, m, q, 75, 2);
    /* the same prompt again: every full block before the last token (4 of them) */
    check_shared_logits(d, kv, m, p, 70, 4);
    /* after the cached sequence is gone (blocks unheld, still cached) */
    fr_seq_release(&s, kv);
    check_shared_logits(d, kv, m, q, 75, 2);
    /* p of 64 tokens exactly: its last token is in block 3, so only 3 blocks are taken */
    check_shared_logits(d, kv, m, p, 64, 3);
    /* in one batch: q and p over the same cached blocks beside p computed in full */
    check_shared_batch(d, kv, m, q, 75, p, 70);
    /* after eviction: take every available block but two, so most cached blocks are evicted
     * (deepest first); what is left still gives the same logits */
    fr_kv_prefix_stats st0, st1;
    fr_kv_prefix_stats_get(kv, &st0);
    fr_seq big = {0};
    CHECK(fr_seq_reserve(&big, kv, (fr_kv_pool_available(kv) - 2) * 16) == 0);
    fr_kv_prefix_stats_get(kv, &st1);
    CHECK(st1.evictions > st0.evictions);
    CHECK_EQ_INT(st1.cached, 2);
    fr_seq_release(&big, kv); /* its blocks were never published: they become free */
    /* the root blocks 0 and 1 (shared by p and q, released last) are what survives */
    CHECK_EQ_INT(check_shared_logits(d, kv, m, p, 70, -1), 2);
    free(tmp);
    fr_kv_pool_free(kv);
    fr_decoder_free(d);
}

/* ---- the engine, cache on against cache off ---- */

#define MAXR 32
#define NOUT 12

typedef struct job {
    int32_t ids[600];
    int n;
    int no_cache;
    uint64_t salt;
    int32_t out[64];
    int n_out;
    int n_cached;
} job;

static fr_engine_config base_cfg(bool cache) {
    fr_engine_config c = fr_engine_config_default();
    c.kv_blocks = 128;
    c.step_tokens = 64;
    c.prefill_chunk = 32;
    c.max_running = 8;
    c.max_ctx = 512;
    c.warmup = false;
    c.prefix_cache = cache;
    return c;
}

static fr_req *submit(fr_engine *e, const job *j, int n_out) {
    fr_req_params p;
    memset(&p, 0, sizeof p);
    p.prompt = j->ids;
    p.n_prompt = j->n;
    p.gen = fr_gen_params_default();
    p.gen.max_tokens = n_out;
    p.gen.ignore_eos = true;
    p.sampling = fr_sampling_default();
    p.sampling.temperature = 0;
    p.tier = 1;
    p.no_prefix_cache = j->no_cache;
    p.cache_salt = j->salt;
    fr_admission adm;
    fr_req *r = fr_engine_submit(e, &p, &adm);
    if (!r) fprintf(stderr, "  refused: %s\n", adm.msg);
    return r;
}

static void collect(fr_req *r, job *j, int n_out) {
    fr_req_info info;
    double t0 = fr_time_s();
    bool done = false;
    while (!done && fr_time_s() - t0 < 60) done = fr_req_wait(r, NULL, 0.05, &info);
    CHECK(done);
    CHECK_EQ_INT(info.end, FR_END_LENGTH);
    j->n_out = fr_req_output_ids(r, j->out, 64);
    CHECK_EQ_INT(j->n_out, n_out);
    j->n_cached = info.n_cached;
    fr_req_release(r);
}

/* Runs jobs one after another (at_once false) or all submitted together. */
static void run_jobs(fr_engine *e, job *jobs, int n, int n_out, bool at_once) {
    fr_req *rs[MAXR];
    for (int i = 0; i < n; i++) {
        rs[i] = submit(e, &jobs[i], n_out);
        CHECK(rs[i] != NULL);
        if (!at_once && rs[i]) collect(rs[i], &jobs[i], n_out);
    }
    for (int i = 0; at_once && i < n; i++)
        if (rs[i]) collect(rs[i], &jobs[i], n_out);
}

/* The same jobs on an engine without the cache and on one with it: ids must be equal. Returns
 * the cache-on engine's stats; the jobs keep the cache-on run's n_cached. */
static fr_engine_stats compare_runs(const fr_model *m, fr_engine_config cfg_on, job *jobs, int n,
                                    int n_out, bool at_once) {
    fr_engine_stats st;
    memset(&st, 0, sizeof st);
    static job ref[MAXR];
    memcpy(ref, jobs, sizeof(job) * (size_t)n);
    fr_engine_config cfg_off = cfg_on;
    cfg_off.prefix_cache = false;
    fr_err err = {0};
    fr_engine *off = fr_engine_new(m, &cfg_off, &err);
    fr_engine *on = fr_engine_new(m, &cfg_on, &err);
    CHECK(off && on);
    if (!off || !on) {
        fr_engine_free(off), fr_engine_free(on);
        return st;
    }
    run_jobs(off, ref, n, n_out, at_once);
    run_jobs(on, jobs, n, n_out, at_once);
    for (int i = 0; i < n; i++) {
        CHECK_EQ_INT(ref[i].n_cached, 0);
        bool same = ref[i].n_out == jobs[i].n_out &&
                    !memcmp(ref[i].out, jobs[i].out, sizeof(int32_t) * (size_t)jobs[i].n_out);
        if (!same) fprintf(stderr, "  job %d: output differs with the cache\n", i);
        CHECK(same);
    }
    fr_engine_stats_get(on, &st);
    fr_engine_stats st_off;
    fr_engine_stats_get(off, &st_off);
    CHECK(!st_off.prefix_cache && st_off.prefix_queries == 0 && st_off.kv_blocks_cached == 0);
    CHECK(st.prefix_cache);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    fr_engine_free(off);
    fr_engine_free(on);
    return st;
}

TEST(engine_second_request_shares_prefix) {
    fr_model *m = load_fixture(&g_text, "qwen2-tiny");
    if (!m) return;
    static job j[3];
    memset(j, 0, sizeof j);
    uint64_t rng = 99;
    int32_t sys[50];
    random_ids(&rng, sys, 50, m->hp.n_vocab, -1);
    for (int i = 0; i < 2; i++) {
        memcpy(j[i].ids, sys, sizeof sys);
        j[i].n = 50 + 20 + 5 * i;
        random_ids(&rng, j[i].ids + 50, j[i].n - 50, m->hp.n_vocab, -1);
    }
    j[2] = j[0]; /* the first prompt again */
    fr_engine_stats st = compare_runs(m, base_cfg(true), j, 3, NOUT, false);
    CHECK_EQ_INT(j[0].n_cached, 0);
    CHECK_EQ_INT(j[1].n_cached, 48); /* the system prompt's 3 full blocks; block 3 mixes users */
    CHECK_EQ_INT(j[2].n_cached, 64); /* (70 - 1) / 16 = 4 blocks: the last token is computed */
    CHECK_EQ_INT(st.prefix_queries, 70 + 75 + 70);
    CHECK_EQ_INT(st.prefix_hits, 48 + 64);
    CHECK(st.kv_blocks_cached > 0 && st.kv_blocks_evictable == st.kv_blocks_cached);
}

/* Turn k's prompt = turn k-1's prompt + its output + a new user message: the blocks the
 * previous turn generated are reused too. */
TEST(engine_multi_turn_reuses_generated_blocks) {
    fr_model *m = load_fixture(&g_text, "qwen2-tiny");
    if (!m) return;
    fr_engine_config cfg = base_cfg(true);
    fr_err err = {0};
    fr_engine *on = fr_engine_new(m, &cfg, &err);
    cfg.prefix_cache = false;
    fr_engine *off = fr_engine_new(m, &cfg, &err);
    CHECK(on && off);
    if (!on || !off) return;
    uint64_t rng = 5;
    static job jon, joff;
    memset(&jon, 0, sizeof jon);
    jon.n = 40;
    random_ids(&rng, jon.ids, 40, m->hp.n_vocab, -1);
    joff = jon;
    const int nout = 20;
    int prev_written = 0; /* positions whose K/V the previous turn wrote */
    for (int turn = 0; turn < 5; turn++) {
        fr_req *a = submit(on, &jon, nout), *b = submit(off, &joff, nout);
        CHECK(a && b);
        if (!a || !b) break;
        collect(a, &jon, nout);
        collect(b, &joff, nout);
        CHECK(jon.n_out == joff.n_out && !memcmp(jon.out, joff.out, sizeof(int32_t) * nout));
        int want = turn == 0 ? 0 : FR_MIN(prev_written / 16, (jon.n - 1) / 16) * 16;
        CHECK_EQ_INT(jon.n_cached, want);
        prev_written = jon.n + nout - 1; /* the last sampled token is never fed back */
        /* next turn: + the reply + 17 new tokens */
        memcpy(jon.ids + jon.n, jon.out, sizeof(int32_t) * nout);
        jon.n += nout;
        random_ids(&rng, jon.ids + jon.n, 17, m->hp.n_vocab, -1);
        jon.n += 17;
        memcpy(joff.ids, jon.ids, sizeof(int32_t) * (size_t)jon.n);
        joff.n = jon.n;
    }
    fr_engine_free(on);
    fr_engine_free(off);
}

TEST(engine_equal_after_eviction) {
    fr_model *m = load_fixture(&g_text, "qwen2-tiny");
    if (!m) return;
    static job j[12];
    memset(j, 0, sizeof j);
    uint64_t rng = 31;
    int32_t sys[40];
    random_ids(&rng, sys, 40, m->hp.n_vocab, -1);
    for (int i = 0; i < 12; i++) {
        j[i].n = 60 + i;
        random_ids(&rng, j[i].ids, j[i].n, m->hp.n_vocab, -1);
        if (i % 3 == 0) memcpy(j[i].ids, sys, sizeof sys); /* some share a prefix */
    }
    j[9] = j[0], j[10] = j[1], j[11] = j[3]; /* early prompts again, after the pool turned over */
    fr_engine_config cfg = base_cfg(true);
    cfg.kv_blocks = 14; /* 4 or 5 blocks a request: the cache turns over every few requests */
    fr_engine_stats st = compare_runs(m, cfg, j, 12, NOUT, false);
    CHECK(st.prefix_evictions > 0);
    CHECK(j[3].n_cached == 32 || j[3].n_cached == 0);
    for (int i = 0; i < 12; i++) CHECK(j[i].n_cached % 16 == 0 && j[i].n_cached < j[i].n);
}

TEST(engine_equal_with_requests_in_flight) {
    fr_model *m = load_fixture(&g_text, "qwen2-tiny");
    if (!m) return;
    static job j[MAXR];
    memset(j, 0, sizeof j);
    uint64_t rng = 77;
    int32_t sys[45];
    random_ids(&rng, sys, 45, m->hp.n_vocab, -1);
    for (int i = 0; i < MAXR; i++) {
        memcpy(j[i].ids, sys, sizeof sys);
        j[i].n = 45 + 3 + (i * 7) % 40;
        random_ids(&rng, j[i].ids + 45, j[i].n - 45, m->hp.n_vocab, -1);
    }
    fr_engine_config cfg = base_cfg(true);
    cfg.max_running = 4; /* later arrivals are admitted after the first computed the prefix */
    fr_engine_stats st = compare_runs(m, cfg, j, MAXR, NOUT, true);
    CHECK(st.prefix_hits > 0);
    int hits = 0;
    for (int i = 0; i < MAXR; i++) {
        CHECK(j[i].n_cached == 0 || j[i].n_cached == 32);
        hits += j[i].n_cached > 0;
    }
    CHECK(hits >= MAXR / 2);
    /* under constant preemption (a pool far too small for 8 running requests) */
    cfg.max_running = 8;
    cfg.kv_blocks = 20;
    st = compare_runs(m, cfg, j, MAXR, NOUT, true);
    CHECK(st.preempted[1] > 0);
    CHECK(st.prefix_hits > 0);
}

TEST(engine_opt_out_and_salt) {
    fr_model *m = load_fixture(&g_text, "qwen2-tiny");
    if (!m) return;
    static job j[5];
    memset(j, 0, sizeof j);
    uint64_t rng = 3;
    j[0].n = 50;
    random_ids(&rng, j[0].ids, 50, m->hp.n_vocab, -1);
    j[1] = j[0], j[1].no_cache = 1;  /* opts out: computes everything */
    j[2] = j[0], j[2].salt = 42;     /* another salt: its own chain */
    j[3] = j[0], j[3].salt = 42;     /* same salt: shares j[2]'s */
    j[4] = j[0];                     /* no salt: shares j[0]'s */
    fr_engine_stats st = compare_runs(m, base_cfg(true), j, 5, NOUT, false);
    CHECK_EQ_INT(j[1].n_cached, 0);
    CHECK_EQ_INT(j[2].n_cached, 0);
    CHECK_EQ_INT(j[3].n_cached, 48);
    CHECK_EQ_INT(j[4].n_cached, 48);
    CHECK_EQ_INT(st.prefix_queries, 4 * 50); /* the opted-out request is not a query */
}

/* A request that shares another's blocks keeps them when that one is cancelled mid-run, and its
 * output is the uncached one; every block is back at the end. */
TEST(engine_cancel_while_shared) {
    fr_model *m = load_fixture(&g_text, "qwen2-tiny");
    if (!m) return;
    static job j[2], ref;
    memset(j, 0, sizeof j);
    uint64_t rng = 21;
    j[0].n = 90;
    random_ids(&rng, j[0].ids, 90, m->hp.n_vocab, -1);
    j[1] = j[0];
    ref = j[1];
    fr_engine_config cfg = base_cfg(false);
    fr_err err = {0};
    fr_engine *off = fr_engine_new(m, &cfg, &err);
    CHECK(off != NULL);
    if (!off) return;
    run_jobs(off, &ref, 1, NOUT, false);
    fr_engine_free(off);
    cfg.prefix_cache = true;
    fr_engine *on = fr_engine_new(m, &cfg, &err);
    CHECK(on != NULL);
    if (!on) return;
    fr_req *a = submit(on, &j[0], 400); /* long: still running when b arrives */
    CHECK(a != NULL);
    if (!a) return;
    fr_req_info ia;
    while (!fr_req_wait(a, NULL, 0.05, &ia) && ia.n_generated < 2) {
    }
    fr_req *b = submit(on, &j[1], NOUT);
    CHECK(b != NULL);
    fr_req_info ib;
    while (b && !fr_req_wait(b, NULL, 0.01, &ib) && ib.t_admit == 0) {
    }
    fr_req_cancel(a, FR_END_CANCELLED);
    if (b) collect(b, &j[1], NOUT);
    CHECK_EQ_INT(j[1].n_cached, 80); /* (90 - 1) / 16 = 5 blocks, all a's */
    CHECK(j[1].n_out == ref.n_out && !memcmp(j[1].out, ref.out, sizeof(int32_t) * NOUT));
    double t0 = fr_time_s();
    while (!fr_req_wait(a, NULL, 0.05, &ia) && fr_time_s() - t0 < 10) {
    }
    CHECK_EQ_INT(ia.end, FR_END_CANCELLED);
    fr_req_release(a);
    fr_engine_stats st;
    fr_engine_stats_get(on, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    CHECK(st.kv_blocks_cached > 0);
    fr_engine_free(on);
}

/* ---- vision-language prompts: image rows and M-RoPE positions are in the key ---- */

TEST(engine_vl_image_content_in_key) {
    fr_model *m = load_fixture(&g_vl, "qwen25vl-tiny");
    CHECK(m != NULL);
    if (!m) return;
    const int img = m->hp.image_token_id, E = m->hp.n_embd;
    /* 20 text tokens, one 8x8-patch image (16 tokens after the 2x2 merge), 30 text tokens */
    enum { N = 66, NI = 16 };
    int32_t ids[N];
    uint64_t rng = 11;
    random_ids(&rng, ids, N, m->hp.n_vocab, img);
    for (int i = 20; i < 20 + NI; i++) ids[i] = img;
    int32_t grid[3] = {1, 8, 8}, rpos[3 * N], delta;
    fr_err err = {0};
    CHECK(fr_vl_rope_index(ids, N, img, grid, 1, 2, rpos, &delta, &err) == 0);
    float *f1 = malloc(sizeof(float) * NI * (size_t)E), *f2 = malloc(sizeof(float) * NI * (size_t)E);
    for (int i = 0; i < NI * E; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        f1[i] = (float)((double)(rng >> 40) / (double)(1ull << 24) - 0.5);
        f2[i] = f1[i];
    }
    for (int i = 4 * E; i < NI * E; i++) f2[i] = -3 * f1[i]; /* image 2: rows 4.. differ */
    const float *feats[4] = {f1, f2, f1, f1};
    int want_cached[4] = {0, 16, 64, 16};
    fr_engine_config cfg = base_cfg(true);
    cfg.max_ctx = 1024;
    int32_t outs[2][4][NOUT];
    for (int pass = 0; pass < 2; pass++) {
        cfg.prefix_cache = pass == 1;
        fr_engine *e = fr_engine_new(m, &cfg, &err);
        CHECK(e && fr_engine_takes_images(e));
        if (!e) break;
        for (int k = 0; k < 4; k++) {
            fr_req_params p;
            memset(&p, 0, sizeof p);
            p.prompt = ids, p.n_prompt = N;
            p.gen = fr_gen_params_default();
            p.gen.max_tokens = NOUT, p.gen.ignore_eos = true;
            p.sampling = fr_sampling_default();
            p.sampling.temperature = 0;
            p.tier = 1;
            p.img_embd = feats[k], p.n_img_rows = NI, p.image_token_id = img;
            p.rope_pos = rpos;
            /* request 3: the same ids and rows without M-RoPE positions: another key, since the
             * positions after the image differ from plain ones */
            if (k == 3) p.rope_pos = NULL;
            fr_req *r = fr_engine_submit(e, &p, NULL);
            CHECK(r != NULL);
            if (!r) continue;
            fr_req_info info;
            double t0 = fr_time_s();
            while (!fr_req_wait(r, NULL, 0.05, &info) && fr_time_s() - t0 < 60) {
            }
            CHECK_EQ_INT(info.end, FR_END_LENGTH);
            CHECK_EQ_INT(fr_req_output_ids(r, outs[pass][k], NOUT), NOUT);
            CHECK_EQ_INT(info.n_cached, pass ? want_cached[k] : 0);
            fr_req_release(r);
        }
        fr_engine_free(e);
    }
    for (int k = 0; k < 4; k++) CHECK(!memcmp(outs[0][k], outs[1][k], sizeof outs[0][k]));
    /* the other image changes the output (so sharing image 1's blocks would show) */
    CHECK(memcmp(outs[0][0], outs[0][1], sizeof outs[0][0]) != 0);
    free(f1);
    free(f2);
}

int main(void) {
    int rc = t_main();
    fr_model_free(g_text);
    fr_model_free(g_vl);
    return rc;
}

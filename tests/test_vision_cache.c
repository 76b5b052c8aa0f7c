/* test_vision_cache.c — the vision encoder cache (src/stages/vision/cache.h): SHA-256 against
 * the FIPS 180-4 examples, keys, hits returning identical bytes, LRU eviction order, the byte
 * budget, references that outlive eviction, and concurrent use from several threads. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stages/vision/cache.h"
#include "t.h"

static void sha_hex(const void *data, size_t len, char out[65]) {
    uint8_t md[32];
    fr_err err = {0};
    CHECK_EQ_INT(fr_vision_sha256(data, len, md, &err), 0);
    fr_vision_digest_hex(md, out);
}

TEST(sha256_fips180_vectors) {
    char hex[65];
    sha_hex("abc", 3, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha_hex("", 0, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha_hex(NULL, 0, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha_hex(two, strlen(two), hex);
    CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *four = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
                       "jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    sha_hex(four, strlen(four), hex);
    CHECK_STR(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    char *mil = malloc(1000000);
    memset(mil, 'a', 1000000);
    sha_hex(mil, 1000000, hex);
    CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(mil);
}

TEST(keys) {
    fr_vision_key a, b, c;
    fr_err err = {0};
    const char img[] = "\x89PNG fake image bytes";
    CHECK_EQ_INT(fr_vision_key_make(&a, img, sizeof img, 3136, 12845056, &err), 0);
    CHECK_EQ_INT(fr_vision_key_make(&b, img, sizeof img, 3136, 12845056, &err), 0);
    CHECK(!memcmp(&a, &b, sizeof a));
    CHECK_EQ_INT(fr_vision_key_make(&c, img, sizeof img, 3136, 1003520, &err), 0);
    CHECK(!memcmp(a.digest, c.digest, 32) && a.max_pixels != c.max_pixels);
    CHECK_EQ_INT(fr_vision_key_make(&a, NULL, 5, 0, 10, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(fr_vision_key_make(&a, img, 3, -1, 10, &err), -1);
    CHECK_EQ_INT(fr_vision_key_make(&a, img, 3, 100, 10, &err), -1);
    CHECK_EQ_INT(fr_vision_key_make(&a, NULL, 0, 0, 0, &err), 0);

    /* the same bytes under other preprocessing parameters are another entry */
    fr_vision_cache *ca = fr_vision_cache_new(1 << 20, &err);
    fr_vision_key_make(&a, img, sizeof img, 3136, 12845056, &err);
    float f[4] = {1, 2, 3, 4};
    int g[3] = {1, 2, 2};
    CHECK_EQ_INT(fr_vision_cache_put(ca, &a, f, 1, 4, g, &err), 1);
    CHECK(fr_vision_cache_get(ca, &c) == NULL);
    const fr_vision_entry *e = fr_vision_cache_get(ca, &a);
    CHECK(e != NULL);
    fr_vision_entry_release(e);
    fr_vision_cache_free(ca);
}

/* Features of test image `id`: a pattern only that id produces. */
static void fill(float *f, int64_t n, int d, int id) {
    for (int64_t i = 0; i < n * d; i++) f[i] = (float)id * 1000.0f + (float)i * 0.5f;
}

static void key_of(fr_vision_key *k, int id) {
    char bytes[32];
    snprintf(bytes, sizeof bytes, "image-%d", id);
    fr_err err = {0};
    FR_ASSERT(fr_vision_key_make(k, bytes, strlen(bytes), 3136, 1003520, &err) == 0);
}

TEST(hit_returns_identical_bytes) {
    fr_err err = {0};
    fr_vision_cache *c = fr_vision_cache_new(8 << 20, &err);
    CHECK(c != NULL);
    enum { N = 64, D = 96 };
    static float f[N * D];
    fill(f, N, D, 7);
    f[5] = -0.0f; /* bytes, not values: -0 and NaN payloads survive */
    uint32_t nanbits = 0x7fc01234;
    memcpy(&f[6], &nanbits, 4);
    fr_vision_key k;
    key_of(&k, 7);
    int g[3] = {1, 16, 16};
    CHECK(fr_vision_cache_get(c, &k) == NULL);
    CHECK_EQ_INT(fr_vision_cache_put(c, &k, f, N, D, g, &err), 1);
    CHECK_EQ_INT(fr_vision_cache_put(c, &k, f, N, D, g, &err), 0); /* already there */
    const fr_vision_entry *e = fr_vision_cache_get(c, &k);
    CHECK(e != NULL);
    if (e) {
        CHECK(e->feat != f); /* a copy */
        CHECK(!memcmp(e->feat, f, sizeof f));
        CHECK_EQ_INT(e->n, N);
        CHECK_EQ_INT(e->d, D);
        CHECK(e->grid_thw[0] == 1 && e->grid_thw[1] == 16 && e->grid_thw[2] == 16);
    }
    fr_vision_entry_release(e);
    fr_vision_cache_stats st;
    fr_vision_cache_stats_get(c, &st);
    CHECK_EQ_INT(st.hits, 1);
    CHECK_EQ_INT(st.misses, 1);
    CHECK_EQ_INT(st.inserts, 1);
    CHECK_EQ_INT(st.entries, 1);
    CHECK(st.bytes >= sizeof f && st.bytes < sizeof f + 1024);
    fr_vision_cache_free(c);
}

TEST(kept_entry_carries_its_mask) {
    /* an image whose background units were dropped: n rows of n_all, the mask comes back */
    fr_err err = {0};
    fr_vision_cache *c = fr_vision_cache_new(1 << 20, &err);
    enum { ALL = 12, D = 8 };
    uint8_t keep[ALL] = {1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0}; /* 5 kept */
    float f[5 * D];
    fill(f, 5, D, 3);
    fr_vision_key k;
    key_of(&k, 11);
    int g[3] = {1, 6, 8};
    CHECK_EQ_INT(fr_vision_cache_put_kept(c, &k, f, 4, D, g, keep, ALL, &err), -1); /* 4 != 5 */
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(fr_vision_cache_put_kept(c, &k, f, 5, D, g, keep, 4, &err), -1); /* n_all < n */
    CHECK_EQ_INT(fr_vision_cache_put_kept(c, &k, f, 5, D, g, keep, ALL, &err), 1);
    keep[1] = 1; /* the cache holds its own copy */
    const fr_vision_entry *e = fr_vision_cache_get(c, &k);
    CHECK(e != NULL);
    if (e) {
        CHECK_EQ_INT(e->n, 5);
        CHECK_EQ_INT(e->n_all, ALL);
        CHECK(e->keep != NULL);
        if (e->keep) {
            int ones = 0;
            for (int u = 0; u < ALL; u++) ones += e->keep[u];
            CHECK_EQ_INT(ones, 5);
            CHECK(e->keep[0] == 1 && e->keep[1] == 0 && e->keep[10] == 1 && e->keep[11] == 0);
        }
        CHECK(!memcmp(e->feat, f, sizeof f));
    }
    fr_vision_entry_release(e);
    /* a plain put: no mask, n_all == n */
    key_of(&k, 12);
    CHECK_EQ_INT(fr_vision_cache_put(c, &k, f, 5, D, g, &err), 1);
    e = fr_vision_cache_get(c, &k);
    CHECK(e && e->keep == NULL && e->n_all == 5);
    fr_vision_entry_release(e);
    fr_vision_cache_free(c);
}

/* Bytes one entry of n x d costs, measured from the stats. */
static size_t entry_cost(int64_t n, int d) {
    fr_err err = {0};
    fr_vision_cache *c = fr_vision_cache_new((size_t)1 << 30, &err);
    float *f = calloc((size_t)(n * d), sizeof *f);
    fr_vision_key k;
    key_of(&k, 0);
    int g[3] = {1, 1, 1};
    fr_vision_cache_put(c, &k, f, n, d, g, &err);
    fr_vision_cache_stats st;
    fr_vision_cache_stats_get(c, &st);
    fr_vision_cache_free(c);
    free(f);
    return st.bytes;
}

TEST(eviction_order_is_lru) {
    enum { N = 16, D = 32 };
    size_t cost = entry_cost(N, D);
    fr_err err = {0};
    fr_vision_cache *c = fr_vision_cache_new(3 * cost, &err); /* room for three */
    static float f[N * D];
    int g[3] = {1, 8, 8};
    fr_vision_key k[5];
    for (int i = 0; i < 5; i++) key_of(&k[i], i + 1);
    for (int i = 0; i < 3; i++) {
        fill(f, N, D, i + 1);
        CHECK_EQ_INT(fr_vision_cache_put(c, &k[i], f, N, D, g, &err), 1);
    }
    fr_vision_entry_release(fr_vision_cache_get(c, &k[0])); /* 1 becomes the most recent */
    fill(f, N, D, 4);
    CHECK_EQ_INT(fr_vision_cache_put(c, &k[3], f, N, D, g, &err), 1); /* evicts 2 */
    const fr_vision_entry *e;
    CHECK((e = fr_vision_cache_get(c, &k[1])) == NULL);
    CHECK((e = fr_vision_cache_get(c, &k[2])) != NULL); /* 3 most recent now; order 3 1 4 */
    fr_vision_entry_release(e);
    fill(f, N, D, 5);
    CHECK_EQ_INT(fr_vision_cache_put(c, &k[4], f, N, D, g, &err), 1); /* evicts 1 */
    CHECK((e = fr_vision_cache_get(c, &k[0])) == NULL);
    int live[] = {2, 3, 4};
    for (int i = 0; i < 3; i++) {
        e = fr_vision_cache_get(c, &k[live[i]]);
        CHECK(e != NULL);
        if (e) {
            fill(f, N, D, live[i] + 1);
            CHECK(!memcmp(e->feat, f, sizeof f));
        }
        fr_vision_entry_release(e);
    }
    fr_vision_cache_stats st;
    fr_vision_cache_stats_get(c, &st);
    CHECK_EQ_INT(st.evictions, 2);
    CHECK_EQ_INT(st.entries, 3);
    CHECK(st.bytes <= st.budget);
    fr_vision_cache_free(c);
}

TEST(budget_respected) {
    fr_err err = {0};
    size_t budget = 100000;
    fr_vision_cache *c = fr_vision_cache_new(budget, &err);
    float *f = calloc(40000, sizeof *f);
    int g[3] = {1, 2, 2};
    fr_vision_cache_stats st;
    uint64_t seed = 1;
    for (int i = 0; i < 200; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int64_t n = 1 + (int64_t)((seed >> 33) % 300);
        fr_vision_key k;
        key_of(&k, 100 + i);
        fill(f, n, 16, i);
        CHECK(fr_vision_cache_put(c, &k, f, n, 16, g, &err) == 1);
        fr_vision_cache_stats_get(c, &st);
        CHECK(st.bytes <= budget);
        CHECK(st.entries >= 1);
    }
    /* larger than the whole budget: not stored, nothing evicted */
    fr_vision_cache_stats_get(c, &st);
    uint64_t ev = st.evictions;
    int64_t ent = st.entries;
    fr_vision_key big;
    key_of(&big, 99);
    CHECK_EQ_INT(fr_vision_cache_put(c, &big, f, 40000 / 16, 16, g, &err), 0);
    fr_vision_cache_stats_get(c, &st);
    CHECK_EQ_INT(st.rejected, 1);
    CHECK_EQ_INT(st.evictions, ev);
    CHECK_EQ_INT(st.entries, ent);
    CHECK(fr_vision_cache_get(c, &big) == NULL);
    /* bad arguments */
    CHECK_EQ_INT(fr_vision_cache_put(c, &big, f, 0, 16, g, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(fr_vision_cache_put(c, &big, f, 4, 0, g, &err), -1);
    int g0[3] = {1, 0, 2};
    CHECK_EQ_INT(fr_vision_cache_put(c, &big, f, 4, 4, g0, &err), -1);
    CHECK_EQ_INT(fr_vision_cache_put(c, NULL, f, 4, 4, g, &err), -1);
    CHECK_EQ_INT(fr_vision_cache_put(c, &big, NULL, 4, 4, g, &err), -1);
    CHECK_EQ_INT(fr_vision_cache_put(c, &big, f, INT64_MAX / 2, 1 << 20, g, &err), -1);
    CHECK(fr_vision_cache_new(0, &err) == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    free(f);
    fr_vision_cache_free(c);
}

TEST(reference_outlives_eviction_and_free) {
    enum { N = 8, D = 8 };
    size_t cost = entry_cost(N, D);
    fr_err err = {0};
    fr_vision_cache *c = fr_vision_cache_new(cost, &err); /* room for one */
    float f[N * D], want[N * D];
    int g[3] = {1, 4, 4};
    fr_vision_key a, b;
    key_of(&a, 1);
    key_of(&b, 2);
    fill(want, N, D, 1);
    CHECK_EQ_INT(fr_vision_cache_put(c, &a, want, N, D, g, &err), 1);
    const fr_vision_entry *held = fr_vision_cache_get(c, &a);
    CHECK(held != NULL);
    fill(f, N, D, 2);
    CHECK_EQ_INT(fr_vision_cache_put(c, &b, f, N, D, g, &err), 1); /* evicts a */
    CHECK(fr_vision_cache_get(c, &a) == NULL);
    if (held) CHECK(!memcmp(held->feat, want, sizeof want)); /* still valid (ASan would see) */
    const fr_vision_entry *hb = fr_vision_cache_get(c, &b);
    fr_vision_cache_free(c);
    if (hb) CHECK(!memcmp(hb->feat, f, sizeof f)); /* valid after the cache is gone */
    fr_vision_entry_release(held);
    fr_vision_entry_release(hb);
    fr_vision_entry_release(NULL);
    CHECK(fr_vision_cache_get(NULL, &a) == NULL);
}

/* ---- several threads at once ---- */
enum { T_THREADS = 8, T_ITERS = 3000, T_IMAGES = 40, T_N = 12, T_D = 16 };

typedef struct tctx {
    fr_vision_cache *c;
    int id;
    int bad;         /* a hit whose bytes were wrong */
    uint64_t gets;   /* gets made */
    uint64_t hits;   /* of which hits */
} tctx;

static void *worker(void *arg) {
    tctx *t = arg;
    uint64_t s = (uint64_t)t->id * 0x9E3779B97F4A7C15ull + 7;
    float f[T_N * T_D], want[T_N * T_D];
    int g[3] = {1, 6, 8};
    fr_err err = {0};
    for (int it = 0; it < T_ITERS; it++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        int img = (int)(s % T_IMAGES);
        fr_vision_key k;
        key_of(&k, img);
        const fr_vision_entry *e = fr_vision_cache_get(t->c, &k);
        t->gets++;
        if (e) {
            t->hits++;
            fill(want, T_N, T_D, img);
            if (memcmp(e->feat, want, sizeof want) || e->n != T_N || e->d != T_D) t->bad++;
            fr_vision_entry_release(e);
        } else {
            fill(f, T_N, T_D, img);
            if (fr_vision_cache_put(t->c, &k, f, T_N, T_D, g, &err) < 0) t->bad++;
        }
    }
    return NULL;
}

TEST(concurrent_use) {
    size_t cost = entry_cost(T_N, T_D);
    fr_err err = {0};
    fr_vision_cache *c = fr_vision_cache_new(10 * cost, &err); /* a quarter of the images */
    pthread_t th[T_THREADS];
    tctx ctx[T_THREADS];
    for (int i = 0; i < T_THREADS; i++) {
        ctx[i] = (tctx){.c = c, .id = i};
        CHECK_EQ_INT(pthread_create(&th[i], NULL, worker, &ctx[i]), 0);
    }
    uint64_t gets = 0, hits = 0;
    int bad = 0;
    for (int i = 0; i < T_THREADS; i++) {
        pthread_join(th[i], NULL);
        gets += ctx[i].gets;
        hits += ctx[i].hits;
        bad += ctx[i].bad;
    }
    fr_vision_cache_stats st;
    fr_vision_cache_stats_get(c, &st);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(st.hits + st.misses, gets);
    CHECK_EQ_INT(st.hits, hits);
    CHECK(st.hits > 0 && st.misses > 0 && st.evictions > 0);
    CHECK(st.bytes <= st.budget);
    CHECK(st.entries <= 10);
    CHECK_EQ_INT(st.inserts - st.evictions, st.entries);
    fprintf(stderr, "  %d threads: %llu gets, hit rate %.2f, %llu evictions\n", T_THREADS,
            (unsigned long long)gets, (double)st.hits / (double)gets,
            (unsigned long long)st.evictions);
    fr_vision_cache_free(c);
}

int main(void) { return t_main(); }

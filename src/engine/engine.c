/* engine.c — the serving engine's thread, request objects, queues, admission and preemption
 * (see engine.h for the life of a request, sched.h for the decisions).
 *
 * Locking: one engine mutex (e->mu) guards the queues, the running array, the KV pool's free
 * list, the counters and every request's scheduling fields (n_tok, n_done, state). The engine
 * thread drops it only around the forward pass (fr_backend_forward or
 * fr_backend_forward_sample), which touches the running sequences' caches and nothing the lock
 * guards. Each request has its own channel mutex (r->mu) for the text and the info a front end
 * reads; lock order is engine before request, never the reverse.
 *
 * Backend: e->be (backend/backend.h) runs the forward pass; e->kv is its pool (fr_backend_kv).
 * On the CPU the backend is created with a one-block pool which is then replaced by a pool of the
 * engine's own block size and block count, so the CPU path is the decoder and pool it always was.
 * When the backend samples on the device (CUDA), build_step also fills one fr_sampling and one
 * draw counter (tokens generated so far) per logits row and deliver takes the ids it returns.
 *
 * Metering: see engine.h. The meter is called under e->mu (the meter never calls back into the
 * engine, so the order engine -> meter cannot deadlock); its calls are O(1) (O(shares) for a
 * step) and never block on I/O.
 *
 * Images (vision-language prompts, engine.h): a request may carry feature rows for its prompt's
 * image tokens and M-RoPE positions. A step that holds such a request passes fr_batch.embd /
 * embd_use / rope_pos for the whole batch (text tokens: their own embedding and pos on all three
 * rows, which the decoder computes bit-identically to plain RoPE); a step of text requests only
 * passes none of them, so text-only serving is what it was. Generated tokens (and their
 * recomputation after preemption) take KV position + the request's delta.
 *
 * Prefix cache (engine.h, backend/kv.h): admit looks the queued request's leading full blocks up
 * by key (keys are computed on demand and kept per request: block i's key chains over block
 * i-1's), shares the hits and prefills from the first missing position; deliver publishes every
 * block a step filled. Admission counts cached blocks nobody holds as available (a reservation
 * evicts them, least recently released first) and does not count the hits it will share as
 * needed. A cached block a queued request found can only be evicted by a reservation, and
 * admission shares its hits before it reserves anything, so a lookup stays valid until used.
 *
 * Memory: requests allocate at submit (token array sized prompt + max_tokens, sampler, gen
 * state); the step loop itself only uses scratch allocated in fr_engine_new (batch arrays,
 * logits, plan items), plus whatever fr_seq_reserve needs to grow a block table and the amortised
 * growth of text buffers.
 */
#include "engine/engine.h"
#include "model/lora.h"

#include "backend/backend.h"
#include "meter/meter.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { R_QUEUED = 1, R_RUNNING = 2, R_ENDED = 3 };

struct fr_req {
    /* fixed at submit */
    uint64_t arrival;      /* submit order (larger = newer) */
    int tier;              /* FR_TIER_P0..P2 */
    int n_prompt;          /* prompt tokens */
    double t_arrival;      /* fr_time_s() at arrival */
    int max_tokens;        /* output limit */
    double deadline;       /* absolute, 0 = none */
    /* scheduling state (engine lock) */
    int state;             /* R_QUEUED / R_RUNNING / R_ENDED */
    int prio;              /* effective tier when admitted (aging); victims are chosen by it */
    int32_t *tokens;       /* prompt then generated tokens */
    int n_tok;             /* tokens known */
    int cap_tok;           /* capacity of tokens */
    int n_done;            /* tokens whose K/V are in the cache (mirror of seq.n_pos) */
    int take;              /* tokens planned for this step */
    bool gone;             /* left the running array this step (preempted or ended) */
    bool admitted_once;    /* prompt tokens counted */
    fr_req *qprev, *qnext; /* links in its tier's queue */
    fr_seq seq;            /* KV block table (engine thread) */
    fr_gen gen;            /* text release and stop logic (engine thread) */
    fr_sampler sampler;    /* sampling state (engine thread) */
    bool gen_live;         /* gen and sampler initialised and not yet freed */
    fr_sampling sp;        /* sampling parameters (device sampling) */
    float *img_embd;       /* (n_img_rows, n_embd) image feature rows (owned), or NULL */
    int32_t *img_row;      /* (n_prompt) row of img_embd of each prompt token, -1 for text; NULL
                              without images */
    int32_t *rope_pos;     /* (3, n_prompt) M-RoPE rows (owned), or NULL */
    int32_t rope_delta;    /* positions of tokens after the prompt: KV position + rope_delta */
    fr_meter_req *mreq;    /* meter account (owned once accepted), or NULL */
    fr_meter_step *mq;     /* open queue step, or NULL */
    /* prefix cache (engine thread) */
    bool no_cache;         /* the request opted out: no lookup, nothing published */
    uint64_t root;         /* chain root of its block keys (fr_kv_chain_root of its salt and
                              its adapter's hash) */
    fr_lora *lora;         /* its LoRA adapter (a reference), or NULL */
    uint64_t *row_hash;    /* (n_img_rows) content hash of each image feature row, or NULL */
    fr_kv_block_key *bkey; /* (cap_tok / block_size + 1) keys of its leading blocks */
    int n_bkey;            /* keys computed so far (tokens never change, so they stay valid) */
    int n_pub;             /* leading blocks of seq published (or offered) already */
    /* cross-thread */
    atomic_int cancel;     /* fr_end a front end asked for, 0 = none */
    atomic_int refs;       /* references: the front end's and the engine's */
    pthread_mutex_t mu;    /* channel lock */
    pthread_cond_t cv;     /* signalled on new text and at the end */
    fr_buf out;            /* released text not yet taken (mu) */
    fr_req_info info;      /* consumer view (mu) */
};

struct fr_engine {
    const fr_model *m;      /* shared, read-only */
    fr_engine_config cfg;   /* resolved configuration */
    fr_kv_pool *kv;         /* the paged cache (the backend's) */
    fr_backend *be;         /* forward pass with scratch for step_tokens tokens */
    bool dev_sample;        /* the backend samples next to the logits */
    int meter_dev;          /* meter device of the steps */
    int n_vocab;
    int watermark;          /* free blocks kept for decode growth when admitting */
    /* step scratch, sized at start */
    int32_t *b_tok, *b_pos; /* (step_tokens) batch tokens and positions */
    fr_seq **b_seq;         /* (step_tokens) their sequences */
    const fr_lora **b_lora; /* (step_tokens) their adapters */
    uint8_t *b_logit;       /* (step_tokens) logits wanted */
    float *logits;          /* (max_running, n_vocab) */
    fr_req **logit_req;     /* (max_running) the request of each logits row */
    fr_req **batch_req;     /* (max_running) requests in this step's batch */
    fr_sched_item *items;   /* (max_running) plan */
    fr_sched_cand *cands;   /* (max_running) victim candidates */
    fr_sampling *row_sp;    /* (max_running) device sampling: parameters per logits row */
    uint64_t *row_ctr;      /* (max_running) device sampling: draw counter per logits row */
    int32_t *row_id;        /* (max_running) device sampling: sampled ids */
    fr_meter_share *shares; /* (max_running) meter shares of one step */
    bool takes_images;      /* vision model with M-RoPE on a backend that takes both */
    float *b_embd;          /* (step_tokens, n_embd) image rows of a step (takes_images only) */
    uint8_t *b_use;         /* (step_tokens) which rows of b_embd are used */
    int32_t *b_rope;        /* (3, step_tokens) M-RoPE rows of a step (packed to (3, nb)) */
    fr_buf delta;           /* text released by one token */
    int *hit_ids;           /* (max_ctx / block_size + 2) cached blocks found at admission */
    /* shared state (mu) */
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* wakes the engine thread: new work or stop */
    pthread_t thread;
    bool thread_started;
    bool stop;              /* thread must exit */
    bool closed;            /* refuse new submissions */
    fr_req *qhead[FR_N_TIERS], *qtail[FR_N_TIERS]; /* queues, oldest arrival first */
    int n_wait[FR_N_TIERS];
    fr_req **run;           /* (max_running) running requests */
    int n_run;
    uint64_t next_arrival;
    fr_sched_fair fair;     /* fair-share state */
    fr_engine_stats st;     /* counters (running/waiting/kv filled in on read) */
};

const char *fr_end_name(fr_end e) {
    switch (e) {
    case FR_END_NONE: return "none";
    case FR_END_STOP: return "stop";
    case FR_END_LENGTH: return "length";
    case FR_END_CANCELLED: return "cancelled";
    case FR_END_DEADLINE: return "deadline";
    case FR_END_SHUTDOWN: return "shutdown";
    case FR_END_ERROR: return "error";
    }
    return "?";
}

const char *fr_admit_name(fr_admit a) {
    switch (a) {
    case FR_ADMIT_OK: return "ok";
    case FR_ADMIT_QUEUE_FULL: return "queue_full";
    case FR_ADMIT_OVERLOAD: return "overload";
    case FR_ADMIT_DEADLINE: return "deadline";
    case FR_ADMIT_TOO_LARGE: return "too_large";
    case FR_ADMIT_CLOSED: return "closed";
    case FR_ADMIT_INVALID: return "invalid";
    case FR_ADMIT_COUNT: break;
    }
    return "?";
}

fr_engine_config fr_engine_config_default(void) {
    fr_engine_config c;
    memset(&c, 0, sizeof c);
    c.block_size = 16;
    c.kv_bytes = (size_t)512 << 20;
    c.step_tokens = 256;
    c.prefill_chunk = 256;
    c.max_running = 64;
    c.max_ctx = 4096;
    c.weight[0] = 70, c.weight[1] = 20, c.weight[2] = 10;
    c.queue_max[0] = 64, c.queue_max[1] = 256, c.queue_max[2] = 1024;
    c.max_wait_s[0] = 2, c.max_wait_s[1] = 15, c.max_wait_s[2] = 120;
    c.aging_s = 10;
    c.warmup = true;
    c.kv_fraction = 0.9f;
    c.meter_device = FR_ENGINE_METER_DEV_AUTO;
    c.prefix_cache = true;
    return c;
}

/* ---- requests ---- */

static void req_free(fr_req *r) {
    if (r->gen_live) {
        fr_gen_free(&r->gen);
        fr_sampler_free(&r->sampler);
    }
    free(r->tokens);
    free(r->img_embd);
    free(r->img_row);
    free(r->rope_pos);
    free(r->row_hash);
    free(r->bkey);
    free(r->seq.blocks);
    fr_lora_free(r->lora);
    fr_buf_free(&r->out);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

void fr_req_release(fr_req *r) {
    if (r && atomic_fetch_sub(&r->refs, 1) == 1) req_free(r);
}

void fr_req_cancel(fr_req *r, fr_end reason) {
    if (!r) return;
    if (reason != FR_END_DEADLINE && reason != FR_END_SHUTDOWN) reason = FR_END_CANCELLED;
    int none = 0;
    atomic_compare_exchange_strong(&r->cancel, &none, (int)reason);
}

static void abs_deadline(struct timespec *ts, double timeout_s) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    double s = floor(timeout_s);
    ts->tv_sec += (time_t)s;
    ts->tv_nsec += (long)((timeout_s - s) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void cond_init_mono(pthread_cond_t *cv) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

bool fr_req_wait(fr_req *r, fr_buf *text, double timeout_s, fr_req_info *info) {
    pthread_mutex_lock(&r->mu);
    if (r->out.len == 0 && !r->info.done && timeout_s > 0) {
        struct timespec ts;
        abs_deadline(&ts, timeout_s);
        while (r->out.len == 0 && !r->info.done)
            if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT) break;
    }
    if (r->out.len) {
        if (text) fr_buf_append(text, r->out.data, r->out.len);
        r->out.len = 0;
    }
    if (info) *info = r->info;
    bool done = r->info.done;
    pthread_mutex_unlock(&r->mu);
    return done;
}

int fr_req_output_ids(fr_req *r, int32_t *out, int cap) {
    /* The engine appends a token before it publishes the new count under r->mu, and never
     * rewrites generated tokens (preemption keeps them), so the first n_generated are stable. */
    pthread_mutex_lock(&r->mu);
    int n = r->info.n_generated;
    if (n > cap) n = cap;
    if (n > 0) memcpy(out, r->tokens + r->n_prompt, (size_t)n * sizeof(int32_t));
    pthread_mutex_unlock(&r->mu);
    return n > 0 ? n : 0;
}

/* ---- queues (engine lock held) ---- */

static void q_remove(fr_engine *e, fr_req *r) {
    int t = r->tier;
    if (r->qprev) r->qprev->qnext = r->qnext;
    else e->qhead[t] = r->qnext;
    if (r->qnext) r->qnext->qprev = r->qprev;
    else e->qtail[t] = r->qprev;
    r->qprev = r->qnext = NULL;
    e->n_wait[t]--;
}

/* Insert keeping arrival order (a preempted request goes back ahead of later arrivals). */
static void q_insert(fr_engine *e, fr_req *r) {
    int t = r->tier;
    fr_req *after = e->qtail[t];
    while (after && after->arrival > r->arrival) after = after->qprev;
    r->qprev = after;
    r->qnext = after ? after->qnext : e->qhead[t];
    if (r->qnext) r->qnext->qprev = r;
    else e->qtail[t] = r;
    if (after) after->qnext = r;
    else e->qhead[t] = r;
    e->n_wait[t]++;
    r->state = R_QUEUED;
}

static int waiting_total(const fr_engine *e) {
    int n = 0;
    for (int t = 0; t < FR_N_TIERS; t++) n += e->n_wait[t];
    return n;
}

/* Drop entries marked gone from the running array, keeping order; ended ones lose the engine's
 * reference here (after their last use by the step). */
static void run_compact(fr_engine *e) {
    int k = 0;
    for (int i = 0; i < e->n_run; i++) {
        fr_req *r = e->run[i];
        if (!r->gone) e->run[k++] = r;
        else if (r->state == R_ENDED) fr_req_release(r);
    }
    e->n_run = k;
}

/* End a request (engine lock held): free its blocks and publish the end. The caller has taken
 * it out of its queue and releases the engine's reference, or it is in the running array and
 * run_compact does that. */
/* Close the request's meter account (engine lock held): the outcome its end reason maps to. The
 * HTTP codes are the ones the server answers with (docs/SERVING.md). */
static void meter_end(fr_engine *e, fr_req *r, fr_end why, const char *msg,
                      fr_meter_req_summary *sum) {
    fr_meter *m = e->cfg.meter;
    if (r->mq) {
        fr_meter_step_end(m, r->mq);
        r->mq = NULL;
    }
    fr_meter_req_result res = {.status = FR_REQ_OK, .http_status = 200, .error = msg,
                               .ttft_s = -1, .slo_met = -1};
    switch (why) {
    case FR_END_CANCELLED: res.status = FR_REQ_CANCELLED, res.http_status = 499; break;
    case FR_END_SHUTDOWN: res.status = FR_REQ_CANCELLED, res.http_status = 503; break;
    case FR_END_DEADLINE:
        res.status = FR_REQ_FAILED, res.http_status = 504;
        if (!msg) res.error = "deadline exceeded";
        break;
    case FR_END_ERROR: res.status = FR_REQ_FAILED, res.http_status = 500; break;
    default: break;
    }
    pthread_mutex_lock(&r->mu);
    res.tokens_in = r->n_prompt;
    res.tokens_out = r->info.n_generated;
    if (r->info.t_first > 0) res.ttft_s = r->info.t_first - r->t_arrival;
    pthread_mutex_unlock(&r->mu);
    fr_meter_request_end(m, r->mreq, &res, sum);
    r->mreq = NULL;
}

static void req_end(fr_engine *e, fr_req *r, fr_end why, const char *msg) {
    fr_meter_req_summary sum;
    bool metered = false;
    if (r->mreq && e->cfg.meter) {
        meter_end(e, r, why, msg, &sum);
        metered = true;
    }
    fr_seq_release(&r->seq, e->kv);
    r->n_done = 0;
    r->state = R_ENDED;
    r->gone = true;
    e->st.ended[r->tier][why]++;
    if (r->gen_live) {
        fr_gen_free(&r->gen);
        fr_sampler_free(&r->sampler);
        r->gen_live = false;
    }
    pthread_mutex_lock(&r->mu);
    r->info.done = true;
    r->info.end = why;
    r->info.t_end = fr_time_s();
    if (msg) snprintf(r->info.error, sizeof r->info.error, "%.150s", msg);
    if (metered) {
        r->info.metered = true;
        r->info.joules = sum.joules;
        r->info.usd = sum.usd;
        r->info.energy_estimated = sum.estimated;
        r->info.ledger_seq = sum.ledger_seq;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void preempt(fr_engine *e, fr_req *r) {
    fr_seq_release(&r->seq, e->kv); /* its published blocks stay cached until evicted */
    r->n_pub = 0;
    e->st.recomputed_tokens += (uint64_t)r->n_done;
    r->n_done = 0;
    r->gone = true;
    e->st.preempted[r->tier]++;
    q_insert(e, r);
    if (r->mreq && !r->mq)
        r->mq = fr_meter_stage_begin(e->cfg.meter, r->mreq, FR_MSTAGE_QUEUE, FR_METER_DEV_NONE);
    pthread_mutex_lock(&r->mu);
    r->info.n_preempted++;
    pthread_mutex_unlock(&r->mu);
}

/* ---- submission ---- */

static void gather_load(fr_engine *e, fr_sched_load *l) {
    memset(l, 0, sizeof *l);
    l->max_running = e->cfg.max_running;
    l->budget = e->cfg.step_tokens;
    l->step_s = e->st.ewma_step_s;
    l->token_s = e->st.ewma_token_s;
    for (int i = 0; i < e->n_run; i++) {
        fr_req *r = e->run[i];
        l->running[r->tier]++;
        int rem = r->n_tok - r->n_done;
        if (rem > 1) l->backlog[r->tier] += rem;
        int out_left = r->max_tokens - (r->n_tok - r->n_prompt);
        if (out_left > 0) l->decode_left[r->tier] += out_left;
    }
    for (int t = 0; t < FR_N_TIERS; t++)
        for (fr_req *r = e->qhead[t]; r; r = r->qnext) {
            l->waiting[t]++;
            l->backlog[t] += r->n_tok;
            int out_left = r->max_tokens - (r->n_tok - r->n_prompt);
            if (out_left > 0) l->queued_out[t] += out_left;
        }
}

static void refuse(fr_engine *e, fr_admission *adm, fr_admit v, int tier, bool locked) {
    adm->verdict = v;
    if (!locked) pthread_mutex_lock(&e->mu);
    e->st.rejected[tier][v]++;
    if (!locked) pthread_mutex_unlock(&e->mu);
}

/* The adapter of p against the backend and the model: FR_ADMIT_OK, or INVALID with adm->msg. */
static fr_admit check_lora(const fr_engine *e, const fr_req_params *p, fr_admission *adm) {
    if (!fr_backend_supports(e->be, FR_BOP_LORA)) {
        snprintf(adm->msg, sizeof adm->msg, "LoRA adapters are not applied on the %s backend",
                 fr_backend_name(e->be));
        return FR_ADMIT_INVALID;
    }
    if (p->lora->n_layer != e->m->hp.n_layer) {
        snprintf(adm->msg, sizeof adm->msg, "LoRA adapter %s has %d layers, the model %d",
                 p->lora->name, p->lora->n_layer, e->m->hp.n_layer);
        return FR_ADMIT_INVALID;
    }
    return FR_ADMIT_OK;
}

/* The image input of p checked against its prompt, the model and the backend: FR_ADMIT_OK, or
 * the verdict with adm->msg set (INVALID; TOO_LARGE when the positions, which a pruned prompt
 * keeps from before pruning, would run past the context: the rotary tables end there). */
static fr_admit check_images(const fr_engine *e, const fr_req_params *p, fr_admission *adm) {
    if (!e->takes_images) {
        snprintf(adm->msg, sizeof adm->msg, "image input needs a vision-language model with "
                 "M-RoPE on a backend that takes image features (%s does not)",
                 fr_backend_name(e->be));
        return FR_ADMIT_INVALID;
    }
    if (p->rope_pos) {
        int32_t lo = INT32_MAX, hi = INT32_MIN;
        for (int i = 0; i < 3 * p->n_prompt; i++) {
            lo = FR_MIN(lo, p->rope_pos[i]);
            hi = FR_MAX(hi, p->rope_pos[i]);
        }
        if (lo < 0) {
            snprintf(adm->msg, sizeof adm->msg, "negative M-RoPE position %d", (int)lo);
            return FR_ADMIT_INVALID;
        }
        if ((int64_t)hi + 1 + p->gen.max_tokens > e->cfg.max_ctx) {
            snprintf(adm->msg, sizeof adm->msg, "the prompt's positions (up to %d) plus max_tokens "
                     "(%d) exceed the context length (%d)", (int)hi, p->gen.max_tokens,
                     e->cfg.max_ctx);
            return FR_ADMIT_TOO_LARGE;
        }
    }
    if (!p->img_embd) return FR_ADMIT_OK;
    int n_img = 0;
    for (int i = 0; i < p->n_prompt; i++) n_img += p->prompt[i] == p->image_token_id;
    if (n_img != p->n_img_rows || p->n_img_rows < 1) {
        snprintf(adm->msg, sizeof adm->msg, "%d image feature rows for %d image tokens in the "
                 "prompt", p->n_img_rows, n_img);
        return FR_ADMIT_INVALID;
    }
    return FR_ADMIT_OK;
}

/* The image input of p copied into r (validated by check_images). */
static void copy_images(const fr_engine *e, fr_req *r, const fr_req_params *p) {
    int n = p->n_prompt;
    if (p->img_embd) {
        size_t bytes = sizeof(float) * (size_t)p->n_img_rows * (size_t)e->m->hp.n_embd;
        r->img_embd = fr_xmalloc(bytes);
        memcpy(r->img_embd, p->img_embd, bytes);
        r->img_row = fr_xmalloc(sizeof(int32_t) * (size_t)n);
        int32_t k = 0;
        for (int i = 0; i < n; i++) r->img_row[i] = p->prompt[i] == p->image_token_id ? k++ : -1;
        /* the prefix cache's view of an image: the content of each feature row */
        size_t row_bytes = sizeof(float) * (size_t)e->m->hp.n_embd;
        r->row_hash = fr_xmalloc(sizeof(uint64_t) * (size_t)p->n_img_rows);
        for (int i = 0; i < p->n_img_rows; i++)
            r->row_hash[i] = fr_kv_hash_bytes(r->img_embd + (size_t)i * e->m->hp.n_embd, row_bytes);
    }
    if (p->rope_pos) {
        r->rope_pos = fr_xmalloc(sizeof(int32_t) * 3 * (size_t)n);
        memcpy(r->rope_pos, p->rope_pos, sizeof(int32_t) * 3 * (size_t)n);
        int32_t max = -1;
        for (int i = 0; i < 3 * n; i++) max = FR_MAX(max, r->rope_pos[i]);
        r->rope_delta = max + 1 - (int32_t)n;
    }
}

fr_req *fr_engine_submit(fr_engine *e, const fr_req_params *p, fr_admission *adm) {
    fr_admission dummy;
    if (!adm) adm = &dummy;
    memset(adm, 0, sizeof *adm);
    adm->retry_after_s = 1;
    int tier = p->tier >= 0 && p->tier < FR_N_TIERS ? p->tier : FR_TIER_P1;
    int max_tokens = p->gen.max_tokens;
    if (p->n_prompt < 1 || !p->prompt || max_tokens < 1) {
        snprintf(adm->msg, sizeof adm->msg, "empty prompt or max_tokens < 1");
        refuse(e, adm, FR_ADMIT_TOO_LARGE, tier, false);
        return NULL;
    }
    int64_t total = (int64_t)p->n_prompt + max_tokens;
    if (total > e->cfg.max_ctx) {
        snprintf(adm->msg, sizeof adm->msg,
                 "prompt (%d tokens) plus max_tokens (%d) exceeds the context length (%d)",
                 p->n_prompt, max_tokens, e->cfg.max_ctx);
        refuse(e, adm, FR_ADMIT_TOO_LARGE, tier, false);
        return NULL;
    }
    int need = fr_kv_blocks_needed(e->kv, (int)total);
    if (need > e->kv->n_blocks) {
        snprintf(adm->msg, sizeof adm->msg,
                 "request needs %d KV blocks (%lld tokens), the pool has %d", need,
                 (long long)total, e->kv->n_blocks);
        refuse(e, adm, FR_ADMIT_TOO_LARGE, tier, false);
        return NULL;
    }

    fr_admit iv = p->img_embd || p->rope_pos ? check_images(e, p, adm) : FR_ADMIT_OK;
    if (iv == FR_ADMIT_OK && p->lora) iv = check_lora(e, p, adm);
    if (iv != FR_ADMIT_OK) {
        refuse(e, adm, iv, tier, false);
        return NULL;
    }

    fr_req *r = fr_xcalloc(1, sizeof *r);
    r->tier = tier;
    r->n_prompt = p->n_prompt;
    r->t_arrival = p->t_arrival > 0 ? p->t_arrival : fr_time_s();
    r->max_tokens = max_tokens;
    r->deadline = p->deadline;
    r->cap_tok = (int)total + 1;
    r->tokens = fr_xmalloc((size_t)r->cap_tok * sizeof(int32_t));
    memcpy(r->tokens, p->prompt, (size_t)p->n_prompt * sizeof(int32_t));
    r->n_tok = p->n_prompt;
    r->no_cache = p->no_prefix_cache || !e->cfg.prefix_cache;
    r->lora = p->lora ? fr_lora_ref(p->lora) : NULL;
    r->root = fr_kv_chain_root(!p->lora       ? p->cache_salt
                               : p->cache_salt ? fr_kv_hash_mix(p->cache_salt, p->lora->hash)
                                               : p->lora->hash);
    r->bkey = fr_xmalloc(sizeof(fr_kv_block_key) * (size_t)(r->cap_tok / e->kv->block_size + 1));
    copy_images(e, r, p);
    fr_gen_init(&r->gen, e->m, &p->gen);
    fr_sampler_init(&r->sampler, &p->sampling, e->n_vocab);
    r->sp = p->sampling;
    r->gen_live = true;
    atomic_init(&r->cancel, 0);
    atomic_init(&r->refs, 2); /* the caller's and the engine's */
    pthread_mutex_init(&r->mu, NULL);
    cond_init_mono(&r->cv);
    r->info.tier = tier;
    r->info.n_prompt = p->n_prompt;
    r->info.t_arrival = r->t_arrival;

    pthread_mutex_lock(&e->mu);
    fr_admit v = FR_ADMIT_OK;
    fr_sched_load load;
    gather_load(e, &load);
    double pred = fr_sched_predict_wait(&load, e->cfg.weight, tier);
    adm->predicted_wait_s = pred;
    double now = fr_time_s();
    if (e->closed || e->stop) {
        v = FR_ADMIT_CLOSED;
        snprintf(adm->msg, sizeof adm->msg, "the server is shutting down");
    } else if (e->n_wait[tier] >= e->cfg.queue_max[tier]) {
        v = FR_ADMIT_QUEUE_FULL;
        snprintf(adm->msg, sizeof adm->msg, "the %s queue is full (%d requests waiting)",
                 fr_tier_name(tier), e->n_wait[tier]);
        adm->retry_after_s = (int)fmin(3600, fmax(1, ceil(pred)));
    } else if (pred > e->cfg.max_wait_s[tier]) {
        v = FR_ADMIT_OVERLOAD;
        snprintf(adm->msg, sizeof adm->msg,
                 "server overloaded: predicted wait %.2f s exceeds the %s limit of %.2f s", pred,
                 fr_tier_name(tier), e->cfg.max_wait_s[tier]);
        adm->retry_after_s = (int)fmin(3600, fmax(1, ceil(pred - e->cfg.max_wait_s[tier])));
    } else if (p->deadline > 0 && now + pred > p->deadline) {
        v = FR_ADMIT_DEADLINE;
        snprintf(adm->msg, sizeof adm->msg,
                 "predicted wait %.2f s exceeds the request deadline (%.2f s left)", pred,
                 p->deadline - now);
        adm->retry_after_s = (int)fmin(3600, fmax(1, ceil(pred)));
    }
    if (v != FR_ADMIT_OK) {
        refuse(e, adm, v, tier, true);
        pthread_mutex_unlock(&e->mu);
        atomic_store(&r->refs, 1);
        fr_req_release(r);
        return NULL;
    }
    r->arrival = e->next_arrival++;
    q_insert(e, r);
    if (e->cfg.meter && p->meter) { /* accepted: the account is the engine's from here */
        r->mreq = p->meter;
        r->mq = fr_meter_stage_begin(e->cfg.meter, r->mreq, FR_MSTAGE_QUEUE, FR_METER_DEV_NONE);
    }
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return r;
}

/* ---- the step (engine lock held unless noted) ---- */

/* End cancelled and expired requests, queued or running. */
static void sweep(fr_engine *e, double now) {
    for (int i = 0; i < e->n_run; i++) {
        fr_req *r = e->run[i];
        int c = atomic_load(&r->cancel);
        if (c) req_end(e, r, (fr_end)c, NULL);
        else if (r->deadline > 0 && now > r->deadline) req_end(e, r, FR_END_DEADLINE, NULL);
    }
    run_compact(e);
    for (int t = 0; t < FR_N_TIERS; t++) {
        fr_req *next;
        for (fr_req *r = e->qhead[t]; r; r = next) {
            next = r->qnext;
            int c = atomic_load(&r->cancel);
            fr_end why = c ? (fr_end)c : FR_END_NONE;
            if (!c && r->deadline > 0 && now > r->deadline) why = FR_END_DEADLINE;
            if (why == FR_END_NONE) continue;
            q_remove(e, r);
            req_end(e, r, why, NULL);
            fr_req_release(r);
        }
    }
}

/* Blocks held by running requests with prio > tier (what a request of `tier` may reclaim). */
static int reclaimable(const fr_engine *e, int tier, int *n_victims) {
    int blocks = 0, n = 0;
    for (int i = 0; i < e->n_run; i++)
        if (e->run[i]->prio > tier) {
            blocks += fr_seq_sole_blocks(&e->run[i]->seq, e->kv); /* shared ones stay held */
            n++;
        }
    *n_victims = n;
    return blocks;
}

static fr_req *pick_victim(fr_engine *e, int above_tier) {
    for (int i = 0; i < e->n_run; i++) {
        e->cands[i].tier = e->run[i]->prio;
        e->cands[i].arrival = e->run[i]->arrival;
        e->cands[i].eligible = !e->run[i]->gone;
    }
    int v = fr_sched_victim(e->cands, e->n_run, above_tier);
    return v >= 0 ? e->run[v] : NULL;
}

/* ---- the prefix cache (engine lock held) ---- */

/* Keys r->bkey[n_bkey .. upto) (tokens of those blocks known). Block i's key covers block i-1's
 * hash, its token ids, and as `extra` what else decides its K/V: the content of the image rows
 * its positions take and M-RoPE positions that differ from the KV position. */
static void key_blocks(const fr_engine *e, fr_req *r, int upto) {
    const int bs = e->kv->block_size, n = r->n_prompt;
    for (; r->n_bkey < upto; r->n_bkey++) {
        int i = r->n_bkey;
        uint64_t x = 0;
        bool any = false;
        for (int j = 0; j < bs; j++) {
            int pos = i * bs + j;
            bool in_prompt = pos < n;
            if (r->img_row && in_prompt && r->img_row[pos] >= 0) {
                x = fr_kv_hash_mix(fr_kv_hash_mix(x, (uint64_t)j << 8 | 1),
                                   r->row_hash[r->img_row[pos]]);
                any = true;
            }
            if (r->rope_pos) {
                int32_t t = in_prompt ? r->rope_pos[pos] : pos + r->rope_delta;
                int32_t h = in_prompt ? r->rope_pos[n + pos] : t;
                int32_t w = in_prompt ? r->rope_pos[2 * n + pos] : t;
                if (t != pos || h != pos || w != pos) {
                    x = fr_kv_hash_mix(fr_kv_hash_mix(x, (uint64_t)j << 8 | 2),
                                       (uint64_t)(uint32_t)t | (uint64_t)(uint32_t)h << 32);
                    x = fr_kv_hash_mix(x, (uint64_t)(uint32_t)w);
                    any = true;
                }
            }
        }
        fr_kv_block_key *k = &r->bkey[i];
        k->parent = i == 0 ? r->root : r->bkey[i - 1].hash;
        k->extra = any ? x | 1 : 0;
        k->hash = fr_kv_block_hash(k->parent, r->tokens + (size_t)i * bs, bs, k->extra);
    }
}

/* The cached leading blocks of r into e->hit_ids; returns their count. The last known token is
 * always computed (its logits are needed), so only the full blocks before it are looked up. */
static int cache_lookup(fr_engine *e, fr_req *r) {
    if (!fr_kv_prefix_on(e->kv) || r->no_cache) return 0;
    int max = (r->n_tok - 1) / e->kv->block_size;
    key_blocks(e, r, max);
    return fr_kv_prefix_match(e->kv, r->bkey, r->tokens, max, e->hit_ids);
}

/* Blocks a reservation could take once the n hits in e->hit_ids are shared. */
static int avail_after(const fr_engine *e, int n_hit) {
    return fr_kv_pool_available(e->kv) - fr_kv_prefix_unheld(e->kv, e->hit_ids, n_hit);
}

/* Publish the blocks of r the last step filled (after the forward wrote them). */
static void publish_blocks(fr_engine *e, fr_req *r) {
    if (!fr_kv_prefix_on(e->kv) || r->no_cache) return;
    const int bs = e->kv->block_size;
    int full = r->seq.n_pos / bs;
    if (full <= r->n_pub) return;
    key_blocks(e, r, full);
    for (int i = r->n_pub; i < full; i++)
        fr_kv_prefix_publish(e->kv, &r->seq, i, &r->bkey[i], r->tokens + (size_t)i * bs);
    r->n_pub = full;
}

/* Move queued requests into the running batch, best (effective tier, arrival) first. */
static void admit(fr_engine *e, double now) {
    bool blocked[FR_N_TIERS] = {false, false, false};
    for (int guard = 0; guard < 4 * (e->cfg.max_running + 8); guard++) {
        fr_req *c = NULL;
        int c_eff = FR_N_TIERS;
        for (int t = 0; t < FR_N_TIERS; t++) {
            fr_req *h = e->qhead[t];
            if (!h || blocked[t]) continue;
            int eff = fr_sched_effective_tier(t, now - h->t_arrival, e->cfg.aging_s);
            if (!c || eff < c_eff || (eff == c_eff && h->arrival < c->arrival)) {
                c = h;
                c_eff = eff;
            }
        }
        if (!c) return;
        int n_hit = cache_lookup(e, c); /* shared, not needed */
        int need = fr_kv_blocks_needed(e->kv, c->n_tok) - n_hit;
        int wm = e->n_run > 0 ? e->watermark : 0;
        bool need_slot = e->n_run >= e->cfg.max_running;
        if (need_slot || avail_after(e, n_hit) < need + wm) {
            /* Only strictly lower tiers may be preempted to make room, and only if enough. */
            int n_vict = 0, rec = reclaimable(e, c->tier, &n_vict);
            if ((need_slot && n_vict == 0) || avail_after(e, n_hit) + rec < need) {
                blocked[c->tier] = true;
                continue;
            }
            while (e->n_run >= e->cfg.max_running || avail_after(e, n_hit) < need + wm) {
                fr_req *v = pick_victim(e, c->tier);
                if (!v) break;
                preempt(e, v);
                run_compact(e);
                wm = e->n_run > 0 ? e->watermark : 0;
            }
            if (e->n_run >= e->cfg.max_running || avail_after(e, n_hit) < need) {
                blocked[c->tier] = true;
                continue;
            }
        }
        q_remove(e, c);
        if (n_hit > 0) fr_seq_share(&c->seq, e->kv, e->hit_ids, n_hit);
        if (fr_seq_reserve(&c->seq, e->kv, c->n_tok) != 0) {
            fr_seq_release(&c->seq, e->kv); /* cannot happen: available blocks were checked */
            q_insert(e, c);
            blocked[c->tier] = true;
            continue;
        }
        c->state = R_RUNNING;
        c->gone = false;
        if (c->mq) {
            fr_meter_step_end(e->cfg.meter, c->mq);
            c->mq = NULL;
        }
        c->prio = c_eff < c->tier ? c_eff : c->tier;
        c->n_done = c->seq.n_pos; /* the shared prefix, or 0 */
        c->n_pub = n_hit;
        e->run[e->n_run++] = c;
        if (!c->admitted_once) {
            c->admitted_once = true;
            e->st.prompt_tokens[c->tier] += (uint64_t)c->n_prompt;
            if (fr_kv_prefix_on(e->kv) && !c->no_cache) {
                e->st.prefix_queries += (uint64_t)c->n_prompt;
                e->st.prefix_hits += (uint64_t)c->n_done;
            }
            pthread_mutex_lock(&c->mu);
            c->info.t_admit = now;
            c->info.n_cached = c->n_done;
            pthread_mutex_unlock(&c->mu);
        }
    }
}

static int run_cmp(const void *a, const void *b) {
    const fr_req *x = *(fr_req *const *)a, *y = *(fr_req *const *)b;
    if (x->prio != y->prio) return x->prio - y->prio;
    return x->arrival < y->arrival ? -1 : x->arrival > y->arrival;
}

/* Plan the step, reserve blocks (preempting when the pool runs dry) and fill the batch arrays.
 * Returns the number of batch tokens; *n_logits gets the logits rows, *any_mm whether a request
 * of the batch has image input (then b_embd / b_use / b_rope hold the whole batch's rows). */
static int build_step(fr_engine *e, int *n_logits, int *n_batch_req, bool *any_mm) {
    *n_logits = 0;
    *n_batch_req = 0;
    if (e->n_run == 0) return 0;
    qsort(e->run, (size_t)e->n_run, sizeof *e->run, run_cmp);
    for (int i = 0; i < e->n_run; i++) {
        e->items[i].tier = e->run[i]->tier;
        e->items[i].remaining = e->run[i]->n_tok - e->run[i]->n_done;
        e->run[i]->gone = false;
    }
    fr_sched_plan(&e->fair, e->items, e->n_run, e->cfg.step_tokens, e->cfg.prefill_chunk);
    for (int i = 0; i < e->n_run; i++) e->run[i]->take = e->items[i].take;

    for (int i = 0; i < e->n_run; i++) {
        fr_req *r = e->run[i];
        if (r->gone || r->take == 0) continue;
        while (fr_seq_reserve(&r->seq, e->kv, r->n_done + r->take) != 0) {
            int j = e->n_run - 1;
            while (j > i && e->run[j]->gone) j--;
            if (j > i) {
                preempt(e, e->run[j]);
            } else {
                preempt(e, r);
                break;
            }
        }
    }
    int nb = 0;
    *any_mm = false;
    for (int i = 0; i < e->n_run; i++) {
        fr_req *r = e->run[i];
        if (r->gone || r->take == 0) continue;
        e->batch_req[(*n_batch_req)++] = r;
        *any_mm |= r->img_embd || r->rope_pos;
    }
    const int st = e->cfg.step_tokens;
    for (int k = 0; k < *n_batch_req; k++) {
        fr_req *r = e->batch_req[k];
        for (int j = 0; j < r->take; j++) {
            int pos = r->n_done + j;
            e->b_tok[nb] = r->tokens[pos];
            e->b_pos[nb] = pos;
            if (*any_mm) { /* rows at stride step_tokens, packed below */
                bool in_prompt = pos < r->n_prompt;
                int32_t row = r->img_row && in_prompt ? r->img_row[pos] : -1;
                e->b_use[nb] = row >= 0;
                if (row >= 0)
                    memcpy(e->b_embd + (size_t)nb * e->m->hp.n_embd,
                           r->img_embd + (size_t)row * e->m->hp.n_embd,
                           sizeof(float) * (size_t)e->m->hp.n_embd);
                for (int q = 0; q < 3; q++)
                    e->b_rope[q * st + nb] = !r->rope_pos ? pos
                                             : in_prompt ? r->rope_pos[q * r->n_prompt + pos]
                                                         : pos + r->rope_delta;
            }
            e->b_seq[nb] = &r->seq;
            e->b_lora[nb] = r->lora;
            e->b_logit[nb] = pos == r->n_tok - 1;
            if (e->b_logit[nb]) {
                if (e->dev_sample) {
                    e->row_sp[*n_logits] = r->sp;
                    e->row_ctr[*n_logits] = (uint64_t)(r->n_tok - r->n_prompt);
                }
                e->logit_req[(*n_logits)++] = r;
            }
            nb++;
        }
    }
    if (*any_mm && nb < st) { /* (3, st) -> (3, nb) */
        memmove(e->b_rope + nb, e->b_rope + st, sizeof(int32_t) * (size_t)nb);
        memmove(e->b_rope + 2 * nb, e->b_rope + 2 * st, sizeof(int32_t) * (size_t)nb);
    }
    run_compact(e);
    return nb;
}

/* Sample the next token of every request that produced logits, release text, end finished. */
static void deliver(fr_engine *e, int n_logits, int n_batch_req) {
    for (int k = 0; k < n_batch_req; k++) {
        e->batch_req[k]->n_done = e->batch_req[k]->seq.n_pos;
        publish_blocks(e, e->batch_req[k]);
    }
    double now = fr_time_s();
    for (int k = 0; k < n_logits; k++) {
        fr_req *r = e->logit_req[k];
        int id = e->dev_sample ? e->row_id[k]
                               : fr_sample(&r->sampler, e->logits + (size_t)k * (size_t)e->n_vocab);
        if (r->n_tok < r->cap_tok) r->tokens[r->n_tok++] = id;
        e->delta.len = 0;
        fr_finish f = fr_gen_push(&r->gen, id, &e->delta);
        e->st.gen_tokens[r->tier]++;
        pthread_mutex_lock(&r->mu);
        if (e->delta.len) fr_buf_append(&r->out, e->delta.data, e->delta.len);
        r->info.n_generated = r->gen.n_generated;
        if (r->info.t_first == 0) r->info.t_first = now;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        if (f == FR_FINISH_STOP) req_end(e, r, FR_END_STOP, NULL);
        else if (f == FR_FINISH_LENGTH || r->n_tok >= r->cap_tok || r->n_tok >= e->cfg.max_ctx)
            req_end(e, r, FR_END_LENGTH, NULL);
    }
    run_compact(e);
}

static void fail_batch(fr_engine *e, int n_batch_req, const char *msg) {
    for (int k = 0; k < n_batch_req; k++) req_end(e, e->batch_req[k], FR_END_ERROR, msg);
    run_compact(e);
}

static void end_everything(fr_engine *e, fr_end why) {
    for (int i = 0; i < e->n_run; i++) req_end(e, e->run[i], why, NULL);
    run_compact(e);
    for (int t = 0; t < FR_N_TIERS; t++)
        while (e->qhead[t]) {
            fr_req *r = e->qhead[t];
            q_remove(e, r);
            req_end(e, r, why, NULL);
            fr_req_release(r);
        }
}

static void *engine_main(void *arg) {
    fr_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    while (!e->stop) {
        if (e->n_run == 0 && waiting_total(e) == 0) {
            pthread_cond_wait(&e->cv, &e->mu);
            continue;
        }
        double now = fr_time_s();
        sweep(e, now);
        admit(e, now);
        int n_logits = 0, n_breq = 0;
        bool any_mm = false;
        int nb = build_step(e, &n_logits, &n_breq, &any_mm);
        if (nb == 0) {
            /* Work exists but none can run (e.g. waiting for blocks): nap, then look again. */
            if (waiting_total(e) > 0) {
                struct timespec ts;
                abs_deadline(&ts, 0.005);
                pthread_cond_timedwait(&e->cv, &e->mu, &ts);
            }
            continue;
        }
        bool any_lora = false;
        for (int k = 0; k < n_breq && !any_lora; k++) any_lora = e->batch_req[k]->lora != NULL;
        fr_batch b = {.n_tokens = nb, .tokens = e->b_tok, .pos = e->b_pos,
                      .seqs = (fr_seq *const *)e->b_seq, .logits = e->b_logit,
                      .embd = any_mm ? e->b_embd : NULL, .embd_use = any_mm ? e->b_use : NULL,
                      .rope_pos = any_mm ? e->b_rope : NULL,
                      .lora = any_lora ? (const struct fr_lora *const *)e->b_lora : NULL};
        fr_meter_step *ms = NULL;
        if (e->cfg.meter) {
            int ns = 0;
            for (int k = 0; k < n_breq; k++) {
                fr_req *r = e->batch_req[k];
                if (!r->mreq) continue;
                /* a step whose take spans the end of the prompt counts as prefill; a preempted
                 * request's recomputation is charged again (that energy was spent) */
                e->shares[ns++] = (fr_meter_share){
                    r->mreq, (double)r->take,
                    r->n_done < r->n_prompt ? FR_MSTAGE_PREFILL : FR_MSTAGE_DECODE};
            }
            ms = fr_meter_step_begin(e->cfg.meter, e->meter_dev, e->shares, ns);
        }
        pthread_mutex_unlock(&e->mu);
        fr_err err = {0};
        double t0 = fr_time_s();
        int rc = e->dev_sample ? fr_backend_forward_sample(e->be, &b, e->row_sp, n_logits,
                                                           e->row_ctr, e->row_id, &err)
                               : fr_backend_forward(e->be, &b, e->logits, &err);
        double dt = fr_time_s() - t0;
        pthread_mutex_lock(&e->mu);
        if (ms) fr_meter_step_end(e->cfg.meter, ms);
        e->st.steps++;
        e->st.step_tokens += (uint64_t)nb;
        e->st.step_seconds += dt;
        e->st.ewma_step_s = e->st.ewma_step_s > 0 ? 0.8 * e->st.ewma_step_s + 0.2 * dt : dt;
        if (nb >= e->cfg.step_tokens / 2 && nb >= 8) {
            double per = dt / nb;
            e->st.ewma_token_s = e->st.ewma_token_s > 0 ? 0.8 * e->st.ewma_token_s + 0.2 * per
                                                        : per;
        }
        if (rc != 0) {
            fr_log(FR_LOG_ERROR, "engine: forward failed: %s", err.msg);
            fail_batch(e, n_breq, err.msg);
            continue;
        }
        deliver(e, n_logits, n_breq);
    }
    end_everything(e, FR_END_SHUTDOWN);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ---- setup ---- */

/* Bytes of one 16-token f32 block (the CPU backend's block): the smallest pool it accepts. */
static size_t block16_bytes(const fr_hparams *hp) {
    return 2 * (size_t)hp->n_layer * 16 * (size_t)hp->n_head_kv * (size_t)hp->head_dim *
           sizeof(float);
}

/* Time a one-token step and a full prefill step on scratch sequences (calibrates the wait
 * prediction before the first request). */
static void warmup(fr_engine *e) {
    int n = FR_MIN(e->cfg.step_tokens, e->cfg.max_ctx);
    n = FR_MIN(n, e->kv->n_blocks * e->kv->block_size);
    if (n < 1) return;
    fr_seq s;
    memset(&s, 0, sizeof s);
    if (fr_seq_reserve(&s, e->kv, n) != 0) return;
    int32_t tok0 = 0;
    for (int i = 0; i < n; i++) {
        e->b_tok[i] = tok0;
        e->b_pos[i] = i;
        e->b_seq[i] = &s;
        e->b_logit[i] = i == n - 1;
    }
    fr_err err = {0};
    fr_batch one = {.n_tokens = 1, .tokens = e->b_tok, .pos = e->b_pos,
                    .seqs = (fr_seq *const *)e->b_seq, .logits = e->b_logit};
    uint8_t keep = e->b_logit[0];
    e->b_logit[0] = 1;
    double t0 = fr_time_s();
    int rc = fr_backend_forward(e->be, &one, e->logits, &err);
    double t_one = fr_time_s() - t0;
    e->b_logit[0] = keep;
    if (rc == 0 && n > 1) {
        fr_batch rest = {.n_tokens = n - 1, .tokens = e->b_tok + 1, .pos = e->b_pos + 1,
                         .seqs = (fr_seq *const *)e->b_seq + 1, .logits = e->b_logit + 1};
        t0 = fr_time_s();
        rc = fr_backend_forward(e->be, &rest, e->logits, &err);
        double t_full = fr_time_s() - t0;
        if (rc == 0) e->st.ewma_token_s = t_full / (n - 1);
    }
    if (rc == 0) e->st.ewma_step_s = t_one;
    else fr_warn("engine: warmup step failed: %s", err.msg);
    fr_seq_release(&s, e->kv);
    free(s.blocks);
}

fr_engine *fr_engine_new(const fr_model *m, const fr_engine_config *cfg_in, fr_err *err) {
    fr_engine_config c = cfg_in ? *cfg_in : fr_engine_config_default();
    const fr_hparams *hp = &m->hp;
    if (c.block_size < 1 || c.block_size > 1024) {
        fr_err_set(err, "block_size must be in 1..1024 (got %d)", c.block_size);
        return NULL;
    }
    if (c.step_tokens < 1 || c.max_running < 1 || c.prefill_chunk < 1) {
        fr_err_set(err, "step_tokens, prefill_chunk and max_running must be >= 1");
        return NULL;
    }
    if (c.prefill_chunk > c.step_tokens) c.prefill_chunk = c.step_tokens;
    if (c.max_running > c.step_tokens) c.max_running = c.step_tokens;
    for (int t = 0; t < FR_N_TIERS; t++) {
        if (!(c.weight[t] > 0)) {
            fr_err_set(err, "tier %s weight must be > 0", fr_tier_name(t));
            return NULL;
        }
        if (c.queue_max[t] < 0) c.queue_max[t] = 0;
    }
    int ctx_model = hp->n_ctx_train > 0 ? hp->n_ctx_train : 4096;
    if (c.max_ctx <= 0 || c.max_ctx > ctx_model) c.max_ctx = ctx_model;
    fr_backend_kind kind;
    int dev_index;
    if (fr_backend_parse_device(c.device, &kind, &dev_index, err)) return NULL;
    if (kind == FR_BACKEND_CUDA && !fr_backend_cuda_linked()) {
        fr_err_set(err, "device '%s': built without CUDA: rebuild with make cuda "
                   "(build-cuda/frugal-cuda)", c.device);
        return NULL;
    }
    if (kind == FR_BACKEND_CUDA && c.block_size != 16) {
        fr_err_set(err, "the CUDA backend uses 16-token KV blocks (block_size is %d)",
                   c.block_size);
        return NULL;
    }
    int n_blocks = c.kv_blocks > 0 ? c.kv_blocks
                                   : fr_kv_pool_blocks_for_bytes(hp, c.block_size, c.kv_bytes);
    /* More blocks than max_running full-context sequences can hold would never be used, unless
     * the prefix cache keeps them (then the whole budget is the cache's). */
    int useful = c.max_running * ((c.max_ctx + c.block_size - 1) / c.block_size);
    if (c.kv_blocks <= 0 && n_blocks > useful && !c.prefix_cache) n_blocks = useful;
    if (kind == FR_BACKEND_CPU && n_blocks < 2) {
        fr_err_set(err, "the KV memory budget holds %d blocks; need at least 2", n_blocks);
        return NULL;
    }

    fr_backend_params bp = fr_backend_params_default();
    bp.device = c.device ? c.device : "cpu";
    bp.weights = c.weights;
    bp.kv = c.kv_type;
    bp.kv_fraction = c.kv_fraction > 0 ? c.kv_fraction : 0.9f;
    bp.max_tokens = c.step_tokens;
    bp.max_seqs = c.max_running;
    bp.max_ctx = c.max_ctx;
    /* CPU: a one-block pool, replaced below by the engine's (its block size and count) */
    bp.kv_bytes = kind == FR_BACKEND_CPU ? 2 * block16_bytes(hp) : 0;
    /* The CPU row only changes the model when `weights` asks it to quantise; the engine never
     * writes to it otherwise (CUDA copies the weights to the device). */
    fr_backend *be = fr_backend_new((fr_model *)(uintptr_t)m, &bp, err);
    if (!be) return NULL;
    if (kind == FR_BACKEND_CPU) {
        fr_kv_pool *own = fr_kv_pool_new(hp, n_blocks, c.block_size);
        if (!own) {
            fr_err_set(err, "cannot allocate the KV pool (%d blocks of %d tokens)", n_blocks,
                       c.block_size);
            fr_backend_free(be);
            return NULL;
        }
        fr_kv_pool_free(be->kv);
        be->kv = own;
    } else {
        n_blocks = fr_backend_kv(be)->n_blocks;
        if (n_blocks < 2) {
            fr_err_set(err, "the device KV pool holds %d blocks; need at least 2", n_blocks);
            fr_backend_free(be);
            return NULL;
        }
    }
    c.kv_blocks = n_blocks;

    fr_engine *e = fr_xcalloc(1, sizeof *e);
    e->m = m;
    e->cfg = c;
    e->n_vocab = hp->n_vocab;
    e->be = be;
    e->kv = fr_backend_kv(be);
    e->hit_ids = fr_xmalloc(sizeof(int) * (size_t)(c.max_ctx / c.block_size + 2));
    e->dev_sample = fr_backend_supports(be, FR_BOP_DEVICE_SAMPLING);
    e->meter_dev = c.meter_device != FR_ENGINE_METER_DEV_AUTO ? c.meter_device
                   : kind == FR_BACKEND_CUDA                 ? fr_meter_dev_gpu(dev_index)
                                                             : FR_METER_DEV_CPU;
    e->watermark = FR_MAX(1, n_blocks / 100);
    size_t st = (size_t)c.step_tokens, mr = (size_t)c.max_running;
    e->b_tok = fr_xmalloc(st * sizeof(int32_t));
    e->b_pos = fr_xmalloc(st * sizeof(int32_t));
    e->b_seq = fr_xmalloc(st * sizeof(fr_seq *));
    e->b_lora = fr_xcalloc(st, sizeof *e->b_lora);
    e->b_logit = fr_xmalloc(st);
    e->logits = malloc(mr * (size_t)e->n_vocab * sizeof(float));
    if (!e->logits) {
        fr_err_set(err, "cannot allocate logits for %d sequences", c.max_running);
        fr_backend_free(e->be);
        free(e->b_tok), free(e->b_pos), free(e->b_seq), free(e->b_lora), free(e->b_logit), free(e);
        return NULL;
    }
    e->logit_req = fr_xmalloc(mr * sizeof(fr_req *));
    e->batch_req = fr_xmalloc(mr * sizeof(fr_req *));
    e->items = fr_xmalloc(mr * sizeof(fr_sched_item));
    e->cands = fr_xmalloc(mr * sizeof(fr_sched_cand));
    e->run = fr_xmalloc(mr * sizeof(fr_req *));
    e->row_sp = fr_xcalloc(mr, sizeof(fr_sampling));
    e->row_ctr = fr_xcalloc(mr, sizeof(uint64_t));
    e->row_id = fr_xcalloc(mr, sizeof(int32_t));
    e->shares = fr_xcalloc(mr, sizeof(fr_meter_share));
    const int *ms = hp->mrope_section;
    e->takes_images = m->vision && hp->image_token_id >= 0 && (ms[0] || ms[1] || ms[2]) &&
                      fr_backend_supports(be, FR_BOP_EMBD_INPUT) &&
                      fr_backend_supports(be, FR_BOP_MROPE);
    if (e->takes_images) {
        e->b_embd = fr_xmalloc(st * (size_t)hp->n_embd * sizeof(float));
        e->b_use = fr_xmalloc(st);
        e->b_rope = fr_xmalloc(3 * st * sizeof(int32_t));
    }
    fr_sched_fair_init(&e->fair, c.weight);
    e->st.kv_blocks_total = n_blocks;
    e->st.block_size = c.block_size;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (c.warmup) warmup(e);
    if (c.prefix_cache && fr_kv_prefix_enable(e->kv) != 0) {
        fr_err_set(err, "cannot allocate the prefix cache's tables (%d blocks)", n_blocks);
        fr_engine_free(e);
        return NULL;
    }
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        fr_err_set(err, "cannot start the engine thread");
        e->thread_started = false;
        fr_engine_free(e);
        return NULL;
    }
    e->thread_started = true;
    e->st.alive = true;
    return e;
}

void fr_engine_free(fr_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    e->closed = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (e->thread_started) pthread_join(e->thread, NULL);
    else end_everything(e, FR_END_SHUTDOWN);
    fr_kv_prefix_disable(e->kv); /* every sequence is released; the CUDA pool does not free it */
    fr_backend_free(e->be); /* frees the pool too */
    free(e->b_tok), free(e->b_pos), free(e->b_seq), free(e->b_lora), free(e->b_logit), free(e->logits);
    free(e->logit_req), free(e->batch_req), free(e->items), free(e->cands), free(e->run);
    free(e->row_sp), free(e->row_ctr), free(e->row_id), free(e->shares);
    free(e->b_embd), free(e->b_use), free(e->b_rope), free(e->hit_ids);
    fr_buf_free(&e->delta);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

const fr_engine_config *fr_engine_cfg(const fr_engine *e) { return &e->cfg; }
const char *fr_engine_backend_name(const fr_engine *e) { return fr_backend_name(e->be); }
int fr_engine_max_ctx(const fr_engine *e) { return e->cfg.max_ctx; }
bool fr_engine_takes_images(const fr_engine *e) { return e->takes_images; }

void fr_engine_close(fr_engine *e) {
    pthread_mutex_lock(&e->mu);
    e->closed = true;
    pthread_mutex_unlock(&e->mu);
}

void fr_engine_cancel_all(fr_engine *e, fr_end reason) {
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->n_run; i++) fr_req_cancel(e->run[i], reason);
    for (int t = 0; t < FR_N_TIERS; t++)
        for (fr_req *r = e->qhead[t]; r; r = r->qnext) fr_req_cancel(r, reason);
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

int fr_engine_in_flight(fr_engine *e) {
    pthread_mutex_lock(&e->mu);
    int n = e->n_run + waiting_total(e);
    pthread_mutex_unlock(&e->mu);
    return n;
}

/* Appends name to the comma-separated list b unless it is there. */
static void name_once(fr_buf *b, const char *name) {
    const char *l = b->data ? b->data : "";
    const size_t n = strlen(name);
    for (const char *p = l; (p = strstr(p, name)); p += n)
        if ((p == l || p[-1] == ',') && (p[n] == ',' || !p[n])) return;
    if (b->len) fr_buf_puts(b, ",");
    fr_buf_puts(b, name);
}

void fr_engine_lora_in_use(fr_engine *e, fr_buf *running, fr_buf *waiting) {
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->n_run; i++)
        if (e->run[i]->lora) name_once(running, e->run[i]->lora->name);
    for (int t = 0; t < FR_N_TIERS; t++)
        for (const fr_req *r = e->qhead[t]; r; r = r->qnext)
            if (r->lora) name_once(waiting, r->lora->name);
    pthread_mutex_unlock(&e->mu);
}

void fr_engine_stats_get(fr_engine *e, fr_engine_stats *s) {
    pthread_mutex_lock(&e->mu);
    *s = e->st;
    memset(s->running, 0, sizeof s->running);
    for (int i = 0; i < e->n_run; i++) s->running[e->run[i]->tier]++;
    for (int t = 0; t < FR_N_TIERS; t++) s->waiting[t] = e->n_wait[t];
    s->kv_blocks_total = e->kv->n_blocks;
    s->kv_blocks_used = e->kv->n_blocks - fr_kv_pool_available(e->kv);
    fr_kv_prefix_stats ps;
    fr_kv_prefix_stats_get(e->kv, &ps);
    s->prefix_cache = fr_kv_prefix_on(e->kv);
    s->kv_blocks_cached = ps.cached;
    s->kv_blocks_evictable = ps.evictable;
    s->prefix_evictions = ps.evictions;
    s->alive = e->thread_started && !e->stop;
    pthread_mutex_unlock(&e->mu);
}

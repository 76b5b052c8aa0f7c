/* engine.h — the serving engine: one thread per model that runs decoder steps over a continuously
 * changing batch of requests, with a paged KV cache, chunked prefill, SLO tiers, admission control
 * and preemption.
 *
 * Life of a request:
 *   1. A front end (the HTTP layer, a test) tokenizes the prompt and calls fr_engine_submit. The
 *      admission decision is made right there under the engine lock: the request is queued in its
 *      tier, or refused at once (queue full, predicted wait beyond the tier's limit or the
 *      request's deadline, too large, engine closed) with a suggested Retry-After.
 *   2. The engine thread admits queued requests into the running batch in priority order (with
 *      aging) when a slot and enough free KV blocks for the whole prompt exist, preempting
 *      running requests of strictly lower tiers if that makes room.
 *   3. Every step, the step's token budget is split across tiers by weight (sched.h); each running
 *      sequence gets one decode token or a prefill chunk. When a sequence needs a new KV block and
 *      none is free, the lowest-tier, newest running request is preempted: its blocks are freed
 *      and it goes back to the queue to be recomputed later (prompt + tokens generated so far);
 *      nothing already sent to the client changes, and no request is ever dropped.
 *   4. Sampled tokens go through fr_gen (stop strings, EOS, max tokens); released text is
 *      appended to the request's channel and the waiting front end is woken (fr_req_wait).
 *   5. A front end cancels with fr_req_cancel (client gone); a request whose deadline passes is
 *      ended with FR_END_DEADLINE. Both free the blocks at the next step.
 * Every submitted request ends exactly once with an fr_end reason visible through fr_req_wait.
 *
 * Prefix caching (cfg.prefix_cache, on by default; backend/kv.h): a request's full prompt blocks
 * that another request already computed (same token ids from position 0, same image rows, same
 * M-RoPE positions) are taken from the pool read-only at admission instead of being prefilled;
 * every full block a request computes (prompt or generated) is published when its step ends.
 * At least the prompt's last token is always computed (it gives the first logits), so a hit
 * covers at most the full blocks before it. The decoder's results do not depend on how a
 * sequence's positions were split across steps (backend/cpu/decoder.h), so on the CPU the output
 * is bit-identical with and without the cache; CUDA reads the same block tables. A preempted
 * request finds its own published blocks again unless they were evicted meanwhile.
 *
 * Threads: fr_engine_submit, fr_req_* and fr_engine_stats may be called from any thread. The
 * engine thread alone touches the backend, the KV pool and the sequences.
 *
 * Backend: the forward pass runs through backend/backend.h on the device the configuration names
 * ("cpu", the default, or "cuda[:N]"). On the CPU the engine's own block size and pool size are
 * kept exactly (the backend's decoder, the engine's pool), so behaviour is the decoder's. On CUDA
 * the block size is 16, the pool is sized by the backend (kv_fraction of the free memory) and
 * sampling runs on the device when the backend offers it (draws numbered by tokens generated).
 *
 * Metering (meter/meter.h, docs/METERING.md): with cfg.meter set, every step is one meter step on
 * the engine's device with one share per request (tokens processed; prefill or decode), and a
 * request submitted with params.meter has a time-only "queue" step while it waits. A request the
 * engine accepts owns that account from then on: the engine closes it exactly once when the
 * request ends (fr_meter_request_end with the status and HTTP code its end reason maps to) and
 * publishes the provisional joules / dollars in fr_req_info. A refused submission leaves the
 * account with the caller.
 */
#ifndef FRUGAL_ENGINE_H
#define FRUGAL_ENGINE_H

#include "backend/sampler.h"
#include "base/base.h"
#include "engine/gen.h"
#include "engine/sched.h"
#include "model/model.h"

struct fr_meter;
struct fr_meter_req;

#define FR_ENGINE_METER_DEV_AUTO (-2) /* meter device from the backend: cpu or GPU N */

typedef struct fr_engine_config {
    int block_size;                 /* tokens per KV block (16) */
    size_t kv_bytes;                /* memory budget of the KV pool (without the prefix cache
                                       capped at what max_running sequences of max_ctx tokens
                                       can use; with it the rest holds cached blocks) */
    int kv_blocks;                  /* > 0: exact number of blocks (overrides kv_bytes) */
    int step_tokens;                /* token budget of one step (decoder batch capacity) */
    int prefill_chunk;              /* most prompt tokens one sequence processes per step */
    int max_running;                /* sequences in the running batch at most */
    int max_ctx;                    /* longest sequence (prompt + output); 0 = the model's */
    double weight[FR_N_TIERS];      /* step-capacity weights of the tiers (70/20/10) */
    int queue_max[FR_N_TIERS];      /* queued requests per tier before refusing */
    double max_wait_s[FR_N_TIERS];  /* refuse when the predicted wait exceeds this */
    double aging_s;                 /* a queued request rises a tier per aging_s waited (0 off) */
    bool warmup;                    /* time a full step at start to calibrate the prediction */
    /* backend (backend/backend.h); the strings are borrowed and must outlive fr_engine_new */
    const char *device;             /* NULL/"cpu" (default), "cuda", "cuda:N" */
    const char *weights;            /* CUDA: NULL/"bf16", "int8", "int4"; CPU: NULL (quantise the
                                       model on load instead: the CPU row changes the model) */
    const char *kv_type;            /* NULL/"bf16" (CPU: f32), "int8" (CUDA only) */
    float kv_fraction;              /* CUDA: share of free device memory for the KV pool (0.9) */
    /* metering (NULL: off); the meter must outlive the engine */
    struct fr_meter *meter;
    int meter_device;               /* meter device of the steps; FR_ENGINE_METER_DEV_AUTO */
    bool prefix_cache;              /* share computed prompt blocks across requests (true) */
} fr_engine_config;

fr_engine_config fr_engine_config_default(void);

/* Why a request ended. */
typedef enum fr_end {
    FR_END_NONE = 0,  /* still running */
    FR_END_STOP,      /* EOS or a stop string */
    FR_END_LENGTH,    /* max_tokens (or the context) reached */
    FR_END_CANCELLED, /* the front end cancelled (client disconnected) */
    FR_END_DEADLINE,  /* the request's deadline passed */
    FR_END_SHUTDOWN,  /* the server shut down before it finished */
    FR_END_ERROR,     /* internal failure (message in fr_req_info.error) */
} fr_end;
const char *fr_end_name(fr_end e);

/* Admission verdicts. */
typedef enum fr_admit {
    FR_ADMIT_OK = 0,
    FR_ADMIT_QUEUE_FULL, /* the tier's queue is at its bound */
    FR_ADMIT_OVERLOAD,   /* predicted wait exceeds the tier's limit */
    FR_ADMIT_DEADLINE,   /* predicted wait exceeds the request's own deadline */
    FR_ADMIT_TOO_LARGE,  /* can never fit (context or KV pool) */
    FR_ADMIT_CLOSED,     /* the engine no longer accepts work (shutting down) */
    FR_ADMIT_INVALID,    /* image input that does not fit the prompt, the model or the backend */
    FR_ADMIT_COUNT
} fr_admit;
const char *fr_admit_name(fr_admit a);

typedef struct fr_admission {
    fr_admit verdict;
    double predicted_wait_s; /* the prediction the decision used */
    int retry_after_s;       /* suggestion for a refused request (>= 1) */
    char msg[256];           /* one-line reason for a refusal */
} fr_admission;

typedef struct fr_req_params {
    const int32_t *prompt;   /* prompt token ids (copied) */
    int n_prompt;            /* >= 1 */
    fr_gen_params gen;       /* max_tokens, stop strings, ... */
    fr_sampling sampling;    /* temperature 0 = greedy */
    int tier;                /* FR_TIER_P0..P2 */
    double t_arrival;        /* fr_time_s() when the request arrived (0 = now) */
    double deadline;         /* absolute fr_time_s() deadline, 0 = none */
    struct fr_meter_req *meter; /* the request's meter account or NULL; taken over by the engine
                                   when fr_engine_submit returns a request (see above) */
    /* Image input of a vision-language prompt (all NULL / 0: a text prompt; copied at submit).
     * The prompt's tokens equal to image_token_id (pads expanded, model/mrope.h) take the rows of
     * img_embd in order instead of their token embedding; rope_pos gives the whole prompt's
     * M-RoPE positions (fr_vl_rope_index, or the kept tokens' original ones after pruning), and
     * a token at KV position q >= n_prompt gets q + delta on all three rows, delta =
     * max(rope_pos) + 1 - n_prompt. Refused with FR_ADMIT_INVALID when the rows and the image
     * tokens differ in number, the model has no M-RoPE or the backend takes neither. */
    const float *img_embd;      /* (n_img_rows, n_embd) image features after the merger, or NULL */
    int n_img_rows;             /* rows of img_embd */
    int image_token_id;         /* the placeholder id (hp.image_token_id) */
    const int32_t *rope_pos;    /* (3, n_prompt) t, h, w rows, or NULL (plain positions) */
    /* prefix cache (engine.h above) */
    bool no_prefix_cache;       /* neither take cached blocks nor publish this request's */
    uint64_t cache_salt;        /* 0 = none; otherwise only requests with the same salt share
                                   blocks (fr_kv_chain_root) */
    /* LoRA (model/lora.h): the adapter every token of the request runs with, NULL = the base
     * model. The request holds a reference (fr_lora_ref) until it is freed, so the caller may
     * drop its own (an adapter unloaded while requests use it lives until they end). The prefix
     * cache keys the request's blocks by the adapter's hash too. Refused (INVALID) on a backend
     * without FR_BOP_LORA or for an adapter loaded for another model shape. */
    const struct fr_lora *lora;
} fr_req_params;

typedef struct fr_engine fr_engine;
typedef struct fr_req fr_req;

/* A consumer's view of a request. */
typedef struct fr_req_info {
    bool done;           /* ended (end != NONE) */
    fr_end end;          /* why */
    int tier;
    int n_prompt;        /* prompt tokens */
    int n_generated;     /* tokens generated (EOS included) */
    int n_preempted;     /* times it was preempted and recomputed */
    int n_cached;        /* prompt tokens taken from the prefix cache at first admission */
    double t_arrival;    /* fr_time_s() stamps; 0 = not (yet) */
    double t_admit;      /* first admitted to the running batch */
    double t_first;      /* first token sampled */
    double t_end;        /* ended */
    char error[160];     /* message for END_ERROR */
    /* metering (valid once done, for a request submitted with a meter account) */
    bool metered;        /* the account was closed by the engine */
    bool energy_estimated; /* some of the energy is an estimate (CPU time x W per core) */
    double joules;       /* provisional attributed energy (the ledger gets the final figure) */
    double usd;          /* provisional total cost */
    uint64_t ledger_seq; /* its ledger row: the server waits for it (fr_meter_ledger_wait) */
} fr_req_info;

/* Loads nothing: takes a loaded model (shared, read-only, outlives the engine), allocates the KV
 * pool and the decoder, and starts the engine thread. NULL with err on bad config / no memory. */
fr_engine *fr_engine_new(const fr_model *m, const fr_engine_config *cfg, fr_err *err);
/* Stops the thread (requests still in flight end with FR_END_SHUTDOWN) and frees everything.
 * All fr_req references must be released before or after; requests outlive the engine safely. */
void fr_engine_free(fr_engine *e);

/* The effective configuration (max_ctx and kv_blocks resolved). */
/* The backend's name ("cpu", "cuda") the engine runs on. */
const char *fr_engine_backend_name(const fr_engine *e);
const fr_engine_config *fr_engine_cfg(const fr_engine *e);
int fr_engine_max_ctx(const fr_engine *e);

/* Submit. Returns a request holding one reference for the caller, or NULL with *adm set to the
 * refusal. Never blocks on the engine's work (only on its lock). */
fr_req *fr_engine_submit(fr_engine *e, const fr_req_params *p, fr_admission *adm);

/* Waits up to timeout_s for news: appends released text to *text and fills *info. Returns true
 * when the request has ended and all its text has been taken. */
bool fr_req_wait(fr_req *r, fr_buf *text, double timeout_s, fr_req_info *info);
/* Asks the engine to end the request (reason CANCELLED, DEADLINE or SHUTDOWN); it happens at the
 * next step. Harmless on an ended request. */
void fr_req_cancel(fr_req *r, fr_end reason);
void fr_req_release(fr_req *r);
/* Generated token ids so far (EOS included), copied into out (at most cap); returns the count.
 * Ids already returned never change, so a stream can send the new ones after each wait. */
int fr_req_output_ids(fr_req *r, int32_t *out, int cap);

/* Whether the engine takes image input (fr_req_params.img_embd / rope_pos): a model with a
 * vision tower and M-RoPE on a backend that takes embedding rows and M-RoPE positions. */
bool fr_engine_takes_images(const fr_engine *e);

/* Stop accepting new requests (submit refuses with FR_ADMIT_CLOSED). */
void fr_engine_close(fr_engine *e);
/* Cancel every request in flight with `reason`. */
void fr_engine_cancel_all(fr_engine *e, fr_end reason);
/* Requests queued or running. */
int fr_engine_in_flight(fr_engine *e);

typedef struct fr_engine_stats {
    int running[FR_N_TIERS];             /* running sequences */
    int waiting[FR_N_TIERS];             /* queued requests (new and preempted) */
    int kv_blocks_total, kv_blocks_used; /* KV pool; used = held by requests (cached blocks
                                            nobody holds count as free) */
    int block_size;
    uint64_t steps;                      /* decoder steps run */
    uint64_t step_tokens;                /* tokens processed (prefill, recompute, decode) */
    double step_seconds;                 /* time spent in steps */
    uint64_t prompt_tokens[FR_N_TIERS];  /* prompt tokens of admitted requests */
    uint64_t gen_tokens[FR_N_TIERS];     /* tokens generated */
    uint64_t preempted[FR_N_TIERS];      /* preemptions (a request may count several) */
    uint64_t recomputed_tokens;          /* tokens recomputed after preemption */
    uint64_t rejected[FR_N_TIERS][FR_ADMIT_COUNT]; /* refusals by verdict */
    uint64_t ended[FR_N_TIERS][FR_END_ERROR + 1];  /* ended requests by reason */
    double ewma_step_s, ewma_token_s;    /* the prediction's inputs */
    bool prefix_cache;                   /* the prefix cache is on */
    uint64_t prefix_queries;             /* prompt tokens looked up at first admission */
    uint64_t prefix_hits;                /* of those, found in the cache (not computed) */
    int kv_blocks_cached;                /* blocks published in the cache (held or not) */
    int kv_blocks_evictable;             /* cached blocks no request holds (reusable) */
    uint64_t prefix_evictions;           /* cached blocks evicted for new content */
    bool alive;                          /* engine thread running */
} fr_engine_stats;
/* The distinct LoRA adapters of the running requests and of the waiting ones, appended as
 * comma-separated names to running and waiting (vllm:lora_requests_info). */
void fr_engine_lora_in_use(fr_engine *e, fr_buf *running, fr_buf *waiting);
void fr_engine_stats_get(fr_engine *e, fr_engine_stats *s);

#endif

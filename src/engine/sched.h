/* sched.h — the pure scheduling decisions of the serving engine: SLO tiers, how one step's token
 * capacity is split across tiers, which request to preempt, and the admission-time prediction of
 * a new request's wait. Nothing here touches a model, a lock or a clock: the engine (engine.c)
 * gathers the numbers, calls these functions and applies the result, and tests/test_engine.c
 * checks the decisions directly.
 *
 * Step capacity. Every engine step processes at most `budget` tokens. Each tier with work gets a
 * share proportional to its weight (default 70/20/10); a tier that needs less than its share
 * leaves the rest to the others (work conserving, water filling). Fractions of a token are carried
 * to the next step in a per-tier credit, so over many steps every tier with work receives at least
 * its weighted share, however small: no tier with a positive weight starves. Inside a tier, decode
 * tokens (one per sequence) come first in a rotating order, then prefill chunks in arrival order,
 * each at most `chunk` tokens.
 *
 * Preemption victims are the lowest tier first and, within a tier, the most recent arrival (the
 * one that has the least work invested and the most slack).
 */
#ifndef FRUGAL_SCHED_H
#define FRUGAL_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#define FR_N_TIERS 3
typedef enum fr_tier { FR_TIER_P0 = 0, FR_TIER_P1 = 1, FR_TIER_P2 = 2 } fr_tier;

/* "P0", "P1", "P2" (or "?" out of range). */
const char *fr_tier_name(int tier);
/* Parses exactly "P0", "P1" or "P2" (no other spelling); -1 otherwise. */
int fr_tier_parse(const char *s);

/* Weighted split of `budget` tokens across tiers with demand[t] tokens wanted each: water filling
 * by weight, capped at demand. out[t] is a real number; sum(out) = min(budget, sum(demand)). */
void fr_sched_split(const double weight[FR_N_TIERS], const int64_t demand[FR_N_TIERS], int budget,
                    double out[FR_N_TIERS]);

/* Fair-share state carried from step to step. */
typedef struct fr_sched_fair {
    double weight[FR_N_TIERS]; /* relative weights (> 0) */
    double credit[FR_N_TIERS]; /* fraction of a token owed to (> 0) or ahead of (< 0) a tier */
    unsigned rr[FR_N_TIERS];   /* rotation offset of the decode order within each tier */
} fr_sched_fair;
void fr_sched_fair_init(fr_sched_fair *f, const double weight[FR_N_TIERS]);

/* One running sequence as the planner sees it. */
typedef struct fr_sched_item {
    int tier;      /* 0..2 */
    int remaining; /* tokens not yet in the KV cache (>= 1); 1 = a decode step */
    int take;      /* out: tokens to process this step (0 = not this step) */
} fr_sched_item;

/* Plans one step: sets items[i].take for n items given in (tier, arrival) order. At most `budget`
 * tokens in total and `chunk` per sequence. Returns the total planned. */
int fr_sched_plan(fr_sched_fair *f, fr_sched_item *items, int n, int budget, int chunk);

/* A preemption candidate. */
typedef struct fr_sched_cand {
    int tier;         /* 0..2 */
    uint64_t arrival; /* arrival order (larger = newer) */
    bool eligible;    /* false: may not be chosen (already out, or the requester itself) */
} fr_sched_cand;
/* Index of the victim: the lowest tier, newest arrival, among eligible candidates whose tier is
 * numerically greater than `above_tier` (pass -1 to allow any tier). -1 when none. */
int fr_sched_victim(const fr_sched_cand *c, int n, int above_tier);

/* Starvation protection for admission order: a request that has waited `waited_s` is treated as
 * one tier higher for every `aging_s` seconds (0 = off). */
int fr_sched_effective_tier(int tier, double waited_s, double aging_s);

/* What the engine knows when a request asks to be admitted (all counts exclude the new request). */
typedef struct fr_sched_load {
    int max_running;                      /* sequence slots in the running batch */
    int budget;                           /* tokens per step */
    int running[FR_N_TIERS];              /* running sequences per tier */
    int waiting[FR_N_TIERS];              /* queued (not running) requests per tier */
    int64_t backlog[FR_N_TIERS];          /* prompt tokens not yet computed (queued + running) */
    int64_t decode_left[FR_N_TIERS];      /* output tokens still allowed to running requests */
    int64_t queued_out[FR_N_TIERS];       /* max output tokens of queued requests */
    double step_s;                        /* recent duration of one decode-heavy step */
    double token_s;                       /* recent seconds per token in a full prefill step */
} fr_sched_load;

/* Predicted seconds before a new request of `tier` starts producing (queue wait, not counting
 * its own prefill): the time to get a running slot (running work of its own and higher tiers has
 * to finish; lower tiers can be preempted) plus the time to work through the prefill backlog of
 * its tier at that tier's weighted share of the step. A heuristic, documented in docs/SERVING.md. */
double fr_sched_predict_wait(const fr_sched_load *l, const double weight[FR_N_TIERS], int tier);

#endif

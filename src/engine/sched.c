/* sched.c — pure scheduling decisions (see sched.h): the weighted split of a step across tiers,
 * the per-step plan, preemption victims, aging, and the admission wait prediction.
 *
 * All functions are deterministic and allocation-free; the plan uses a small fixed scratch on
 * the stack per tier and walks the item array a few times (n is at most the running batch).
 */
#include "engine/sched.h"

#include <math.h>
#include <string.h>

const char *fr_tier_name(int tier) {
    static const char *names[FR_N_TIERS] = {"P0", "P1", "P2"};
    return tier >= 0 && tier < FR_N_TIERS ? names[tier] : "?";
}

int fr_tier_parse(const char *s) {
    /* exactly "P0", "P1" or "P2": no case folding, no spaces, no bare digits, so that every
     * door (header, body field, key file, config) reads a tier the same way */
    if (!s || s[0] != 'P' || s[1] < '0' || s[1] > '2' || s[2]) return -1;
    return s[1] - '0';
}

void fr_sched_split(const double weight[FR_N_TIERS], const int64_t demand[FR_N_TIERS], int budget,
                    double out[FR_N_TIERS]) {
    bool met[FR_N_TIERS];
    double left = budget > 0 ? budget : 0;
    for (int t = 0; t < FR_N_TIERS; t++) {
        out[t] = 0;
        met[t] = demand[t] <= 0;
    }
    /* Water filling: at most one tier becomes satisfied per round. */
    for (int round = 0; round <= FR_N_TIERS && left > 1e-9; round++) {
        double w_sum = 0;
        for (int t = 0; t < FR_N_TIERS; t++)
            if (!met[t]) w_sum += weight[t] > 0 ? weight[t] : 0;
        if (w_sum <= 0) {
            /* Only zero-weight tiers remain: they share what is left in tier order. */
            for (int t = 0; t < FR_N_TIERS && left > 1e-9; t++) {
                if (met[t]) continue;
                double give = fmin(left, (double)demand[t] - out[t]);
                out[t] += give;
                left -= give;
                met[t] = true;
            }
            break;
        }
        /* A tier whose fair part covers its demand is capped; redo the rest without it. */
        int capped = -1;
        for (int t = 0; t < FR_N_TIERS; t++) {
            if (met[t] || weight[t] <= 0) continue;
            double give = left * weight[t] / w_sum;
            if (give >= (double)demand[t] - out[t]) {
                capped = t;
                break;
            }
        }
        if (capped >= 0) {
            double give = (double)demand[capped] - out[capped];
            out[capped] += give;
            left -= give;
            met[capped] = true;
            continue;
        }
        for (int t = 0; t < FR_N_TIERS; t++)
            if (!met[t] && weight[t] > 0) out[t] += left * weight[t] / w_sum;
        left = 0;
    }
}

void fr_sched_fair_init(fr_sched_fair *f, const double weight[FR_N_TIERS]) {
    memset(f, 0, sizeof *f);
    for (int t = 0; t < FR_N_TIERS; t++) f->weight[t] = weight[t];
}

static int imin(int a, int b) { return a < b ? a : b; }

int fr_sched_plan(fr_sched_fair *f, fr_sched_item *items, int n, int budget, int chunk) {
    int64_t demand[FR_N_TIERS] = {0};
    int64_t total = 0;
    if (chunk < 1) chunk = 1;
    for (int i = 0; i < n; i++) {
        items[i].take = 0;
        int t = items[i].tier;
        if (t < 0 || t >= FR_N_TIERS || items[i].remaining < 1) continue;
        demand[t] += imin(items[i].remaining, chunk);
    }
    for (int t = 0; t < FR_N_TIERS; t++) total += demand[t];

    int64_t alloc[FR_N_TIERS];
    if (total <= budget) {
        for (int t = 0; t < FR_N_TIERS; t++) {
            alloc[t] = demand[t];
            f->credit[t] = 0;
        }
    } else {
        double share[FR_N_TIERS], want[FR_N_TIERS];
        fr_sched_split(f->weight, demand, budget, share);
        int64_t used = 0;
        for (int t = 0; t < FR_N_TIERS; t++) {
            if (demand[t] <= 0) f->credit[t] = 0;
            want[t] = share[t] + f->credit[t];
            int64_t a = (int64_t)floor(want[t]);
            if (a < 0) a = 0;
            if (a > demand[t]) a = demand[t];
            alloc[t] = a;
            used += a;
        }
        /* Largest remainder: the tier owed the most fraction gets the next token, the one owed
         * the least gives one back. Credits then carry what each tier is owed (or ahead). */
        for (int guard = 0; used < budget && guard < 4 * FR_N_TIERS; guard++) {
            int best = -1;
            for (int t = 0; t < FR_N_TIERS; t++)
                if (alloc[t] < demand[t] &&
                    (best < 0 || want[t] - (double)alloc[t] > want[best] - (double)alloc[best]))
                    best = t;
            if (best < 0) break;
            alloc[best]++;
            used++;
        }
        for (int guard = 0; used > budget && guard < 4 * FR_N_TIERS; guard++) {
            int worst = -1;
            for (int t = 0; t < FR_N_TIERS; t++)
                if (alloc[t] > 0 &&
                    (worst < 0 || want[t] - (double)alloc[t] < want[worst] - (double)alloc[worst]))
                    worst = t;
            if (worst < 0) break;
            alloc[worst]--;
            used--;
        }
        for (int t = 0; t < FR_N_TIERS; t++) {
            double c = alloc[t] >= demand[t] ? 0 : want[t] - (double)alloc[t];
            f->credit[t] = c > 1 ? 1 : c < -1 ? -1 : c;
        }
    }

    int planned = 0;
    for (int t = 0; t < FR_N_TIERS; t++) {
        int64_t left = alloc[t];
        if (left <= 0) continue;
        /* Decodes first, in a rotating order so a share smaller than the decode count is fair. */
        int n_dec = 0;
        for (int i = 0; i < n; i++)
            if (items[i].tier == t && items[i].remaining == 1) n_dec++;
        if (n_dec > 0) {
            int start = (int)(f->rr[t] % (unsigned)n_dec), k = 0, served = 0;
            for (int pass = 0; pass < 2 && left > 0; pass++) {
                k = 0;
                for (int i = 0; i < n && left > 0; i++) {
                    if (items[i].tier != t || items[i].remaining != 1) continue;
                    bool in_pass = pass == 0 ? k >= start : k < start;
                    k++;
                    if (!in_pass || items[i].take) continue;
                    items[i].take = 1;
                    left--;
                    served++;
                }
            }
            f->rr[t] += (unsigned)served;
        }
        for (int i = 0; i < n && left > 0; i++) {
            if (items[i].tier != t || items[i].remaining <= 1) continue;
            int take = imin(items[i].remaining, chunk);
            if (take > left) take = (int)left;
            items[i].take = take;
            left -= take;
        }
    }
    for (int i = 0; i < n; i++) planned += items[i].take;
    return planned;
}

int fr_sched_victim(const fr_sched_cand *c, int n, int above_tier) {
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (!c[i].eligible || c[i].tier <= above_tier) continue;
        if (best < 0 || c[i].tier > c[best].tier ||
            (c[i].tier == c[best].tier && c[i].arrival > c[best].arrival))
            best = i;
    }
    return best;
}

int fr_sched_effective_tier(int tier, double waited_s, double aging_s) {
    if (aging_s <= 0 || waited_s <= 0) return tier;
    double steps = floor(waited_s / aging_s);
    if (steps >= tier) return 0;
    return tier - (int)steps;
}

double fr_sched_predict_wait(const fr_sched_load *l, const double weight[FR_N_TIERS], int tier) {
    if (tier < 0 || tier >= FR_N_TIERS) return 0;
    int run_total = 0, run_ahead = 0, run_lower = 0, wait_ahead = 0;
    int64_t out_ahead = 0;
    for (int u = 0; u < FR_N_TIERS; u++) {
        run_total += l->running[u];
        if (u <= tier) {
            run_ahead += l->running[u];
            wait_ahead += l->waiting[u];
            out_ahead += l->decode_left[u] + l->queued_out[u];
        } else {
            run_lower += l->running[u];
        }
    }
    /* Slots: free ones plus those of lower tiers (preemptible). */
    int free_slots = l->max_running - run_total + run_lower;
    double slot_wait = 0;
    if (wait_ahead + 1 > free_slots) {
        int extra = wait_ahead + 1 - (free_slots > 0 ? free_slots : 0);
        /* Slots come back in waves of up to max_running requests, each lasting about as many
         * steps as an average request ahead may still generate (an upper bound: EOS can end a
         * request early). */
        int n_req = run_ahead + wait_ahead;
        double avg_out = n_req > 0 ? (double)out_ahead / n_req : 0;
        double waves = ceil((double)extra / (l->max_running > 0 ? l->max_running : 1));
        slot_wait = waves * avg_out * l->step_s;
    }
    double w_act = weight[tier] > 0 ? weight[tier] : 0;
    for (int u = 0; u < FR_N_TIERS; u++)
        if (u != tier && (l->running[u] > 0 || l->waiting[u] > 0) && weight[u] > 0)
            w_act += weight[u];
    double share = w_act > 0 && weight[tier] > 0 ? weight[tier] / w_act : 1.0 / FR_N_TIERS;
    double prefill_wait = (double)l->backlog[tier] * l->token_s / share;
    return slot_wait + prefill_wait;
}

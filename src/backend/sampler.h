/* sampler.h — next-token selection from logits on the host (sampler.c says the exact procedure).
 *
 * fr_sampling is the request's sampling parameters, shared by every backend: the CUDA backend
 * samples on the device from the same fields (backend.h fr_backend_forward_sample); the host
 * sampler (fr_sampler) is the generic path and the one the engine and fr_generate use on the CPU.
 *
 *   fr_sampling p = fr_sampling_default();  p.temperature = 0.7f;  p.seed = 42;
 *   fr_sampler s;  fr_sampler_init(&s, &p, n_vocab);
 *   int id = fr_sample(&s, logits);          (logits: n_vocab floats)
 *   fr_sampler_free(&s);
 *
 * An fr_sampler is used by one thread at a time; it allocates its scratch in fr_sampler_init and
 * nothing per draw.
 */
#ifndef FRUGAL_SAMPLER_H
#define FRUGAL_SAMPLER_H

#include <stdint.h>

typedef struct fr_sampling {
    float temperature; /* 0 = greedy */
    int top_k;         /* 0 = off */
    float top_p;       /* 1 = off */
    float min_p;       /* 0 = off */
    uint64_t seed;
} fr_sampling;
fr_sampling fr_sampling_default(void); /* temperature 1, top_k 0, top_p 1, min_p 0, seed 0 */

struct fr_cand;
typedef struct fr_sampler {
    fr_sampling p;
    uint64_t rng[2];   /* xoroshiro128+ state */
    int n_vocab;
    float *probs;      /* (n_vocab) scratch */
    int32_t *idx;      /* (n_vocab) scratch */
    struct fr_cand *cand; /* (n_vocab) (probability, id) candidates scratch */
} fr_sampler;
void fr_sampler_init(fr_sampler *s, const fr_sampling *p, int n_vocab);
void fr_sampler_free(fr_sampler *s);
/* Pick the next token from raw logits (n_vocab). Greedy picks the lowest index among ties. */
int fr_sample(fr_sampler *s, const float *logits);
/* Constrained decoding: logits[i] = -inf for every i whose bit in mask is clear (bit i of word
 * i / 32; n entries). A row with no bit set is left as it is. Returns the allowed count. */
int fr_sampler_apply_mask(float *logits, const uint32_t *mask, int n);

#endif

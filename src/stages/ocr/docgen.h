/* docgen.h — synthetic invoices and receipts (English and Simplified Chinese) with ground truth,
 * for OCR evaluation, tests and benchmarks.
 *
 * Design: a seed fixes everything (content, layout jitter, degradations), so a set of documents is
 * reproducible. With opts.varied (fr_doc_opts_random sets it for English) the English page also
 * varies its face among Debian faces (bold and condensed weights of DejaVu, Liberation, Croscore,
 * Carlito/Caladea, FreeFont, URW, Lato, Cantarell), currency, date form and layout; the clean page
 * (fr_doc_opts_clean) is the fixed one the unit tests know. Text is drawn with cairo's toy font API through fontconfig ("DejaVu Sans" /
 * "DejaVu Sans Mono" for English, "Noto Sans CJK SC" for Chinese; fonts-dejavu-core and
 * fonts-noto-cjk), onto a white page at 100-150 dpi, rotated by up to +-3 degrees, then degraded
 * with Gaussian-ish pixel noise and optionally a JPEG round trip at low quality. Each document
 * carries the four key fields (invoice number, total amount, ISO date, payee) plus distractors
 * (line items, subtotal, tax, customer name) so that the extractor must pick the right values.
 *
 * Thread safety: reentrant (each call owns its cairo surface); fontconfig is internally locked.
 */
#ifndef FRUGAL_OCR_DOCGEN_H
#define FRUGAL_OCR_DOCGEN_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "stages/image/image.h"

typedef struct fr_doc_opts {
    bool chinese;       /* Simplified Chinese text instead of English */
    bool receipt;       /* narrow till receipt instead of an A5 invoice */
    int dpi;            /* rendering resolution (100..300) */
    float rotate_deg;   /* page rotation, degrees (small: +-3) */
    float noise;        /* pixel noise amplitude in gray levels (0 = clean) */
    int jpeg_quality;   /* 0 = no JPEG round trip, else 1..100 */
    uint64_t seed;      /* content seed */
    bool varied;        /* English: vary font face, currency ($ US$ USD € EUR £ GBP, before or
                           after the figure, 1,234.56 or 1.234,56), date form (ISO, slashes in
                           the currency's order, dots, month names) and layout (one column, two
                           columns, label and value columns apart); off: the fixed page */
} fr_doc_opts;

typedef struct fr_doc_truth {
    char invoice_no[32]; /* as printed */
    char amount[24];     /* total, normalised "1210.00" */
    char currency[4];    /* ISO 4217 */
    char date[16];       /* ISO 8601 */
    char payee[96];      /* issuer / merchant as printed */
} fr_doc_truth;

/* Clean defaults: English invoice, 150 dpi, no rotation, no noise, no JPEG. */
void fr_doc_opts_clean(fr_doc_opts *o, uint64_t seed);
/* Random realistic degradations from the seed: kind, 100-150 dpi, +-3 deg, noise, JPEG q 40-85. */
void fr_doc_opts_random(fr_doc_opts *o, bool chinese, uint64_t seed);

/* Render a document to a gray image. 0 on success, -1 with err set (e.g. cairo failure). */
int fr_doc_render(const fr_doc_opts *o, fr_image *out, fr_doc_truth *truth, fr_err *err);

/* Ground truth as a JSON object. */
void fr_doc_truth_json(const fr_doc_opts *o, const fr_doc_truth *t, fr_buf *out);



/* Photo-like synthetic images for the density tests: kind 0 smooth gradient, 1 uniform noise,
 * 2 random filled shapes, 3 "natural" (overlapping soft blobs + texture + sensor noise),
 * 4 high-contrast stripes/checks; RGB, width x height. */
void fr_doc_photo(int kind, uint32_t width, uint32_t height, uint64_t seed, fr_image *out);
#define FR_DOC_PHOTO_KINDS 5

#endif

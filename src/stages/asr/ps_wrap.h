/* ps_wrap.h — the pocketsphinx/sphinxbase headers, with their warnings silenced (they are not
 * -Wpedantic clean on every compiler), so the rest of the ASR stage builds with -Werror. */
#ifndef FRUGAL_PS_WRAP_H
#define FRUGAL_PS_WRAP_H
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#endif
#include <pocketsphinx.h>
#include <sphinxbase/err.h>
#include <sphinxbase/ngram_model.h>
#include <sphinxbase/cmn.h>
#include <sphinxbase/fe.h>
#include <sphinxbase/feat.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif

/* prom.h — the Prometheus text exposition (format 0.0.4) helpers shared by the meter's families
 * (meter/prom.c) and the server's (serve/metrics.c), so both write one metric head the same way.
 */
#ifndef FRUGAL_METER_PROM_H
#define FRUGAL_METER_PROM_H

#include "base/base.h"

/* Appends the `# HELP name help` and `# TYPE name type` lines of one metric family. `type` is
 * "counter", "gauge" or "histogram"; `help` is one line of text (no newline). Cannot fail. */
void fr_prom_head(fr_buf *o, const char *name, const char *type, const char *help);
/* Appends s as a label value's content: \\, \" and \n escaped; not UTF-8: bytes >= 0x80 become
 * '?'. Cannot fail. */
void fr_prom_escape(fr_buf *o, const char *s);

#endif

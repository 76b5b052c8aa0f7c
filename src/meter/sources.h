/* sources.h — energy readers behind the meter (internal to src/meter and its tests).
 *
 *   - fr_nvml_*: NVML loaded with dlopen at run time. Only the handful of functions the meter
 *     uses are looked up, with function pointer types declared here (no nvml.h).
 *   - fr_cpu_energy_*: the host CPU as RAPL package counters under a powercap root, or an
 *     estimate from the process's CPU time × watts per core.
 */
#ifndef FRUGAL_METER_SOURCES_H
#define FRUGAL_METER_SOURCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meter/meter.h"

/* nvmlReturn_t values the meter distinguishes */
#define FR_NVML_SUCCESS 0
#define FR_NVML_ERROR_NOT_SUPPORTED 3
#define FR_NVML_ERROR_GPU_IS_LOST 15
#define FR_NVML_NOT_LOADED (-1) /* the function is missing from the library */

typedef struct fr_nvml fr_nvml;

/* One read of a GPU; every *_rc is an nvmlReturn_t (FR_NVML_SUCCESS when the value is valid). */
typedef struct fr_nvml_reading {
    int energy_rc;               /* nvmlDeviceGetTotalEnergyConsumption */
    unsigned long long energy_mj;/* mJ since the driver loaded */
    int power_rc;                /* nvmlDeviceGetPowerUsage */
    unsigned int power_mw;       /* mW (1-s average on Ampere-but-GA100 and newer) */
    int util_rc;                 /* nvmlDeviceGetUtilizationRates */
    unsigned int util_gpu;       /* % of time a kernel ran */
    unsigned int util_mem;       /* % of time memory was read or written */
    int mem_rc;                  /* nvmlDeviceGetMemoryInfo */
    unsigned long long mem_used; /* bytes */
    unsigned long long mem_total;/* bytes */
    int clock_rc;                /* nvmlDeviceGetClockInfo(NVML_CLOCK_SM) */
    unsigned int sm_mhz;         /* SM clock */
    int temp_rc;                 /* nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU) */
    unsigned int temp_c;         /* degrees Celsius */
} fr_nvml_reading;

/* dlopen `lib`, nvmlInit, count devices. NULL (and `why` filled) when NVML is not usable. */
fr_nvml *fr_nvml_open(const char *lib, char *why, size_t why_n);
int fr_nvml_count(const fr_nvml *n);
const char *fr_nvml_name(const fr_nvml *n, int i); /* marketing name or "" */
void fr_nvml_read(fr_nvml *n, int i, fr_nvml_reading *r);
const char *fr_nvml_error(const fr_nvml *n, int rc); /* nvmlErrorString or "NVML error N" */
void fr_nvml_close(fr_nvml *n);

/* Energy in mJ between two raw counter reads dt_s apart. A decrease is a 32- or 64-bit wrap when
 * the wrapped delta is plausible (≤ 1.5 × max_w × dt + 1 J); otherwise the counter was reset
 * (driver reload) and the delta is the new value when plausible, else 0. *reset tells which. */
double fr_nvml_counter_delta_mj(uint64_t prev, uint64_t cur, double dt_s, double max_w,
                                bool *reset);

typedef struct fr_cpu_energy fr_cpu_energy;
/* mode 0 auto (RAPL else estimate), 1 RAPL only (NULL when unreadable), 2 estimate only.
 * `why` gets a one-line description of the chosen source (or of the failure). */
fr_cpu_energy *fr_cpu_energy_open(const char *powercap_root, int mode, double watts_per_core,
                                  char *why, size_t why_n);
/* Cumulative joules since open (wraps unfolded). -1 on a read failure (the value is kept). */
int fr_cpu_energy_read(fr_cpu_energy *c, double *joules);
fr_meter_source fr_cpu_energy_source(const fr_cpu_energy *c);
void fr_cpu_energy_close(fr_cpu_energy *c);

/* The process's CPU time in seconds (all threads). */
double fr_process_cpu_s(void);

#endif

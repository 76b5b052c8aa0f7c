/* meter_cmds.h — `frugal audit` and `frugal roi` over the metering ledger (src/meter/audit.h).
 * Each returns the process exit status: 0 success, 1 bad input / runtime failure (message
 * already printed), 2 usage error. */
#ifndef FRUGAL_METER_CMDS_H
#define FRUGAL_METER_CMDS_H

int fr_cmd_audit(int argc, char **argv);
int fr_cmd_roi(int argc, char **argv);

#endif

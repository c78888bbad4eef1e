/*
 * util/faults.h — fault injection, FOR TESTS ONLY.
 *
 * A device runs a batch in steps (the GPU: one pipeline chunk, or a step
 * of a growth; the CPU: CPU_STEP_KEYS keys of a find-or-put or erase) and
 * asks table_fault_step() before each one.  Once a test arms it with
 * cpht_fault_arm(k), the k-th step from then on fails with CPHT_ERR_DEVICE
 * as a device call would, after the steps before it have changed the
 * table; then it is disarmed.  The unit tests use it to prove that a call
 * failing part way is undone whole.  The extension never arms it:
 * unarmed, a step costs one relaxed atomic load.
 *
 * Who: every kernels folder (test/check-layout.sh; table/device_ops.h
 * brings it to cpu/ and gpu/), and the unit tests, which arm it.
 *
 * Concurrency: one process-wide counter, read and written with relaxed
 * atomics but not decremented atomically: a step runs on the thread that
 * runs the table's call, and the count is exact while one such thread
 * steps at a time (a sharded table's shards step on several at once).  A
 * test arms it between calls.  Nothing here raises or blocks.
 */
#ifndef CPHT_TABLE_FAULTS_H
#define CPHT_TABLE_FAULTS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Tests only: make the k-th device step from now fail (0 disarms). */
void		cpht_fault_arm(unsigned k);

/* Devices: 1 when the step about to run must fail (counts the step). */
int			table_fault_step(void);

#ifdef __cplusplus
}
#endif

#endif							/* CPHT_TABLE_FAULTS_H */

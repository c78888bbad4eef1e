/*
 * errors.h — a cpht_status from the kernels turned into an ereport, with
 * one SQLSTATE per status (docs/errors.md), and the helpers cpht's
 * messages share.
 *
 * Offers: cpht_check_status and cpht_check_call (the ERROR of a failed
 * kernel call), cpht_sentence (a kernel message as an errdetail sentence)
 * and cpht_echo_name (a caller's name, cut short for a message).
 *
 * Who: a leaf of src/: any src/ file may include it.  Its callers are
 * backends and parallel workers, on their own thread.  The cpht worker
 * does not raise a kernel status of a request: it leaves it in the reply
 * (shmem/protocol.h), and the backend that sent the request passes it
 * here.
 *
 * Concurrency: no lock and no shared state; results are palloc'd in the
 * current memory context, so never call these from a kernels' hook or
 * helper thread.  cpht_check_status and cpht_check_call return only for
 * CPHT_OK and raise ERROR for every other status, except that for
 * CPHT_ERR_CANCELED they first let PostgreSQL raise the pending cancel or
 * terminate (CHECK_FOR_INTERRUPTS), and raise 57014 themselves only where
 * interrupts are held off.
 */
#ifndef CPHT_ERRORS_H
#define CPHT_ERRORS_H

#include "cpht_table.h"

/*
 * Raises the ERROR for a failed kernel call; returns only for CPHT_OK.
 * handle is the table's handle (0 while creating one) and message the
 * kernels' explanation (cpht_table_error, or the errbuf of a create).
 */
extern void cpht_check_status(cpht_status status, int32 handle,
							  const char *message);

/*
 * The same for a call whose failure the caller describes: `undone` is the
 * sentence that ends the errdetail of a full table, a cancel or the memory
 * limit (what the undone call left, e.g. "No key of this call was
 * deleted."), or NULL for a call that changes nothing (a find) or says it
 * in its own message (a rebuild).  cpht_check_status passes "No key of this
 * call was stored."
 */
extern void cpht_check_call(cpht_status status, int32 handle,
							const char *message, const char *undone);

/* A kernel message as a sentence for errdetail: capitalised, with a
 * period. */
extern char *cpht_sentence(const char *message);

/*
 * A name given by the caller, as messages echo it: at most NAMEDATALEN
 * bytes (whole characters), then "..." when it was longer, so that a huge
 * argument does not make a huge message.
 */
extern const char *cpht_echo_name(const char *name);

/*
 * cpht.trace's sentence splitting the time of table calls (one, or the
 * sum of a stream's): "Inside the table call[s]: ..." with staging,
 * waiting for the device, copying results and the undo log, then growing
 * and widening only when the calls did.  For calls routed on a sharded
 * table's GPUs (cpht_call_times.routed) its five parts instead of the
 * first three: keys onto the GPUs, routing them to their shards, the
 * shards' calls, the answers back to their GPUs and off the GPUs.
 */
extern char *cpht_call_times_sentence(const cpht_call_times *t, bool plural);

#endif							/* CPHT_ERRORS_H */

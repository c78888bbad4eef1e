/*
 * errors.h — turning a cpht_status from the kernels into an ereport.
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

#endif							/* CPHT_ERRORS_H */

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

/* A kernel message as a sentence for errdetail: capitalised, with a
 * period. */
extern char *cpht_sentence(const char *message);

#endif							/* CPHT_ERRORS_H */

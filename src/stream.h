/*
 * stream.h — find-or-put over streams of rows instead of one array: the
 * cpht_fop_agg aggregate and the cpht_fop_rows set-returning function.
 */
#ifndef CPHT_STREAM_H
#define CPHT_STREAM_H

/* Keys sent to the table per batch (GUC cpht.batch_size). */
extern int	cpht_batch_size;

extern void cpht_stream_define_gucs(void);

#endif							/* CPHT_STREAM_H */

/*
 * util/key_span.h — the span of a batch of keys (util/key_span.c) and the
 * zigzag fold it reads.  It knows nothing of tables: which width a table
 * reads from a span is table/table_widen.c's rule.
 *
 * Who: every kernels folder (test/check-layout.sh); table/layout.h
 * includes it for the fold, so that host and device code share one.  The
 * spanned copy that src/ calls is in the door, cpht_util.h.
 *
 * Concurrency: CPHT_KEY_FOLD is a pure macro, for host and device code.
 * util_key_span reads the keys and writes only *span; it shares the pass
 * between the calling thread and the pool's helpers (util/threads.h) and
 * returns when every share is done, so any thread may call it.  Nothing
 * here fails.
 */
#ifndef CPHT_UTIL_KEY_SPAN_H
#define CPHT_UTIL_KEY_SPAN_H

#include <stddef.h>
#include <stdint.h>

#include "cpht_util.h"			/* cpht_key_span */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The zigzag fold of a key read as signed: 0, -1, 1, -2, ... become
 * 0, 1, 2, 3, ..., so a negative key of small magnitude is as narrow as a
 * positive one.  A macro, one place for host and device code alike
 * (table/layout.h's layout_fold is this).
 */
#define CPHT_KEY_FOLD(k) (((uint64_t) (k) << 1) ^ (uint64_t) ((int64_t) (k) >> 63))

/*
 * The span of keys[0..n): the OR of the keys and the OR of their folds, on
 * up to `threads` threads (0: one per core), a thread per million keys at
 * most (a pass over keys is memory bound).
 */
void		util_key_span(const uint64_t *keys, size_t n, int threads, cpht_key_span *span);

#ifdef __cplusplus
}
#endif

#endif							/* CPHT_UTIL_KEY_SPAN_H */

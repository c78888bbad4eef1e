/*
 * faults.c — the test-only fault injection of faults.h.
 */
#include "util/faults.h"

/* Steps left before the one that fails; 0: disarmed. */
static unsigned steps_left = 0;

void
cpht_fault_arm(unsigned k)
{
	__atomic_store_n(&steps_left, k, __ATOMIC_RELAXED);
}

int
table_fault_step(void)
{
	unsigned	left = __atomic_load_n(&steps_left, __ATOMIC_RELAXED);

	if (left == 0)
		return 0;
	/* Steps run on the calling thread; a test arms it between calls. */
	__atomic_store_n(&steps_left, left - 1, __ATOMIC_RELAXED);
	return left == 1;
}

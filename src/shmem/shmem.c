/*
 * shmem.c — with shared_preload_libraries = 'cpht': the shared memory the
 * worker shares with backends, and its registration (its settings are in
 * guc.c).  Nothing here touches CUDA: the postmaster forks every
 * process, and a CUDA context does not survive fork().
 */
#include "postgres.h"

#include "access/twophase.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/guc.h"

#include "shmem/protocol.h"

CphtControl *cpht_control = NULL;
CphtCatalogEntry *cpht_catalog = NULL;
CphtSlot   *cpht_slots = NULL;
pg_atomic_uint64 *cpht_submitted = NULL;
char	   *cpht_arena = NULL;
bool		cpht_preloaded = false;

/*
 * -1 (the default): three quarters of cpht.max_shared_tables, so that one
 * database cannot take every slot; 0: no limit of its own (the server's
 * cpht.max_shared_tables alone); N: at most N.  Never more than the
 * server holds.
 */
int
cpht_tables_per_database_limit(void)
{
	int			max = cpht_max_shared_tables;

	if (cpht_max_shared_tables_per_database < 0)
		return Max(1, max / 4 * 3 + (max % 4) * 3 / 4);
	if (cpht_max_shared_tables_per_database == 0)
		return max;
	return Min(cpht_max_shared_tables_per_database, max);
}

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Every PGPROC has a slot, indexed by pgprocno (ProcGlobal->allProcCount). */
static int
slot_count(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

static Size
words_size(int nslots)
{
	return sizeof(pg_atomic_uint64) * (Size) ((nslots + 63) / 64);
}

static Size
arena_size(void)
{
	return (Size) cpht_transfer_windows * (Size) cpht_transfer_chunk * (sizeof(uint64) + 1);
}

static Size
control_size(void)
{
	Size		size = MAXALIGN(sizeof(CphtControl));

	size = add_size(size, MAXALIGN(mul_size(sizeof(CphtCatalogEntry), cpht_max_shared_tables)));
	size = add_size(size, MAXALIGN(mul_size(sizeof(CphtSlot), slot_count())));
	size = add_size(size, MAXALIGN(words_size(slot_count())));
	/* the arena starts on a cache line */
	size = add_size(size, PG_CACHE_LINE_SIZE);
	size = add_size(size, arena_size());
	return size;
}

static void
cpht_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(control_size());
	RequestNamedLWLockTranche("cpht", 1);
}

static void
cpht_shmem_startup(void)
{
	bool		found;
	char	   *p;
	int			nslots = slot_count();

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	p = ShmemInitStruct("cpht control", control_size(), &found);
	cpht_control = (CphtControl *) p;
	p += MAXALIGN(sizeof(CphtControl));
	cpht_catalog = (CphtCatalogEntry *) p;
	p += MAXALIGN(sizeof(CphtCatalogEntry) * (Size) cpht_max_shared_tables);
	cpht_slots = (CphtSlot *) p;
	p += MAXALIGN(sizeof(CphtSlot) * (Size) nslots);
	cpht_submitted = (pg_atomic_uint64 *) p;
	p += MAXALIGN(words_size(nslots));
	cpht_arena = (char *) TYPEALIGN(PG_CACHE_LINE_SIZE, p);

	if (!found)
	{
		CphtControl *ctl = cpht_control;

		memset(ctl, 0, sizeof(CphtControl));
		SpinLockInit(&ctl->mutex);
		ctl->catalog_lock = &(GetNamedLWLockTranche("cpht"))->lock;
		ConditionVariableInit(&ctl->window_cv);
		pg_atomic_init_u32(&ctl->durable_ready, 0);
		ConditionVariableInit(&ctl->durable_cv);
		ctl->nslots = nslots;
		ctl->max_tables = cpht_max_shared_tables;
		ctl->max_tables_per_database = cpht_tables_per_database_limit();
		ctl->nwindows = cpht_transfer_windows;
		ctl->window_keys = (uint64) cpht_transfer_chunk;
		ctl->window_free = cpht_transfer_windows == 64 ? ~UINT64CONST(0) :
			(UINT64CONST(1) << cpht_transfer_windows) - 1;
		ctl->next_table_id = 1;
		ctl->next_private_id = 1;
		for (int i = 0; i < cpht_max_shared_tables; i++)
		{
			memset(&cpht_catalog[i], 0, sizeof(CphtCatalogEntry));
			pg_atomic_init_u64(&cpht_catalog[i].count, 0);
			cpht_table_stats_init(&cpht_catalog[i].stats, 0);
		}
		for (int s = 0; s < nslots; s++)
		{
			memset(&cpht_slots[s], 0, sizeof(CphtSlot));
			pg_atomic_init_u32(&cpht_slots[s].state, CPHT_SLOT_IDLE);
			pg_atomic_init_u32(&cpht_slots[s].cancel, 0);
			pg_atomic_init_u64(&cpht_slots[s].filled, 0);
			pg_atomic_init_u64(&cpht_slots[s].ran, 0);
		}
		for (int w = 0; w < (nslots + 63) / 64; w++)
			pg_atomic_init_u64(&cpht_submitted[w], 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
cpht_shmem_init(void)
{
	BackgroundWorker worker;

	/* Shared memory can only be asked for while the postmaster loads the
	 * library; a plain server has no worker. */
	if (!process_shared_preload_libraries_in_progress)
		return;

	cpht_preloaded = true;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = cpht_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = cpht_shmem_startup;

	/*
	 * Connected to no database (worker/main.c), which lets it read the
	 * shared catalog pg_database (worker/databases.c); a worker with a
	 * connection starts once the server is consistent at the earliest.
	 */
	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "cpht");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "cpht_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "cpht worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "cpht worker");
	RegisterBackgroundWorker(&worker);
}

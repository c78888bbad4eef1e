/*
 * shared.c — the SQL functions of shared tables by name (cpht in
 * shared_preload_libraries): cpht_create(..., name => 'x'), cpht_open,
 * cpht_drop of a shared handle, cpht_checkpoint, cpht_alter_owner.
 *
 * Names, privileges and the transaction-block rule are checked here, in
 * the backend, which has the catalogs; the session's handles of shared
 * tables are kept by session/shared_handles.c, and the worker checks that
 * the table still exists.
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "lib/stringinfo.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

#include "api/lifecycle.h"
#include "errors.h"
#include "guc.h"
#include "memcap.h"
#include "session/session.h"

/* 42602 for a name no shared table can have, at create and at open alike. */
static void
check_name(const char *name)
{
	if (name[0] == '\0' || strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid shared cpht table name \"%s\"", cpht_echo_name(name)),
				 errdetail("A name has 1 to %d bytes.", NAMEDATALEN - 1)));
}

/*
 * Creating a shared table takes one of the worker's cpht.max_shared_tables
 * slots and a name every session of the database sees, and a durable one
 * costs WAL and disk: like CREATE SCHEMA, it needs CREATE on the database,
 * which PostgreSQL grants only to the database's owner (and superusers)
 * unless someone grants it.  Checked here, before anything goes to the
 * worker.  durable is a parameter of cpht_create, which stays executable
 * by PUBLIC for private tables, so this check is what guards durable
 * tables too.
 */
static void
check_create_privilege(const char *name, bool durable)
{
	if (pg_database_aclcheck(MyDatabaseId, GetUserId(), ACL_CREATE) != ACLCHECK_OK)
	{
		char	   *db = get_database_name(MyDatabaseId);
		char	   *role = GetUserNameFromId(GetUserId(), false);

		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to create %s cpht table \"%s\"",
						durable ? "durable shared" : "shared", name),
				 errdetail("Creating a shared cpht table needs the CREATE privilege on database \"%s\".",
						   db ? db : "?"),
				 errhint("A superuser or the database's owner can grant it: GRANT CREATE ON DATABASE %s TO %s.",
						 quote_identifier(db ? db : "?"), quote_identifier(role))));
	}
}

/* Changing an owner takes effect at once: no rollback would undo it. */
static void
refuse_transaction_block(const char *what)
{
	if (cpht_ddl_in_block())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("%s cannot run inside a transaction block", what),
				 errdetail("Changing the owner of a shared cpht table takes effect at once and cannot be rolled back."),
				 errhint("Run it on its own, outside BEGIN ... COMMIT and outside functions with EXCEPTION blocks.")));
}

static int32 find_by_name(const char *name, CphtCatalogEntry *copy);

/*
 * cpht_create(..., if_not_exists => true) of a name this session sees: the
 * table's handle, with a NOTICE, as CREATE TABLE IF NOT EXISTS skips.  A
 * table that differs in what the caller relies on for its data (durable:
 * whether it survives a crash; transactional: whether a rollback undoes
 * writes) is an ERROR, since going on would silently break that; one
 * that differs in layout alone (kind, key width) is named in the NOTICE.
 * The capacity is not compared: tables grow.
 */
static int32
existing_table(const char *name, int32 entry, const CphtCatalogEntry *e, bool durable,
			   bool transactional, cpht_kind kind, int key_bits)
{
	StringInfoData diff;

	cpht_shared_check_privileges(name, e->owner);
	initStringInfo(&diff);
	if (e->durable != durable || e->transactional != transactional)
	{
		if (e->durable != durable)
			appendStringInfo(&diff, " It is %sdurable.", e->durable ? "" : "not ");
		if (e->transactional != transactional)
			appendStringInfo(&diff, " It is %stransactional.", e->transactional ? "" : "not ");
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("shared cpht table \"%s\" already exists with another definition", name),
				 errdetail_internal("%s", diff.data + 1),
				 errhint("Open it with cpht_open(%s), or drop it first.", quote_literal_cstr(name))));
	}
	if (e->kind != kind)
		appendStringInfo(&diff, " Its kind is %s.", cpht_kind_name(e->kind));
	if (e->key_bits != key_bits)
	{
		if (e->key_bits == 0)
			appendStringInfoString(&diff, " Its key width follows the keys.");
		else
			appendStringInfo(&diff, " Its keys have %d bits.", e->key_bits);
	}
	ereport(NOTICE,
			(errcode(ERRCODE_DUPLICATE_OBJECT),
			 errmsg("shared cpht table \"%s\" already exists, skipping", name),
			 diff.len > 0 ? errdetail_internal("%s", diff.data + 1) : 0));
	return cpht_shared_register(entry, e)->handle;
}

/*
 * cpht_create(capacity, kind, key_bits, transactional, name): without a
 * name, a private table as in 0.1; with one, a shared table.  Not STRICT
 * because name defaults to NULL, so a NULL among the other arguments gives
 * NULL here as STRICT did.
 */
/*
 * A LOG line for each shared table created or dropped, with who and which
 * (log_statement = ddl does not see them: they are function calls).
 * Dropping a durable table discards its keys for good.
 */
static void
log_table_event(const char *name, bool durable, bool created)
{
	const char *db = get_database_name(MyDatabaseId);

	cpht_ddl_log(name, durable, created, db ? db : "?", GetUserNameFromId(GetUserId(), false));
}

/* While valid, the owner of the shared tables created (a restore's rows:
 * catalog_sync.c), instead of the current role. */
static Oid	create_owner = InvalidOid;

void
cpht_shared_create_as(Oid owner)
{
	create_owner = owner;
}

PG_FUNCTION_INFO_V1(cpht_create_named);
Datum
cpht_create_named(PG_FUNCTION_ARGS)
{
	const char *name;
	cpht_params params;
	uint64		bytes;
	CphtRequest *req;
	CphtReply  *rep;
	CphtCatalogEntry copy;
	int32		entry;

	bool		durable = false;
	bool		if_not_exists = false;

	/* key_bits (argument 2) may be NULL: the key width follows the keys;
	 * so may shards (argument 5): cpht.shards (cpht_create_shards_arg) */
	for (int a = 0; a < 4; a++)
		if (a != 2 && PG_ARGISNULL(a))
			PG_RETURN_NULL();
	if (PG_NARGS() > 6)
	{
		if (PG_ARGISNULL(6))
			PG_RETURN_NULL();
		durable = PG_GETARG_BOOL(6);
	}
	if (PG_NARGS() > 7)
	{
		if (PG_ARGISNULL(7))
			PG_RETURN_NULL();
		if_not_exists = PG_GETARG_BOOL(7);
	}
	if (durable && cpht_create_shards_arg(fcinfo, true) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a durable cpht table cannot be sharded"),
				 errdetail("Snapshots of durable tables hold one table's slots."),
				 errhint("Create the durable table with shards => 1.")));
	if (PG_NARGS() < 5 || PG_ARGISNULL(4))
	{
		if (durable)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a durable cpht table needs a name"),
					 errdetail("Only shared tables, which the cpht worker holds, can be durable."),
					 errhint("Pass name => '...' with durable => true, with cpht in shared_preload_libraries.")));
		return cpht_create(fcinfo);
	}

	name = text_to_cstring(PG_GETARG_TEXT_PP(4));
	cpht_client_require_preload(durable ? "cpht_create with durable => true" : "cpht_create with a name");
	check_name(name);
	check_create_privilege(name, durable);

	bytes = cpht_create_params(PG_GETARG_INT64(0), text_to_cstring(PG_GETARG_TEXT_PP(1)),
							   PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2), cpht_create_shards_arg(fcinfo, durable), &params);

	/*
	 * The name is this transaction's until it ends (client/ddl_xact.c): a
	 * session creating or dropping it meanwhile waits, and then sees what
	 * this one committed.  The worker creates shared tables only once it
	 * restored the durable ones: a new table must not take the name of
	 * one not back yet.
	 */
	cpht_ddl_lock_name(name);
	cpht_shared_wait_restored();
	entry = find_by_name(name, &copy);
	if (entry >= 0 && copy.state == CPHT_ENTRY_LIVE)
	{
		if (!if_not_exists)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("shared cpht table \"%s\" already exists", name),
					 errhint("Open it with cpht_open(%s), pass if_not_exists => true, or drop it first.",
							 quote_literal_cstr(name))));
		PG_RETURN_INT32(existing_table(name, entry, &copy, durable, PG_GETARG_BOOL(3),
									   params.kind, params.auto_key_bits ? 0 : params.key_bits));
	}
	/* A role capped by cpht.max_memory gets no larger table this way. */
	cpht_memory_check(bytes, "shared cpht table");
	/* the GPU as the cpht worker found it (tableref/tableref.c) */
	params.device = cpht_choose_device();
	bytes = cpht_create_fit_gpus(fcinfo, durable, &params, bytes, "shared cpht table");
	params.seed = cpht_new_seed();
	params.cpu_threads = cpht_cpu_threads;

	req = cpht_client_request();
	req->op = CPHT_OP_CREATE;
	req->params = params;
	req->capacity = PG_GETARG_INT64(0);
	req->transactional = PG_GETARG_BOOL(3);
	req->durable = durable;
	/* inside a transaction block: undone by a rollback, seen by others
	 * once it commits */
	req->create_xid = cpht_ddl_create_xid(durable);
	namestrcpy(&req->name, name);
	req->dboid = MyDatabaseId;
	req->owner = OidIsValid(create_owner) ? create_owner : GetUserId();
	/*
	 * The table keeps this session's cap (the worker's quota.c): settled
	 * by cpht_memory_check above, and only a superuser can change it; or
	 * the owner role's own, where that is smaller (a superuser, uncapped,
	 * creating it after SET ROLE to a capped role).
	 */
	req->memory_cap_kb = cpht_max_memory_kb;
	{
		int			role_cap = cpht_memory_role_cap_kb(req->owner);

		if (role_cap > 0 && (req->memory_cap_kb <= 0 || role_cap < req->memory_cap_kb))
			req->memory_cap_kb = role_cap;
	}
	rep = cpht_client_send();
	if (rep->status != CPHT_OK)
		cpht_check_status(rep->status, 0, rep->message);
	entry = rep->entry;

	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	copy = cpht_catalog[entry];
	LWLockRelease(cpht_control->catalog_lock);
	copy.table_id = rep->table_id;	/* even if dropped since */
	if (TransactionIdIsValid(req->create_xid))
		cpht_ddl_note_create(entry, rep->table_id, name);
	log_table_event(name, durable, true);
	/* pg_dump carries the definition (client/catalog_rows.c) */
	cpht_catalog_row_created(name, req->owner, text_to_cstring(PG_GETARG_TEXT_PP(1)),
							 PG_GETARG_INT64(0), PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2),
							 req->transactional, durable, params.shards);
	PG_RETURN_INT32(cpht_shared_register(entry, &copy)->handle);
}

/*
 * The catalog entry of a name in this database (LIVE or LOST) that this
 * session sees (client/ddl_xact.c: not created by a transaction that has
 * not committed, not dropped by this one), copied into *copy; -1 when
 * there is none.
 */
static int32
find_by_name(const char *name, CphtCatalogEntry *copy)
{
	int32		entry = -1;

	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];

		if ((e->state == CPHT_ENTRY_LIVE || e->state == CPHT_ENTRY_LOST) &&
			e->dboid == MyDatabaseId && strcmp(NameStr(e->name), name) == 0 &&
			cpht_shared_entry_visible(i, e))
		{
			entry = i;
			*copy = *e;
			break;
		}
	}
	LWLockRelease(cpht_control->catalog_lock);
	return entry;
}

bool
cpht_shared_exists(const char *name)
{
	CphtCatalogEntry copy;

	cpht_shared_wait_restored();
	return find_by_name(name, &copy) >= 0 && copy.state == CPHT_ENTRY_LIVE;
}

/* cpht_open(name): this session's handle of a shared table. */
PG_FUNCTION_INFO_V1(cpht_open);
Datum
cpht_open(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(cpht_open_name(text_to_cstring(PG_GETARG_TEXT_PP(0)), "cpht_open"));
}

int32
cpht_open_name(const char *name, const char *what)
{
	CphtCatalogEntry copy;
	int32		entry = -1;

	cpht_client_require_preload(what);
	/* a name no table can have is a wrong name, not a missing table */
	check_name(name);

	/*
	 * Tables the worker is still restoring are open to no one: the restore
	 * installs them one by one and may still replay WAL into them.
	 */
	cpht_shared_wait_restored();
	entry = find_by_name(name, &copy);
	/*
	 * A standby's worker holds the durable tables only to roll their files
	 * forward along replay (durable_standby.c): no session reads them there,
	 * and a name missing there may well be one not restored yet.
	 */
	if (RecoveryInProgress() && (entry < 0 || copy.durable))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("durable shared cpht tables are not available on a standby"),
				 errdetail("The cpht worker of a standby keeps the files of durable shared tables such as \"%s\" up to date, and opens the tables when the server is promoted.", name),
				 errhint("Read the table on the primary.")));
	if (entry < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("shared cpht table \"%s\" does not exist", name),
				 errdetail("Only shared tables have names; a table created without a name is reached by the handle cpht_create returned."),
				 errhint("Create it with cpht_create(..., name => %s).", quote_literal_cstr(name))));
	if (copy.state == CPHT_ENTRY_LOST)
		cpht_shared_lost_error(&copy);
	cpht_shared_check_privileges(name, copy.owner);

	return cpht_shared_register(entry, &copy)->handle;
}

/* ---- cpht_drop on a shared handle ---------------------------------------- */

static int32
handle_arg(FunctionCallInfo fcinfo)
{
	return PG_GETARG_INT32(0);
}

/* A lost table has no memory left to free: dropping it frees its name. */
static bool
drop_lost(CphtHandleEntry *h)
{
	int32		entry = cpht_tableref_shared_entry(h->shared_tableref);
	CphtCatalogEntry *e;
	bool		dropped = false;

	if (entry < 0)
		return false;
	e = &cpht_catalog[entry];
	LWLockAcquire(cpht_control->catalog_lock, LW_EXCLUSIVE);
	if (e->state == CPHT_ENTRY_LOST && e->table_id == cpht_tableref_shared_table_id(h->shared_tableref))
	{
		if (!has_privs_of_role(GetUserId(), e->owner))
		{
			LWLockRelease(cpht_control->catalog_lock);
			cpht_shared_check_privileges(NameStr(e->name), e->owner);
		}
		e->state = CPHT_ENTRY_FREE;
		dropped = true;
	}
	LWLockRelease(cpht_control->catalog_lock);
	if (dropped)
		cpht_tableref_shared_forget(h->shared_tableref);
	return dropped;
}

/*
 * Drops the table for every session: at once outside a transaction block;
 * inside one at commit (client/ddl_xact.c), the table and its keys staying
 * for other sessions until then and for good if it rolls back.  A lost
 * table's name is freed at once, in a block too: nothing of it is left.
 */
Datum
cpht_shared_drop(PG_FUNCTION_ARGS)
{
	int32		handle = handle_arg(fcinfo);
	CphtSharedRef ref;
	char		name[NAMEDATALEN];

	/* a handle this session did not open yet is looked up by its number */
	CphtHandleEntry *h = cpht_handles_use(handle);
	int32		entry = cpht_tableref_shared_entry(h->shared_tableref);
	bool		lost;

	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	lost = entry >= 0 &&
		cpht_catalog[entry].state == CPHT_ENTRY_LOST &&
		cpht_catalog[entry].table_id == cpht_tableref_shared_table_id(h->shared_tableref);
	LWLockRelease(cpht_control->catalog_lock);

	if (lost)
	{
		NameData	lost_name = cpht_catalog[entry].name;
		bool		durable = cpht_catalog[entry].durable;

		if (drop_lost(h))
		{
			log_table_event(NameStr(lost_name), durable, false);
			cpht_catalog_row_dropped(NameStr(lost_name));
			PG_RETURN_VOID();
		}
	}
	/* whether it exists and the role may drop it */
	ref = cpht_shared_ref(handle, name, NULL);
	/* the name is this transaction's until it ends; then check again, a
	 * transaction that held it may have dropped the table */
	cpht_ddl_lock_name(name);
	ref = cpht_shared_ref(handle, NULL, NULL);
	if (cpht_ddl_in_block())
	{
		/* sent, and logged, at commit (ddl_xact.c) */
		cpht_ddl_note_drop(ref.entry, ref.table_id, name, ref.durable);
		cpht_catalog_row_dropped(name);
		PG_RETURN_VOID();
	}
	cpht_remote_drop(&ref);
	log_table_event(name, ref.durable, false);
	cpht_catalog_row_dropped(name);
	cpht_tableref_shared_forget(h->shared_tableref);
	PG_RETURN_VOID();
}

/* cpht_checkpoint(): snapshots of the durable tables that changed, now. */
PG_FUNCTION_INFO_V1(cpht_checkpoint);
Datum
cpht_checkpoint(PG_FUNCTION_ARGS)
{
	CphtRequest *req;

	/*
	 * As CHECKPOINT: a snapshot round writes every changed durable table
	 * of every database and stalls their writers meanwhile.  EXECUTE is
	 * not granted to PUBLIC; this check holds where it was granted anyway,
	 * or where the 0.3 library runs an extension not updated yet.
	 */
	if (!has_privs_of_role(GetUserId(), ROLE_PG_CHECKPOINT))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to run cpht_checkpoint()"),
				 errdetail("Only superusers and roles with privileges of the \"pg_checkpoint\" role may run it."),
				 errhint("A superuser can grant it: GRANT pg_checkpoint TO %s.",
						 quote_identifier(GetUserNameFromId(GetUserId(), false)))));
	cpht_client_require_preload("cpht_checkpoint");
	req = cpht_client_request();
	req->op = CPHT_OP_CHECKPOINT;
	PG_RETURN_INT32((int32) cpht_client_send()->value);
}

/*
 * cpht_alter_owner(name, new_owner): as ALTER ... OWNER TO.  The caller
 * must have the privileges of the current owner (or be a superuser), be a
 * member of the new owner, and have CREATE on the database, which creating
 * the table would have needed: giving a table away must not let a role
 * hold more tables than it could create.  Takes effect at once, for every
 * session; the worker logs the change of a durable table so that it
 * survives restarts.
 */
PG_FUNCTION_INFO_V1(cpht_alter_owner);
Datum
cpht_alter_owner(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			new_owner = PG_GETARG_OID(1);
	CphtCatalogEntry copy;
	int32		entry;
	CphtRequest *req;

	cpht_client_require_preload("cpht_alter_owner");
	check_name(name);
	/* regrole accepts any number: the role must exist */
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(new_owner)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", new_owner)));
	cpht_shared_wait_restored();
	entry = find_by_name(name, &copy);
	if (entry < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("shared cpht table \"%s\" does not exist", name)));
	if (copy.state == CPHT_ENTRY_LOST)
		cpht_shared_lost_error(&copy);
	cpht_shared_check_privileges(name, copy.owner);
	/* the standby's worker only rolls a durable table's file forward */
	if (copy.durable && RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("durable shared cpht tables are not available on a standby"),
				 errdetail("The owner of durable shared table \"%s\" is changed on the primary.", name)));
	if (copy.owner == new_owner)
		PG_RETURN_VOID();
	if (!superuser())
	{
		check_is_member_of_role(GetUserId(), new_owner);
		if (pg_database_aclcheck(MyDatabaseId, GetUserId(), ACL_CREATE) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to change the owner of shared cpht table \"%s\"", name),
					 errdetail("Changing the owner of a shared cpht table needs the CREATE privilege on the database, as creating one does.")));
	}
	/* whether the role may, then when */
	refuse_transaction_block("changing the owner of a shared cpht table");

	req = cpht_client_request();
	req->op = CPHT_OP_ALTER_OWNER;
	req->entry = entry;
	req->table_id = copy.table_id;
	req->owner = new_owner;
	/* the new owner's own cap bounds what it is given (quota.c) */
	req->memory_cap_kb = cpht_memory_role_cap_kb(new_owner);
	(void) cpht_client_send();
	cpht_catalog_row_owner(name, new_owner);
	PG_RETURN_VOID();
}

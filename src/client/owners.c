/*
 * owners.c — the owner roles of shared tables (cpht in
 * shared_preload_libraries): DROP ROLE, REASSIGN OWNED and DROP OWNED.
 *
 * Shared tables live in the cpht worker, not in pg_class: pg_shdepend does
 * not know them, so PostgreSQL's own checks would let their owner role be
 * dropped and leave them to superusers alone.  Here:
 *
 *   - DROP ROLE of a role that owns shared tables (in any database) is
 *     refused, as PostgreSQL refuses to drop a role that owns objects: an
 *     object access hook (OAT_DROP on pg_authid) raises 2BP01 naming them;
 *   - REASSIGN OWNED BY a TO b gives b the shared tables of a in the
 *     current database, and DROP OWNED BY a drops them, as both do with
 *     a's other objects of the database (a ProcessUtility hook notes the
 *     statement once PostgreSQL ran it and checked its privileges).
 *
 * Changing an owner or dropping a shared table takes effect at once in
 * the worker, which no rollback undoes, while the statements can be
 * rolled back: so, as for DROP EXTENSION (db_drop.c), the backend notes
 * them and tells the worker once the transaction committed.  A DROP ROLE
 * later in the same transaction counts the noted changes: after REASSIGN
 * OWNED BY a TO b (or DROP OWNED BY a), DROP ROLE a is not refused for the
 * tables of a in this database.  A transaction that would be prepared is
 * refused (the changes would commit elsewhere).  The commit callback never
 * raises: a failure is a WARNING.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "client/client.h"

/* REASSIGN OWNED BY old TO new (new valid) or DROP OWNED BY old (new
 * invalid), in this database, at this (sub)transaction nesting level */
typedef struct NotedOwned
{
	Oid			old_owner;
	Oid			new_owner;
	int			level;
} NotedOwned;

/* A statement names a few roles; a transaction runs a few statements. */
#define MAX_NOTED_OWNED 64

static NotedOwned noted[MAX_NOTED_OWNED];
static int	nnoted = 0;

static object_access_hook_type prev_object_access_hook = NULL;
static ProcessUtility_hook_type prev_process_utility = NULL;

/*
 * The owner table e of this database will have once the noted statements
 * took effect, in their order; InvalidOid when one drops it.
 */
static Oid
owner_after_noted(const CphtCatalogEntry *e)
{
	Oid			owner = e->owner;

	if (e->dboid != MyDatabaseId)
		return owner;
	for (int i = 0; i < nnoted && OidIsValid(owner); i++)
		if (noted[i].old_owner == owner)
			owner = noted[i].new_owner;
	return owner;
}

/* DROP ROLE: refused while the role owns shared tables. */
#define NAMED_IN_DETAIL 10

static void
check_drop_role(Oid roleid)
{
	Oid			dbs[NAMED_IN_DETAIL];
	NameData	names[NAMED_IN_DETAIL];
	int			n = 0;

	/* durable tables not restored yet are not in the catalog */
	cpht_shared_wait_restored();
	LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry *e = &cpht_catalog[i];

		if (e->state == CPHT_ENTRY_FREE || owner_after_noted(e) != roleid)
			continue;
		/* named after the lock: get_database_name reads a catalog */
		if (n < NAMED_IN_DETAIL)
		{
			dbs[n] = e->dboid;
			names[n] = e->name;
		}
		n++;
	}
	LWLockRelease(cpht_control->catalog_lock);
	if (n > 0)
	{
		StringInfoData detail;
		char	   *role = GetUserNameFromId(roleid, false);

		initStringInfo(&detail);
		appendStringInfo(&detail, "Role \"%s\" owns %d shared cpht %s:", role, n,
						 n == 1 ? "table" : "tables");
		for (int k = 0; k < Min(n, NAMED_IN_DETAIL); k++)
		{
			char	   *db = get_database_name(dbs[k]);

			appendStringInfo(&detail, "%s \"%s\" in database \"%s\"", k > 0 ? "," : "",
							 NameStr(names[k]), db ? db : "?");
		}
		appendStringInfoString(&detail, n > NAMED_IN_DETAIL ? ", and more." : ".");
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("role \"%s\" cannot be dropped because it owns shared cpht tables", role),
				 errdetail_internal("%s", detail.data),
				 errhint("Give them to another role with cpht_alter_owner() or REASSIGN OWNED, or drop them with cpht_drop() or DROP OWNED, in each database.")));
	}
}

static void
cpht_owners_object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId,
						  void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access == OAT_DROP && classId == AuthIdRelationId && subId == 0 &&
		cpht_control != NULL)
		check_drop_role(objectId);
}

static void
note_owned(Oid old_owner, Oid new_owner)
{
	if (nnoted == MAX_NOTED_OWNED)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many roles reassigned or dropped with their shared cpht tables in one transaction"),
				 errdetail("One transaction can run REASSIGN OWNED and DROP OWNED for at most %d roles.",
						   MAX_NOTED_OWNED)));
	noted[nnoted].old_owner = old_owner;
	noted[nnoted].new_owner = new_owner;
	noted[nnoted].level = GetCurrentTransactionNestLevel();
	nnoted++;
}

static void
cpht_owners_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					ProcessUtilityContext context, ParamListInfo params,
					QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
							 queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);

	/* PostgreSQL ran it: the roles exist and the caller may do it */
	if (cpht_control == NULL)
		return;
	if (IsA(parsetree, ReassignOwnedStmt))
	{
		ReassignOwnedStmt *stmt = (ReassignOwnedStmt *) parsetree;
		Oid			new_owner = get_rolespec_oid(stmt->newrole, false);
		ListCell   *lc;

		/* a slot for the requests at commit, taken while an ERROR may be */
		cpht_client_attach();
		foreach(lc, stmt->roles)
		{
			Oid			old_owner = get_rolespec_oid(lfirst(lc), false);

			if (old_owner != new_owner)
			{
				note_owned(old_owner, new_owner);
				/* the rows in this transaction, the worker at commit */
				cpht_catalog_rows_reassign(old_owner, new_owner);
			}
		}
	}
	else if (IsA(parsetree, DropOwnedStmt))
	{
		DropOwnedStmt *stmt = (DropOwnedStmt *) parsetree;
		ListCell   *lc;

		cpht_client_attach();
		foreach(lc, stmt->roles)
		{
			Oid			old_owner = get_rolespec_oid(lfirst(lc), false);

			note_owned(old_owner, InvalidOid);
			cpht_catalog_rows_reassign(old_owner, InvalidOid);
		}
	}
}

/* Tells the worker to drop table entry or give it new_owner; a WARNING
 * when it cannot. */
static void
tell_worker(int entry, const CphtCatalogEntry *e, Oid new_owner)
{
	CphtReply  *rep = NULL;

	if (cpht_client_idle())
	{
		CphtRequest *req = cpht_client_request();

		req->op = OidIsValid(new_owner) ? CPHT_OP_ALTER_OWNER : CPHT_OP_DROP;
		req->entry = entry;
		req->table_id = e->table_id;
		req->owner = new_owner;
		rep = cpht_client_send_quiet();
	}
	if (rep == NULL || rep->sqlerrcode != 0)
		ereport(WARNING,
				(errmsg("shared cpht table \"%s\" could not be %s", NameStr(e->name),
						OidIsValid(new_owner) ? "given its new owner" : "dropped"),
				 rep == NULL ? errdetail("No cpht worker could be told.") :
				 errdetail("The cpht worker answered: %s", rep->message),
				 OidIsValid(new_owner) ?
				 errhint("Give it to its new owner with cpht_alter_owner().") :
				 errhint("Drop it with cpht_drop(cpht_open(%s)).", quote_literal_cstr(NameStr(e->name)))));
}

/* At commit: the noted statements, on the live tables of this database. */
static void
apply_noted(void)
{
	for (int i = 0; i < cpht_control->max_tables; i++)
	{
		CphtCatalogEntry e;
		Oid			owner;

		LWLockAcquire(cpht_control->catalog_lock, LW_SHARED);
		e = cpht_catalog[i];
		LWLockRelease(cpht_control->catalog_lock);
		if (e.state == CPHT_ENTRY_FREE || e.dboid != MyDatabaseId)
			continue;
		owner = owner_after_noted(&e);
		if (owner == e.owner)
			continue;
		if (e.state == CPHT_ENTRY_LIVE)
			tell_worker(i, &e, owner);
		else
			/* lost, or a durable table the restarted worker restores:
			 * it keeps its owner, which may be gone by now */
			ereport(WARNING,
					(errmsg("shared cpht table \"%s\" could not be %s", NameStr(e.name),
							OidIsValid(owner) ? "given its new owner" : "dropped"),
					 errdetail("It was not available: the cpht worker restarted, or the table was lost."),
					 errhint("Once it is back, a superuser can %s it with %s.",
							 OidIsValid(owner) ? "give" : "drop",
							 OidIsValid(owner) ? "cpht_alter_owner()" : "cpht_drop()")));
	}
}

static void
at_xact_event(XactEvent event, void *arg)
{
	(void) arg;
	if (nnoted == 0)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot prepare a transaction that ran REASSIGN OWNED or DROP OWNED on shared cpht tables"),
					 errdetail("Shared cpht tables change owner or are dropped when the transaction commits in its session.")));
			break;
		case XACT_EVENT_COMMIT:
			apply_noted();
			nnoted = 0;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			nnoted = 0;
			break;
		default:
			break;
	}
}

/* A subtransaction rolled back takes its statements along; one that
 * commits hands them to its parent. */
static void
at_subxact_event(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	(void) mySubid;
	(void) parentSubid;
	(void) arg;
	cpht_noted_subxact_end(event, noted, &nnoted, sizeof(noted[0]), offsetof(NotedOwned, level));
}

void
cpht_owners_init(void)
{
	prev_object_access_hook = object_access_hook;
	object_access_hook = cpht_owners_object_access;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = cpht_owners_utility;
	RegisterXactCallback(at_xact_event, NULL);
	RegisterSubXactCallback(at_subxact_event, NULL);
}

/*
 * durable_wal.c — cpht's WAL records: a durable table's creation, drop and
 * changes of owner, and the keys each call on it inserted or deleted.
 *
 * Only the cpht worker writes them, while it serves the request, so their
 * order in WAL is the order in which the table changed.  Redo does
 * nothing: the startup process never touches a table (and never CUDA);
 * the worker reads these records itself when it starts (durable_restore.c).
 * At the end of recovery the cleanup callback keeps the WAL segments a copy
 * of the data directory needs for that (durable_wal_keep.c).
 */
#include "postgres.h"

#include "access/rmgr.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "lib/stringinfo.h"

#include "worker/durable.h"
#include "worker/durable_internal.h"

static void
cpht_redo(XLogReaderState *record)
{
	(void) record;
}

static const char *
cpht_identify(uint8 info)
{
	switch (info & XLR_RMGR_INFO_MASK)
	{
		case XLOG_CPHT_CREATE:
			return "CREATE";
		case XLOG_CPHT_DROP:
			return "DROP";
		case XLOG_CPHT_PUT:
			return "PUT";
		case XLOG_CPHT_ERASE:
			return "ERASE";
		case XLOG_CPHT_XID:
			return "XID";
		case XLOG_CPHT_EXACT:
			return "EXACT";
		case XLOG_CPHT_OWNER:
			return "OWNER";
	}
	return NULL;
}

const char *
cpht_wal_payload(XLogReaderState *record, uint8 *info)
{
	const char *data = XLogRecGetData(record);
	size_t		len = XLogRecGetDataLen(record);
	uint32		magic;

	if (XLogRecGetRmid(record) != CPHT_RMGR_ID || len < sizeof(uint32))
		return NULL;
	memcpy(&magic, data, sizeof(magic));
	if (magic != CPHT_WAL_MAGIC)
		return NULL;
	*info = XLogRecGetInfo(record) & XLR_RMGR_INFO_MASK;
	switch (*info)
	{
		case XLOG_CPHT_CREATE:
			/* with the memory cap after it, or without (older records),
			 * and the creating xid after the cap, or without */
			return len == sizeof(xl_cpht_create) ||
				len == sizeof(xl_cpht_create) + sizeof(int32) ||
				len == sizeof(xl_cpht_create) + sizeof(int32) + sizeof(TransactionId) ? data : NULL;
		case XLOG_CPHT_DROP:
			return len == sizeof(xl_cpht_drop) ? data : NULL;
		case XLOG_CPHT_OWNER:
			return len == sizeof(xl_cpht_owner) ? data : NULL;
		case XLOG_CPHT_XID:
			return data;
		case XLOG_CPHT_EXACT:
			{
				xl_cpht_exact x;

				if (len < sizeof(x))
					return NULL;
				memcpy(&x, data, sizeof(x));
				return len == sizeof(x) + (size_t) x.ntables * sizeof(xl_cpht_exact_table) ? data : NULL;
			}
		case XLOG_CPHT_PUT:
		case XLOG_CPHT_ERASE:
			return len >= sizeof(xl_cpht_keys) &&
				(len - sizeof(xl_cpht_keys)) % sizeof(uint64) == 0 ? data : NULL;
	}
	return NULL;
}

static void
cpht_desc(StringInfo buf, XLogReaderState *record)
{
	uint8		info;
	const char *data = cpht_wal_payload(record, &info);

	if (data == NULL)
		return;
	switch (info)
	{
		case XLOG_CPHT_CREATE:
			{
				const xl_cpht_create *c = (const xl_cpht_create *) data;

				appendStringInfo(buf, "table \"%s\" of database %u", NameStr(c->name), c->dboid);
				if (TransactionIdIsValid(cpht_wal_create_xid(record)))
					appendStringInfo(buf, " in xid %u", cpht_wal_create_xid(record));
				break;
			}
		case XLOG_CPHT_XID:
			appendStringInfo(buf, "xid %u", XLogRecGetXid(record));
			break;
		case XLOG_CPHT_EXACT:
			appendStringInfo(buf, "tables %u", ((const xl_cpht_exact *) data)->ntables);
			break;
		case XLOG_CPHT_DROP:
			appendStringInfo(buf, "table %X/%X",
							 LSN_FORMAT_ARGS(((const xl_cpht_drop *) data)->table));
			break;
		case XLOG_CPHT_OWNER:
			appendStringInfo(buf, "table %X/%X owner %u",
							 LSN_FORMAT_ARGS(((const xl_cpht_owner *) data)->table),
							 ((const xl_cpht_owner *) data)->owner);
			break;
		default:
			{
				const xl_cpht_keys *k = (const xl_cpht_keys *) data;

				appendStringInfo(buf, "table %X/%X xid %u keys %zu", LSN_FORMAT_ARGS(k->table),
								 k->xid, (XLogRecGetDataLen(record) - sizeof(xl_cpht_keys)) / sizeof(uint64));
			}
	}
}

static RmgrData cpht_rmgr = {
	.rm_name = "cpht",
	.rm_redo = cpht_redo,
	.rm_desc = cpht_desc,
	.rm_identify = cpht_identify,
	/* a copy of the data directory keeps the WAL its restore needs */
	.rm_cleanup = cpht_wal_keep_at_end_of_recovery,
};

void
cpht_wal_register(void)
{
	RegisterCustomRmgr(CPHT_RMGR_ID, &cpht_rmgr);
}

XLogRecPtr
cpht_wal_create(const CphtCatalogEntry *e, const cpht_params *params)
{
	xl_cpht_create rec;
	int32		cap;

	memset(&rec, 0, sizeof(rec));
	rec.magic = CPHT_WAL_MAGIC;
	rec.dboid = e->dboid;
	rec.owner = e->owner;
	rec.name = e->name;
	rec.transactional = e->transactional;
	rec.capacity = e->capacity;
	rec.params = *params;
	cap = e->memory_cap_kb;
	XLogBeginInsert();
	XLogRegisterData((char *) &rec, sizeof(rec));
	XLogRegisterData((char *) &cap, sizeof(cap));
	if (TransactionIdIsValid(e->create_xid))
		XLogRegisterData((char *) &e->create_xid, sizeof(TransactionId));
	return XLogInsert(CPHT_RMGR_ID, XLOG_CPHT_CREATE);
}

TransactionId
cpht_wal_create_xid(XLogReaderState *record)
{
	TransactionId xid = InvalidTransactionId;

	if (XLogRecGetDataLen(record) == sizeof(xl_cpht_create) + sizeof(int32) + sizeof(TransactionId))
		memcpy(&xid, XLogRecGetData(record) + sizeof(xl_cpht_create) + sizeof(int32), sizeof(xid));
	return xid;
}

int32
cpht_wal_create_cap(XLogReaderState *record)
{
	int32		cap = 0;

	if (XLogRecGetDataLen(record) >= sizeof(xl_cpht_create) + sizeof(int32))
		memcpy(&cap, XLogRecGetData(record) + sizeof(xl_cpht_create), sizeof(cap));
	return Max(cap, 0);
}

XLogRecPtr
cpht_wal_drop(XLogRecPtr table)
{
	xl_cpht_drop rec;

	memset(&rec, 0, sizeof(rec));
	rec.magic = CPHT_WAL_MAGIC;
	rec.table = table;
	XLogBeginInsert();
	XLogRegisterData((char *) &rec, sizeof(rec));
	return XLogInsert(CPHT_RMGR_ID, XLOG_CPHT_DROP);
}

XLogRecPtr
cpht_wal_owner(XLogRecPtr table, Oid owner)
{
	xl_cpht_owner rec;

	memset(&rec, 0, sizeof(rec));
	rec.magic = CPHT_WAL_MAGIC;
	rec.owner = owner;
	rec.table = table;
	XLogBeginInsert();
	XLogRegisterData((char *) &rec, sizeof(rec));
	return XLogInsert(CPHT_RMGR_ID, XLOG_CPHT_OWNER);
}

/*
 * Marked unimportant: a round after a checkpoint writes one, and it must
 * not make the next checkpoint of an idle server necessary.
 */
XLogRecPtr
cpht_wal_exact(const xl_cpht_exact_table *tables, uint32 n)
{
	xl_cpht_exact rec;

	memset(&rec, 0, sizeof(rec));
	rec.magic = CPHT_WAL_MAGIC;
	rec.ntables = n;
	XLogBeginInsert();
	XLogSetRecordFlags(XLOG_MARK_UNIMPORTANT);
	XLogRegisterData((char *) &rec, sizeof(rec));
	if (n > 0)
		XLogRegisterData((char *) tables, n * sizeof(xl_cpht_exact_table));
	return XLogInsert(CPHT_RMGR_ID, XLOG_CPHT_EXACT);
}

XLogRecPtr
cpht_wal_keys(uint8 info, XLogRecPtr table, TransactionId xid, const uint64 *keys, uint64 n)
{
	XLogRecPtr	end = InvalidXLogRecPtr;

	for (uint64 off = 0; off < n; off += CPHT_WAL_KEYS_PER_RECORD)
	{
		uint64		m = Min(CPHT_WAL_KEYS_PER_RECORD, n - off);
		xl_cpht_keys rec;

		memset(&rec, 0, sizeof(rec));
		rec.magic = CPHT_WAL_MAGIC;
		rec.xid = xid;
		rec.table = table;
		XLogBeginInsert();
		XLogRegisterData((char *) &rec, sizeof(rec));
		XLogRegisterData((char *) (keys + off), (uint32) (m * sizeof(uint64)));
		end = XLogInsert(CPHT_RMGR_ID, info);
	}
	return end;
}

void
cpht_wal_mark_xid(TransactionId xid)
{
	static TransactionId marked = InvalidTransactionId;
	uint32		magic = CPHT_WAL_MAGIC;

	/* XLogInsert tags the record with the current (sub)transaction's xid */
	Assert(xid == GetCurrentTransactionIdIfAny());
	if (xid == marked)
		return;
	XLogBeginInsert();
	XLogRegisterData((char *) &magic, sizeof(magic));
	(void) XLogInsert(CPHT_RMGR_ID, XLOG_CPHT_XID);
	marked = xid;
}

/*
 * durable_catalog.c — pg_cpht/catalog, the list of durable shared tables
 * the cpht worker keeps next to their snapshot files.
 *
 * Why a file of its own: the WAL CREATE records of old tables are removed
 * as the replication slot moves on, and a snapshot file can go missing or
 * become unreadable, taking the table's name with it; the catalog names
 * every durable table, so that at start each one is accounted for: back,
 * or lost with the reason.  It also records, per table, the WAL position
 * from which the table's file is still exact (current_lsn): a table
 * unchanged since its snapshot needs no WAL from before the last round, so
 * an idle table does not hold WAL back, and its (possibly large) file is
 * not rewritten for that.
 *
 *   header   magic "CPHTCATL", version, entry count, whether the worker
 *            wrote it at a clean shutdown, and the WAL position of that
 *            write
 *   entries  CphtCatalogRecord, one per table
 *   crc      CRC-32C of everything before it
 *
 * Written to pg_cpht/catalog.tmp, fsync'ed, then durable_rename'd over the
 * previous one: a crash leaves the old catalog or the new one.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"

#include "worker/durable.h"

#define CATALOG_MAGIC "CPHTCATL"
#define CATALOG_VERSION 1
#define CATALOG_PATH CPHT_SNAPSHOT_DIR "/catalog"
#define CATALOG_MAX_ENTRIES 1000000

typedef struct CatalogHeader
{
	char		magic[8];
	uint32		version;
	uint32		n;
	uint32		clean;
	uint32		pad;
	XLogRecPtr	at;
} CatalogHeader;

void
cpht_catalog_file_write(const CphtCatalogRecord *recs, int n, bool clean, XLogRecPtr at)
{
	const char *tmp = CATALOG_PATH ".tmp";
	CatalogHeader h;
	pg_crc32c	crc;
	int			fd;
	size_t		bytes = sizeof(h) + sizeof(CphtCatalogRecord) * n + sizeof(crc);
	char	   *buf = palloc0(bytes);

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, CATALOG_MAGIC, sizeof(h.magic));
	h.version = CATALOG_VERSION;
	h.n = n;
	h.clean = clean ? 1 : 0;
	h.at = at;
	memcpy(buf, &h, sizeof(h));
	if (n > 0)
		memcpy(buf + sizeof(h), recs, sizeof(CphtCatalogRecord) * n);
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, bytes - sizeof(crc));
	FIN_CRC32C(crc);
	memcpy(buf + bytes - sizeof(crc), &crc, sizeof(crc));

	fd = OpenTransientFile(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create cpht catalog file \"%s\": %m", tmp)));
	errno = 0;
	if (write(fd, buf, bytes) != (ssize_t) bytes)
	{
		if (errno == 0)
			errno = ENOSPC;
		CloseTransientFile(fd);
		unlink(tmp);
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write cpht catalog file \"%s\": %m", tmp)));
	}
	if (pg_fsync(fd) != 0)
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		unlink(tmp);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not fsync cpht catalog file \"%s\": %m", tmp)));
	}
	if (CloseTransientFile(fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close cpht catalog file \"%s\": %m", tmp)));
	pfree(buf);
	(void) durable_rename(tmp, CATALOG_PATH, ERROR);
}

bool
cpht_catalog_file_read(CphtCatalogRecord **recs, int *n, bool *clean, XLogRecPtr *at,
					   char *why, size_t whylen)
{
	FILE	   *f;
	CatalogHeader h;
	struct stat st;
	pg_crc32c	crc,
				stored;
	CphtCatalogRecord *r = NULL;

	*recs = NULL;
	*n = 0;
	*clean = false;
	*at = InvalidXLogRecPtr;
	why[0] = '\0';
	f = AllocateFile(CATALOG_PATH, PG_BINARY_R);
	if (f == NULL)
	{
		if (errno != ENOENT)
			snprintf(why, whylen, "could not open it: %s", strerror(errno));
		return false;
	}
	if (fstat(fileno(f), &st) != 0 || fread(&h, 1, sizeof(h), f) != sizeof(h) ||
		memcmp(h.magic, CATALOG_MAGIC, sizeof(h.magic)) != 0 || h.version != CATALOG_VERSION ||
		h.n > CATALOG_MAX_ENTRIES ||
		(uint64) st.st_size != sizeof(h) + sizeof(CphtCatalogRecord) * (uint64) h.n + sizeof(crc))
	{
		snprintf(why, whylen, "it is not a cpht catalog of this version, or it is torn");
		FreeFile(f);
		return false;
	}
	r = palloc0(sizeof(CphtCatalogRecord) * Max(h.n, 1));
	if ((h.n > 0 && fread(r, sizeof(CphtCatalogRecord), h.n, f) != h.n) ||
		fread(&stored, 1, sizeof(stored), f) != sizeof(stored))
	{
		snprintf(why, whylen, "it ends early (torn)");
		FreeFile(f);
		pfree(r);
		return false;
	}
	FreeFile(f);
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &h, sizeof(h));
	COMP_CRC32C(crc, r, sizeof(CphtCatalogRecord) * h.n);
	FIN_CRC32C(crc);
	if (!EQ_CRC32C(crc, stored))
	{
		snprintf(why, whylen, "its checksum does not match its contents (corrupt)");
		pfree(r);
		return false;
	}
	for (uint32 i = 0; i < h.n; i++)
		r[i].name.data[NAMEDATALEN - 1] = '\0';
	*recs = r;
	*n = (int) h.n;
	*clean = h.clean != 0;
	*at = h.at;
	return true;
}

/*
 * pg_upgrade starts the old cluster, and then the new one, with -b (binary
 * upgrade) and copies only the relation files and the commit log: pg_cpht/
 * and the WAL its snapshots need are left behind, and the new cluster,
 * with no catalog, would start without a word about the tables.  So the
 * old cluster refuses to start for pg_upgrade while it has durable tables,
 * naming them and saying what to do; the upgrade stops before it changed
 * anything (it starts the old cluster first).  Called by the postmaster
 * while it loads the library; the new cluster, freshly made, has no
 * catalog and starts.
 */
void
cpht_catalog_refuse_binary_upgrade(void)
{
	CphtCatalogRecord *recs;
	int			n;
	bool		clean;
	XLogRecPtr	at;
	char		why[256];
	StringInfoData names;

	if (!IsBinaryUpgrade)
		return;
	if (!cpht_catalog_file_read(&recs, &n, &clean, &at, why, sizeof(why)))
	{
		if (why[0] == '\0')
			return;				/* no catalog: no durable table */
		ereport(FATAL,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht durable tables cannot be carried by pg_upgrade"),
				 errdetail("The catalog of durable tables \"%s\" cannot be read: %s.", CATALOG_PATH, why),
				 errhint("Move directory \"%s\" out of the data directory if it holds no table you need, then run pg_upgrade again.",
						 CPHT_SNAPSHOT_DIR)));
	}
	if (n == 0)
		return;
	initStringInfo(&names);
	for (int i = 0; i < n && i < 10; i++)
		appendStringInfo(&names, "%s\"%s\" (database OID %u)", i > 0 ? ", " : "",
						 NameStr(recs[i].name), recs[i].dboid);
	if (n > 10)
		appendStringInfo(&names, " and %d more", n - 10);
	ereport(FATAL,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cpht durable tables cannot be carried by pg_upgrade"),
			 errdetail_plural("The data directory holds %d durable cpht table: %s.  pg_upgrade copies neither their files nor the WAL they need.",
							  "The data directory holds %d durable cpht tables: %s.  pg_upgrade copies neither their files nor the WAL they need.",
							  n, n, names.data),
			 errhint("Start the server normally, copy each table's keys out (cpht_export_file, or into a table), drop it with cpht_drop, and run pg_upgrade again; then create and fill the tables in the upgraded cluster.")));
}

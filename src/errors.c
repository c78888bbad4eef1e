/*
 * errors.c — turning a cpht_status from the kernels into an ereport.
 *
 * Every status gets its own SQLSTATE so that clients can tell "make the
 * table bigger" from "there is no GPU here" from "the GPU failed" without
 * parsing messages; docs/errors.md lists them.
 */
#include "postgres.h"

#include <ctype.h>

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"

#include "errors.h"

char *
cpht_sentence(const char *message)
{
	char	   *s;
	size_t		len;

	if (message == NULL || message[0] == '\0')
		return pstrdup("No further information was given.");

	s = pstrdup(message);
	len = strlen(s);
	while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == ' '))
		s[--len] = '\0';
	/* Names like cpht or cudaMalloc keep their case. */
	if (strncmp(s, "cpht", 4) != 0 && strncmp(s, "cuda", 4) != 0)
		s[0] = pg_toupper((unsigned char) s[0]);
	if (len > 0 && s[len - 1] != '.')
		s = psprintf("%s.", s);
	return s;
}

void
cpht_check_status(cpht_status status, int32 handle, const char *message)
{
	cpht_check_call(status, handle, message, "No key of this call was stored.");
}

/* errdetail: the kernels' message, then what the undone call left. */
static char *
undone_detail(const char *message, const char *undone)
{
	char	   *s = cpht_sentence(message);

	return undone ? psprintf("%s %s", s, undone) : s;
}

void
cpht_check_call(cpht_status status, int32 handle, const char *message, const char *undone)
{
	switch (status)
	{
		case CPHT_OK:
			return;

		case CPHT_ERR_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
					 errmsg("cpht table %d is full", handle),
					 errdetail("%s", undone_detail(message, undone)),
					 errhint("A table created with cpht.grow off keeps its size, and no table grows past what its key_bits allow: create one with cpht.grow on, or a larger capacity or key_bits, and insert the keys there.")));
			break;

		case CPHT_ERR_NOMEM:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 handle > 0 ?
					 errmsg("out of memory in cpht table %d", handle) :
					 errmsg("out of memory for a new cpht table"),
					 errdetail("%s", cpht_sentence(message))));
			break;

		case CPHT_ERR_INVALID:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("cpht table parameters are out of range"),
					 errdetail("%s", cpht_sentence(message))));
			break;

		case CPHT_ERR_NODEVICE:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("no usable GPU for cpht"),
					 errdetail("%s", cpht_sentence(message)),
					 errhint("Set cpht.device to auto or cpu to create the table on the CPU.")));
			break;

		case CPHT_ERR_CANCELED:

			/*
			 * The kernels stopped because cpht_interrupt_pending() saw a
			 * cancel or terminate request, and undid the call.  Let
			 * PostgreSQL raise its own error for the request; the ereport
			 * below only runs where interrupts are held off.
			 */
			CHECK_FOR_INTERRUPTS();
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("canceling cpht call on table %d", handle),
					 errdetail("%s", undone_detail(message, undone))));
			break;

		case CPHT_ERR_LIMIT:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 handle > 0 ?
					 errmsg("cpht table %d would exceed cpht.max_memory", handle) :
					 errmsg("a new cpht table would exceed cpht.max_memory"),
					 errdetail("%s", undone_detail(message, undone)),
					 handle > 0 ?
					 errhint("A transaction's undo log grows with its changes and a growing table holds its old and new slots at once: commit to free the log, use a table with transactional => false, or ask a superuser to raise cpht.max_memory.") :
					 errhint("Drop tables with cpht_drop(), create a smaller table, or ask a superuser to raise cpht.max_memory.")));
			break;

		case CPHT_ERR_DEVICE:
			ereport(ERROR,
					(errcode(ERRCODE_SYSTEM_ERROR),
					 handle > 0 ?
					 errmsg("GPU operation on cpht table %d failed", handle) :
					 errmsg("GPU operation failed while creating a cpht table"),
					 errdetail("%s", cpht_sentence(message))));
			break;

		case CPHT_ERR_DEVICE_LOST:
			ereport(ERROR,
					(errcode(ERRCODE_SYSTEM_ERROR),
					 handle > 0 ?
					 errmsg("the GPU of cpht table %d failed and is lost", handle) :
					 errmsg("the GPU failed and is lost while creating a cpht table"),
					 errdetail("%s", cpht_sentence(message)),
					 errhint("The GPU tables of the process that held it are gone; create them again.")));
			break;
	}

	/* A status this file does not know means the two sides disagree. */
	ereport(ERROR,
			(errcode(ERRCODE_SYSTEM_ERROR),
			 errmsg("unexpected cpht status %d", (int) status),
			 errdetail("%s", cpht_sentence(message))));
}

const char *
cpht_echo_name(const char *name)
{
	int			len = strlen(name);
	int			clip;

	if (len <= NAMEDATALEN)
		return name;
	clip = pg_mbcliplen(name, len, NAMEDATALEN);
	return psprintf("%.*s...", clip, name);
}

char *
cpht_call_times_sentence(const cpht_call_times *t, bool plural)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "Inside the table %s: ", plural ? "calls" : "call");
	if (t->routed)
		appendStringInfo(&buf, "routed on the GPUs: keys onto the GPUs %.3f ms, routing them to their shards %.3f ms, the shards' calls %.3f ms, answers back to their GPUs %.3f ms, answers off the GPUs %.3f ms, ",
						 t->stage_in, t->exchange_in, t->wait, t->exchange_out, t->copy_out);
	else
		appendStringInfo(&buf, "staging keys %.3f ms, waiting for the device %.3f ms, copying results %.3f ms, ",
						 t->stage_in, t->wait, t->copy_out);
	appendStringInfo(&buf, "undo log %.3f ms", t->undo_log);
	if (t->grows > 0 || t->widens > 0)
		appendStringInfo(&buf, ", growing the table %d times %.3f ms, widening its keys %d times %.3f ms",
						 t->grows, t->grow, t->widens, t->widen);
	appendStringInfoChar(&buf, '.');
	return buf.data;
}

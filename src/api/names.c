/*
 * names.c — the cpht_table type: a shared table named wherever a handle
 * goes.  cpht_count('seen_ids') and cpht_fop_agg('seen_ids', id) reach the
 * shared table of that name.
 *
 * Why a type, and why its value is the handle.  Every function that takes
 * a handle (int) has an overload taking a cpht_table, bound to the same C
 * function.  A cpht_table is four bytes passed by value holding the
 * table's handle, so the overload runs exactly the handle's code.  Its
 * input function reads a name, as regclass reads a relation's, with the
 * checks of cpht_open(name) (the table exists in this database, the role
 * may use it, the worker finished restoring): a string literal is read
 * once, when the statement is parsed (or a parameter when it is bound),
 * never per row.  A shared table's handle is CPHT_SHARED_HANDLE_BASE plus
 * its table id, the same number in every session while the server runs,
 * so the plan's constant means the same table in the leader and in its
 * parallel workers: the planner hooks (plan/hooks.c, plan/new_keys_planner.c)
 * treat a constant cpht_table like a constant handle, and parallel
 * workers reach the table through the leader's handles as they do for the
 * handle form.  The output function prints the name, so EXPLAIN VERBOSE
 * and a view's definition show it (and pg_dump writes names, read again
 * on restore).
 *
 * The other designs, and why not: overloads taking text would read the
 * name on every call (per row in the aggregate) and could not be told
 * from a handle at plan time without a lookup in the planner; making
 * cpht_open(name) parallel safe would still call it per row and register
 * handles in parallel workers, which reach only the leader's.
 *
 * Overload resolution.  The type is in the string category, so an
 * unknown literal ('seen_ids', or an untyped parameter) picks the
 * cpht_table overload, and an integer the int one (cpht_count(1) is
 * unchanged).  An untyped parameter that carries a handle still works:
 * input that is all digits is read as a handle (as regclass reads an OID),
 * checked when a function uses it like any handle; a name spelled in
 * digits is written in double quotes ('"123"'), doubling quotes inside.
 * Text converts implicitly (cpht_count(name_column)), read when the call
 * runs.
 *
 * Limits.  Only shared tables have names: a name of no shared table is
 * 42704, and without cpht in shared_preload_libraries 55000, as for
 * cpht_open.  The value is the table id of the running server: a value
 * stored in a view or a column names that table until it is dropped or the
 * cpht worker restarts (then its calls fail, as a handle's do); after a
 * server restart ids start again, so store names as text, not cpht_table.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"

#include "api/api.h"
#include "api/lifecycle.h"
#include "session/session.h"

/* Whether s is all digits (and some), as the input reads a handle. */
static bool
all_digits(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* The handle a cpht_table's text names: a double-quoted name, digits
 * (a handle, as is), or a name as written. */
static int32
read_table(const char *s, const char *what)
{
	size_t		len = strlen(s);

	if (len >= 2 && s[0] == '"' && s[len - 1] == '"')
	{
		StringInfoData name;

		initStringInfo(&name);
		for (size_t i = 1; i < len - 1; i++)
		{
			appendStringInfoChar(&name, s[i]);
			if (s[i] == '"' && s[i + 1] == '"' && i + 1 < len - 1)
				i++;
		}
		return cpht_open_name(name.data, what);
	}
	if (all_digits(s))
	{
		int64		handle = 0;

		for (const char *p = s; *p; p++)
		{
			handle = handle * 10 + (*p - '0');
			if (handle > PG_INT32_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						 errmsg("cpht handle \"%s\" is out of range", s),
						 errhint("Write a shared table's name made of digits in double quotes: '\"%s\"'.", s)));
		}
		return (int32) handle;
	}
	return cpht_open_name(s, what);
}

PG_FUNCTION_INFO_V1(cpht_table_in);
Datum
cpht_table_in(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(read_table(PG_GETARG_CSTRING(0), "a cpht_table name"));
}

/* cpht_table(text): the implicit cast from text, read when the call runs. */
PG_FUNCTION_INFO_V1(cpht_table_from_text);
Datum
cpht_table_from_text(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(read_table(text_to_cstring(PG_GETARG_TEXT_PP(0)), "a cpht_table name"));
}

/*
 * The name, written so that the input reads it back; the number for a
 * private table's handle, and for a shared one that is gone or the role
 * may not use (as cpht_tables() shows it no such table).
 */
PG_FUNCTION_INFO_V1(cpht_table_out);
Datum
cpht_table_out(PG_FUNCTION_ARGS)
{
	int32		handle = PG_GETARG_INT32(0);
	char		name[NAMEDATALEN];
	StringInfoData buf;

	if (!cpht_shared_name(handle, name))
		PG_RETURN_CSTRING(psprintf("%d", handle));
	if (!all_digits(name) && name[0] != '"')
		PG_RETURN_CSTRING(pstrdup(name));
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '"');
	for (const char *p = name; *p; p++)
	{
		if (*p == '"')
			appendStringInfoChar(&buf, '"');
		appendStringInfoChar(&buf, *p);
	}
	appendStringInfoChar(&buf, '"');
	PG_RETURN_CSTRING(buf.data);
}

/*-------------------------------------------------------------------------
 *
 * sqlite_options.c
 *	  The options of SQLite shards: which exist and what their values may be.
 *
 * Nothing here opens a file: sqlite_connect.c does, with the same value
 * checks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "lib/stringinfo.h"

#include "adapters/sqlite_internal.h"

static const char *const sqlite_server_options[] = {
	"database", "busy_timeout", "journal_mode", NULL
};

static const char *const sqlite_user_mapping_options[] = {
	"user", "password", NULL
};

/*
 * SqliteOptionOk tells whether 'keyword' is an option of SQLite shards
 * for 'catalog'.  A user mapping cannot know its server's dialect when it
 * is validated, so user and password are accepted there and ignored.
 */
bool
SqliteOptionOk(const char *keyword, Oid catalog)
{
	const char *const *list;

	if (catalog == ForeignServerRelationId)
		list = sqlite_server_options;
	else if (catalog == UserMappingRelationId)
		list = sqlite_user_mapping_options;
	else
		return false;

	for (; *list; list++)
		if (strcmp(keyword, *list) == 0)
			return true;
	return false;
}

/*
 * SqliteValidOptions lists the option keywords for 'catalog', for hints.
 */
char *
SqliteValidOptions(Oid catalog)
{
	const char *const *list;
	StringInfoData buf;

	if (catalog == ForeignServerRelationId)
		list = sqlite_server_options;
	else if (catalog == UserMappingRelationId)
		list = sqlite_user_mapping_options;
	else
		return pstrdup("");

	initStringInfo(&buf);
	for (; *list; list++)
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", *list);
	return buf.data;
}

/*
 * SqliteCheckOptions validates an SQLite server's options when it is
 * created or altered: known names, sane values, a database file.  It does
 * not look at the file system: the file, even its directory, may be
 * created later.
 */
void
SqliteCheckOptions(List *options, Oid catalog)
{
	bool		have_database = false;
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);
		const char *value;

		if (!SqliteOptionOk(def->defname, catalog))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\" for an SQLite shard",
							def->defname),
					 errhint("Valid options in this context are: %s.",
							 SqliteValidOptions(catalog))));

		if (catalog != ForeignServerRelationId)
			continue;

		value = defGetString(def);
		if (strcmp(def->defname, "database") == 0)
		{
			const char *problem = SqliteDatabaseProblem(value);

			if (problem != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for option \"database\": \"%s\"",
								value),
						 errdetail("%s", problem),
						 errhint("Give the path of the shard's database file.")));
			have_database = true;
		}
		else if (strcmp(def->defname, "busy_timeout") == 0)
		{
			int			ms;

			if (!SqliteParseBusyTimeout(value, &ms))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for option \"busy_timeout\": \"%s\"",
								value),
						 errdetail("The value must be a whole number of milliseconds, zero or more.")));
		}
		else if (strcmp(def->defname, "journal_mode") == 0)
		{
			if (SqliteJournalMode(value) == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for option \"journal_mode\": \"%s\"",
								value),
						 errhint("Valid values are delete, truncate, persist, memory, wal and off.")));
		}
	}

	if (catalog == ForeignServerRelationId && !have_database)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("option \"database\" is required for an SQLite shard"),
				 errhint("Give the path of the shard's database file, as in OPTIONS (dialect 'sqlite', database '/var/lib/collegedb/b.db').")));
}

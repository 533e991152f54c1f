/*-------------------------------------------------------------------------
 *
 * options.c
 *	  The validator of the collegedb foreign-data wrapper.
 *
 * A server with option 'dialect' is a shard; each dialect's adapter says
 * which further options it understands.  A server without options is a
 * router (the extension creates one, "collegedb").  Credentials belong in
 * user mappings, never in server options, so that they are never readable
 * from pg_foreign_server.  Foreign tables on the router name their key
 * column.
 *
 * Two options carry privileges, as in postgres_fdw and file_fdw: only a
 * superuser may set password_required 'false' on a user mapping (it lets
 * a non-superuser connect to a shard without a password, e.g. as the
 * server's own OS user), and only a superuser or a member of
 * pg_write_server_files may create a server whose options name files on
 * the front's host (CdCapabilities.server_files: collegedb opens them as
 * the server's OS user).
 *
 * Only the option names and values are checked here; nothing connects.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "adapters/adapter.h"

PG_FUNCTION_INFO_V1(collegedb_fdw_validator);

static const char *const table_options[] = {"key_column", "table_name", "schema_name",
"use_remote_estimate", NULL};
static const char *const column_options[] = {"column_name", NULL};

static bool
in_list(const char *name, const char *const *list)
{
	for (int i = 0; list[i]; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

static void
ensure_nonempty(DefElem *def)
{
	if (defGetString(def)[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must not be empty", def->defname)));
}

/*
 * ensure_named checks that every option of 'what' (a foreign table, a
 * column) is one of 'valid' and not empty.
 */
static void
ensure_named(List *options, const char *const *valid, const char *what, const char *hint)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = lfirst(lc);

		if (!in_list(def->defname, valid))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\" for %s", def->defname, what),
					 errhint("%s", hint)));
		ensure_nonempty(def);
	}
}

/*
 * validate_server checks a server's options against its dialect.
 */
static void
validate_server(List *options)
{
	DefElem    *dialect_def = NULL;
	List	   *rest = NIL;
	const CdAdapter *adapter;
	CdDialect	dialect;
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "dialect") == 0)
			dialect_def = def;
		else if (strcmp(def->defname, "user") == 0 || strcmp(def->defname, "password") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("option \"%s\" is not allowed on a collegedb server", def->defname),
					 errhint("Put credentials in a user mapping: CREATE USER MAPPING FOR ... SERVER ... OPTIONS (user '...', password '...').")));
		else
			rest = lappend(rest, def);
	}

	if (dialect_def == NULL)
	{
		if (rest != NIL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
					 errmsg("option \"dialect\" is required for a collegedb shard server"),
					 errhint("Valid dialects are %s; a router server takes no options.",
							 AdapterDialectList("and"))));
		return;
	}

	if (!AdapterParseDialect(defGetString(dialect_def), &dialect))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown dialect \"%s\"", defGetString(dialect_def)),
				 errhint("Valid dialects are %s.", AdapterDialectList("and"))));
	adapter = AdapterForDialect(dialect);

	foreach(lc, rest)
	{
		DefElem    *def = lfirst(lc);

		if (!adapter->option_ok(def->defname, ForeignServerRelationId))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\" for a %s shard", def->defname, adapter->name),
					 errhint("Valid options for %s shards are: %s.", adapter->name,
							 adapter->valid_options(ForeignServerRelationId))));
	}
	adapter->check_options(rest, ForeignServerRelationId);

	if (adapter->caps.server_files && !superuser() &&
		!has_privs_of_role(GetUserId(), ROLE_PG_WRITE_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to create or alter %s shard server", adapter->a_name),
				 errdetail("collegedb opens the database file as the server's operating-system user."),
				 errhint("Only superusers and roles with the privileges of pg_write_server_files may name %s database files.",
						 adapter->display_name)));
}

/*
 * validate_user_mapping checks a user mapping's options.  The mapping does
 * not know its server's dialect: it may take what any adapter takes in a
 * user mapping, and the adapter sees the options at connect time.
 * password_required is the remote layer's (the password rule).
 */
static void
validate_user_mapping(List *options)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "password_required") == 0)
		{
			/*
			 * As in postgres_fdw: clearing it is always allowed (ALTER cannot
			 * see the old value), setting it to false is superuser-only.
			 */
			if (!defGetBoolean(def) && !superuser())
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("password_required=false is superuser-only"),
						 errhint("User mappings with the password_required option set to false may only be created or modified by a superuser.")));
		}
		else if (!AdapterUserMappingOptionOk(def->defname))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\" for a collegedb user mapping", def->defname),
					 errhint("Valid options are %s.",
							 AdapterUserMappingOptions("password_required"))));
	}
}

/*
 * collegedb_fdw_validator checks the options of the wrapper, its servers,
 * user mappings, foreign tables and their columns.
 */
Datum
collegedb_fdw_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	ListCell   *lc;

	switch (catalog)
	{
		case ForeignServerRelationId:
			validate_server(options);
			break;

		case UserMappingRelationId:
			validate_user_mapping(options);
			break;

		case ForeignTableRelationId:
			ensure_named(options, table_options, "a collegedb foreign table",
						 "Valid options are key_column, table_name, schema_name and use_remote_estimate.");
			foreach(lc, options)
			{
				DefElem    *def = lfirst(lc);

				if (strcmp(def->defname, "use_remote_estimate") == 0)
					(void) defGetBoolean(def);	/* rejects what is not a boolean */
			}
			break;

		case AttributeRelationId:
			ensure_named(options, column_options, "a collegedb foreign table column",
						 "The valid option is column_name.");
			break;

		default:
			if (options != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("the collegedb foreign-data wrapper takes no options")));
			break;
	}
	PG_RETURN_VOID();
}

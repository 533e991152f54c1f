/*-------------------------------------------------------------------------
 *
 * pg_options.c
 *	  The options of PostgreSQL shards: libpq's connection keywords on
 *	  servers, the credentials on user mappings.
 *
 * Nothing here connects; pg_connect.c does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"

#include "adapters/pg_internal.h"

/* libpq keywords a server may not set: credentials, and what collegedb sets */
static const char *const server_only_excluded[] = {
	"user", "password", "sslpassword", "client_encoding",
	"fallback_application_name", "replication", "dialect", NULL
};

/*
 * PgOptionOk accepts libpq's connection keywords on servers (but not the
 * credentials, which belong in user mappings, nor the ones collegedb
 * sets itself) and the credentials on user mappings.
 */
bool
PgOptionOk(const char *keyword, Oid catalog)
{
	PQconninfoOption *defs;
	bool		ok = false;

	if (catalog == UserMappingRelationId)
		return strcmp(keyword, "user") == 0 || strcmp(keyword, "password") == 0 ||
			strcmp(keyword, "sslpassword") == 0;
	if (catalog != ForeignServerRelationId)
		return false;
	for (int i = 0; server_only_excluded[i]; i++)
		if (strcmp(keyword, server_only_excluded[i]) == 0)
			return false;

	defs = PQconndefaults();
	if (defs == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	for (PQconninfoOption *o = defs; o->keyword; o++)
	{
		if (strcmp(o->keyword, keyword) == 0 && strchr(o->dispchar, 'D') == NULL)
		{
			ok = true;
			break;
		}
	}
	PQconninfoFree(defs);
	return ok;
}

/*
 * PgCheckOptions checks what libpq would only find at connect time.
 */
void
PgCheckOptions(List *options, Oid catalog)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "connect_timeout") == 0 ||
			strcmp(def->defname, "port") == 0)
		{
			char	   *v = defGetString(def);
			char	   *end;
			long		n = strtol(v, &end, 10);

			if (*v == '\0' || *end != '\0' || n < 0 || n > 65535)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for option \"%s\": \"%s\"", def->defname, v)));
		}
	}
}

char *
PgValidOptions(Oid catalog)
{
	if (catalog == UserMappingRelationId)
		return pstrdup("user, password, sslpassword");
	return pstrdup("the libpq connection keywords (host, port, dbname, sslmode, connect_timeout, ...) except user, password and client_encoding");
}

/*
 * AdapterConninfoHostPort describes where a libpq connection string
 * (keyword/value or URI, as in primary_conninfo) points, as
 * 'host "h", port p' from its first host and port, or NULL when it names
 * no host or cannot be parsed.  Nothing else of the string, which may
 * hold a password, reaches the result.
 */
char *
AdapterConninfoHostPort(const char *conninfo)
{
	PQconninfoOption *opts;
	char	   *host = NULL;
	char	   *port = NULL;
	char	   *result = NULL;

	opts = PQconninfoParse(conninfo, NULL);
	if (opts == NULL)
		return NULL;
	for (PQconninfoOption *o = opts; o->keyword; o++)
	{
		if (o->val == NULL || o->val[0] == '\0')
			continue;
		if (strcmp(o->keyword, "host") == 0 ||
			(host == NULL && strcmp(o->keyword, "hostaddr") == 0))
			host = o->val;
		else if (strcmp(o->keyword, "port") == 0)
			port = o->val;
	}
	if (host)
	{
		int			hlen = strcspn(host, ",");
		int			plen = port ? strcspn(port, ",") : 0;

		result = plen > 0 ?
			psprintf("host \"%.*s\", port %.*s", hlen, host, plen, port) :
			psprintf("host \"%.*s\"", hlen, host);
	}
	PQconninfoFree(opts);
	return result;
}

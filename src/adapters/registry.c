/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  The list of collegedb's dialects: one line per adapter.
 *
 * A dialect is its adapter's position here (CdDialect).  This is the one
 * place in collegedb that names the adapters; everything else asks an
 * adapter for what differs (see adapter.h).  Adding a dialect is writing
 * its adapter and adding it below (src/README.md, "Adding a dialect").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_user_mapping.h"
#include "lib/stringinfo.h"

#include "adapters/adapter.h"
#include "adapters/dialects.h"

static const CdAdapter *const adapters[] = {
	&CdPostgresAdapter,
	&CdSqliteAdapter,
	&CdMysqlAdapter,
};

StaticAssertDecl(lengthof(adapters) <= CD_MAX_DIALECTS,
				 "raise CD_MAX_DIALECTS");

/*
 * AdapterCount returns how many dialects there are.
 */
int
AdapterCount(void)
{
	return lengthof(adapters);
}

/*
 * AdapterForDialect returns the operations table of a dialect.
 */
const CdAdapter *
AdapterForDialect(CdDialect dialect)
{
	if (dialect < 0 || dialect >= lengthof(adapters))
		elog(ERROR, "unknown collegedb dialect %d", (int) dialect);
	return adapters[dialect];
}

/*
 * AdapterParseDialect maps a 'dialect' option value to its dialect, by the
 * adapters' names and aliases; false when it is none of them.
 */
bool
AdapterParseDialect(const char *name, CdDialect *dialect)
{
	for (int d = 0; d < lengthof(adapters); d++)
	{
		const char *const *alias = adapters[d]->aliases;

		if (strcmp(name, adapters[d]->name) == 0)
		{
			*dialect = d;
			return true;
		}
		for (; alias && *alias; alias++)
		{
			if (strcmp(name, *alias) == 0)
			{
				*dialect = d;
				return true;
			}
		}
	}
	return false;
}

/*
 * AdapterDialectName returns the canonical name of a dialect.
 */
const char *
AdapterDialectName(CdDialect dialect)
{
	return AdapterForDialect(dialect)->name;
}

/*
 * AdapterDialectList names every dialect, for hints: "a, b and c" (or
 * another conjunction).
 */
char *
AdapterDialectList(const char *conjunction)
{
	List	   *names = NIL;

	for (int d = 0; d < lengthof(adapters); d++)
		names = lappend(names, (char *) adapters[d]->name);
	return AdapterWordList(names, conjunction);
}

/*
 * AdapterUserMappingOptionOk says whether some dialect takes 'keyword' in
 * a user mapping: a mapping is validated without its server's dialect.
 */
bool
AdapterUserMappingOptionOk(const char *keyword)
{
	for (int d = 0; d < lengthof(adapters); d++)
		if (adapters[d]->option_ok(keyword, UserMappingRelationId))
			return true;
	return false;
}

/*
 * AdapterUserMappingOptions lists, for hints, the user-mapping options any
 * dialect takes, then 'also' (NULL: nothing more): "a, b and c".
 */
char *
AdapterUserMappingOptions(const char *also)
{
	List	   *words = NIL;

	for (int d = 0; d < lengthof(adapters); d++)
	{
		char	   *list = pstrdup(adapters[d]->valid_options(UserMappingRelationId));
		char	   *save = NULL;

		for (char *w = strtok_r(list, ", ", &save); w; w = strtok_r(NULL, ", ", &save))
		{
			ListCell   *lc;
			bool		seen = false;

			foreach(lc, words)
				seen |= strcmp(lfirst(lc), w) == 0;
			if (!seen)
				words = lappend(words, w);
		}
	}
	if (also)
		words = lappend(words, (char *) also);
	return AdapterWordList(words, "and");
}

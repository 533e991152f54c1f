/*-------------------------------------------------------------------------
 *
 * mysql_options.c
 *	  The options of MySQL/MariaDB shards: which exist, their values, and
 *	  how they become libmariadb's connection options.
 *
 * Nothing here connects; mysql.c does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "utils/builtins.h"

#include "adapters/mysql_internal.h"

/* option catalog */
typedef enum CdMysqlOptKind
{
	CD_MYSQL_OPT_STRING,
	CD_MYSQL_OPT_PORT,
	CD_MYSQL_OPT_POSITIVE_INT,
	CD_MYSQL_OPT_BOOL,
	CD_MYSQL_OPT_SSL_MODE
} CdMysqlOptKind;

typedef struct CdMysqlOptionDef
{
	const char *keyword;
	Oid			catalog;
	CdMysqlOptKind kind;
	bool		tls;			/* meaningless with ssl_mode DISABLED */
} CdMysqlOptionDef;

static const CdMysqlOptionDef cd_mysql_option_defs[] = {
	{"host", ForeignServerRelationId, CD_MYSQL_OPT_STRING, false},
	{"port", ForeignServerRelationId, CD_MYSQL_OPT_PORT, false},
	{"dbname", ForeignServerRelationId, CD_MYSQL_OPT_STRING, false},
	{"socket", ForeignServerRelationId, CD_MYSQL_OPT_STRING, false},
	{"connect_timeout", ForeignServerRelationId, CD_MYSQL_OPT_POSITIVE_INT, false},
	{"ssl_mode", ForeignServerRelationId, CD_MYSQL_OPT_SSL_MODE, false},
	{"ssl_key", ForeignServerRelationId, CD_MYSQL_OPT_STRING, true},
	{"ssl_cert", ForeignServerRelationId, CD_MYSQL_OPT_STRING, true},
	{"ssl_ca", ForeignServerRelationId, CD_MYSQL_OPT_STRING, true},
	{"ssl_capath", ForeignServerRelationId, CD_MYSQL_OPT_STRING, true},
	{"ssl_cipher", ForeignServerRelationId, CD_MYSQL_OPT_STRING, true},
	{"ssl_verify_server_cert", ForeignServerRelationId, CD_MYSQL_OPT_BOOL, true},
	{"tls_version", ForeignServerRelationId, CD_MYSQL_OPT_STRING, true},
	{"user", UserMappingRelationId, CD_MYSQL_OPT_STRING, false},
	{"password", UserMappingRelationId, CD_MYSQL_OPT_STRING, false},
};

static const struct
{
	const char *name;
	CdMysqlSslMode mode;
}			cd_mysql_ssl_modes[] = {
	{"disabled", CD_MYSQL_SSL_DISABLED},
	{"preferred", CD_MYSQL_SSL_PREFERRED},
	{"required", CD_MYSQL_SSL_REQUIRED},
	{"verify_ca", CD_MYSQL_SSL_VERIFY_CA},
	{"verify_identity", CD_MYSQL_SSL_VERIFY_IDENTITY},
};


/*
 * MysqlFindOption returns the definition of an option keyword, or NULL.
 */
static const CdMysqlOptionDef *
MysqlFindOption(const char *keyword)
{
	for (int i = 0; i < lengthof(cd_mysql_option_defs); i++)
	{
		if (strcmp(cd_mysql_option_defs[i].keyword, keyword) == 0)
			return &cd_mysql_option_defs[i];
	}
	return NULL;
}

/*
 * MysqlParseInt parses a whole decimal integer within [min, max].
 */
static bool
MysqlParseInt(const char *value, long min, long max, long *result)
{
	char	   *end;
	long		v;

	if (value == NULL || *value == '\0')
		return false;
	errno = 0;
	v = strtol(value, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return false;
	*result = v;
	return true;
}

/*
 * MysqlParseSslMode maps an ssl_mode value (case-insensitive, MySQL's
 * names) to its enum; false when unknown.
 */
static bool
MysqlParseSslMode(const char *value, CdMysqlSslMode *mode)
{
	for (int i = 0; i < lengthof(cd_mysql_ssl_modes); i++)
	{
		if (pg_strcasecmp(value, cd_mysql_ssl_modes[i].name) == 0)
		{
			*mode = cd_mysql_ssl_modes[i].mode;
			return true;
		}
	}
	return false;
}

/*
 * MysqlOptionOk says whether 'keyword' is a mysql-dialect option of the
 * catalog 'catalog'.
 */
bool
MysqlOptionOk(const char *keyword, Oid catalog)
{
	const CdMysqlOptionDef *def = MysqlFindOption(keyword);

	return def != NULL && def->catalog == catalog;
}

/*
 * MysqlValidOptions lists the option keywords of 'catalog' for hints.
 */
char *
MysqlValidOptions(Oid catalog)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < lengthof(cd_mysql_option_defs); i++)
	{
		if (cd_mysql_option_defs[i].catalog != catalog)
			continue;
		if (buf.len > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoString(&buf, cd_mysql_option_defs[i].keyword);
	}
	return buf.data;
}

/*
 * MysqlCheckOptions validates option values at CREATE/ALTER SERVER and USER
 * MAPPING time.  Nothing is required: the host defaults to localhost (the
 * default Unix socket) and a shard may run without a default database.
 * Unknown keywords are left to the caller, which checks them with
 * MysqlOptionOk.
 */
void
MysqlCheckOptions(List *options, Oid catalog)
{
	ListCell   *lc;
	CdMysqlSslMode ssl_mode = CD_MYSQL_SSL_UNSET;
	const char *tls_option = NULL;
	int			verify = -1;

	foreach(lc, options)
	{
		DefElem    *def = lfirst_node(DefElem, lc);
		const CdMysqlOptionDef *od = MysqlFindOption(def->defname);
		char	   *value;
		long		n;
		bool		b;

		if (od == NULL || od->catalog != catalog)
			continue;
		value = defGetString(def);

		switch (od->kind)
		{
			case CD_MYSQL_OPT_STRING:
				break;
			case CD_MYSQL_OPT_PORT:
				if (!MysqlParseInt(value, 1, 65535, &n))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("invalid value for option \"%s\": \"%s\"",
									def->defname, value),
							 errdetail("The port must be an integer between 1 and 65535.")));
				break;
			case CD_MYSQL_OPT_POSITIVE_INT:
				if (!MysqlParseInt(value, 1, INT_MAX, &n))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("invalid value for option \"%s\": \"%s\"",
									def->defname, value),
							 errdetail("The value must be a positive integer (seconds).")));
				break;
			case CD_MYSQL_OPT_BOOL:
				if (!parse_bool(value, &b))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("invalid value for option \"%s\": \"%s\"",
									def->defname, value),
							 errdetail("The value must be a Boolean.")));
				verify = b ? 1 : 0;
				break;
			case CD_MYSQL_OPT_SSL_MODE:
				if (!MysqlParseSslMode(value, &ssl_mode))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("invalid value for option \"%s\": \"%s\"",
									def->defname, value),
							 errdetail("Valid values are disabled, preferred, required, verify_ca and verify_identity.")));
				break;
		}

		if (od->tls && !(od->kind == CD_MYSQL_OPT_BOOL && verify == 0))
			tls_option = od->keyword;
	}

	if (ssl_mode == CD_MYSQL_SSL_DISABLED && tls_option != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" conflicts with ssl_mode \"disabled\"",
						tls_option)));
	if ((ssl_mode == CD_MYSQL_SSL_VERIFY_CA ||
		 ssl_mode == CD_MYSQL_SSL_VERIFY_IDENTITY) && verify == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"ssl_verify_server_cert\" conflicts with ssl_mode \"%s\"",
						ssl_mode == CD_MYSQL_SSL_VERIFY_CA ? "verify_ca" : "verify_identity")));
}

/*
 * MysqlStrdup copies an option value with malloc; empty values count as
 * absent.  Sets *oom when malloc fails.
 */
static char *
MysqlStrdup(const char *value, bool *oom)
{
	char	   *copy;

	if (value == NULL || value[0] == '\0')
		return NULL;
	copy = strdup(value);
	if (copy == NULL)
		*oom = true;
	return copy;
}

/*
 * MysqlParamsFree releases the strings of a CdMysqlParams, wiping the
 * password first.
 */
void
MysqlParamsFree(CdMysqlParams *p)
{
	if (p->password)
		explicit_bzero(p->password, strlen(p->password));
	free(p->host);
	free(p->user);
	free(p->password);
	free(p->dbname);
	free(p->socket);
	free(p->ssl_key);
	free(p->ssl_cert);
	free(p->ssl_ca);
	free(p->ssl_capath);
	free(p->ssl_cipher);
	free(p->tls_version);
	memset(p, 0, sizeof(*p));
}

/*
 * MysqlParamsFromInfo fills 'p' from the server and user-mapping options;
 * false when out of memory (the caller frees what was copied).  Values were
 * validated by MysqlCheckOptions; unparsable numbers fall back to defaults
 * rather than failing a connection.
 */
bool
MysqlParamsFromInfo(const CdConnInfo *info, CdMysqlParams *p)
{
	bool		oom = false;

	memset(p, 0, sizeof(*p));
	p->connect_timeout = CD_MYSQL_DEFAULT_CONNECT_TIMEOUT;
	p->ssl_verify = -1;

	for (int i = 0; i < info->noptions; i++)
	{
		const char *k = info->options[i].keyword;
		const char *v = info->options[i].value;
		long		n;
		bool		b;

		if (v == NULL)
			continue;
		if (strcmp(k, "host") == 0)
			p->host = MysqlStrdup(v, &oom);
		else if (strcmp(k, "port") == 0)
			p->port = MysqlParseInt(v, 1, 65535, &n) ? (unsigned int) n : 0;
		else if (strcmp(k, "dbname") == 0)
			p->dbname = MysqlStrdup(v, &oom);
		else if (strcmp(k, "socket") == 0)
			p->socket = MysqlStrdup(v, &oom);
		else if (strcmp(k, "connect_timeout") == 0)
		{
			if (MysqlParseInt(v, 1, INT_MAX, &n))
				p->connect_timeout = (int) n;
		}
		else if (strcmp(k, "ssl_mode") == 0)
			(void) MysqlParseSslMode(v, &p->ssl_mode);
		else if (strcmp(k, "ssl_key") == 0)
			p->ssl_key = MysqlStrdup(v, &oom);
		else if (strcmp(k, "ssl_cert") == 0)
			p->ssl_cert = MysqlStrdup(v, &oom);
		else if (strcmp(k, "ssl_ca") == 0)
			p->ssl_ca = MysqlStrdup(v, &oom);
		else if (strcmp(k, "ssl_capath") == 0)
			p->ssl_capath = MysqlStrdup(v, &oom);
		else if (strcmp(k, "ssl_cipher") == 0)
			p->ssl_cipher = MysqlStrdup(v, &oom);
		else if (strcmp(k, "ssl_verify_server_cert") == 0)
		{
			if (parse_bool(v, &b))
				p->ssl_verify = b ? 1 : 0;
		}
		else if (strcmp(k, "tls_version") == 0)
			p->tls_version = MysqlStrdup(v, &oom);
		else if (strcmp(k, "user") == 0)
			p->user = MysqlStrdup(v, &oom);
		else if (strcmp(k, "password") == 0)
			p->password = MysqlStrdup(v, &oom);
	}
	p->password_only = info->require_password;
	return !oom;
}

/*
 * MysqlApplyOptions sets the client options of a fresh handle: timeouts,
 * character set, TLS, no LOAD DATA LOCAL, no option files.  Returns false
 * when the library refuses an option (out of memory).
 */
bool
MysqlApplyOptions(MYSQL *m, const CdMysqlParams *p, unsigned int timeout)
{
	unsigned int zero = 0;
	my_bool		on = 1;
	bool		ok = true;

	ok &= mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &timeout) == 0;
	ok &= mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4") == 0;

	/*
	 * LOAD DATA LOCAL INFILE would let a shard read files of the front's
	 * operating-system user.
	 */
	ok &= mysql_options(m, MYSQL_OPT_LOCAL_INFILE, &zero) == 0;

	/*
	 * Under the password rule only client plugins that send the mapping's
	 * password may answer the server: not one that would use the front's
	 * Kerberos tickets (auth_gssapi_client) or ask questions (dialog).
	 */
	if (p->password_only)
		ok &= mysql_options(m, MARIADB_OPT_RESTRICTED_AUTH,
							"mysql_native_password,client_ed25519,caching_sha2_password,sha256_password") == 0;

	if (p->ssl_mode == CD_MYSQL_SSL_DISABLED)
		return ok;

	if (p->ssl_key)
		ok &= mysql_options(m, MYSQL_OPT_SSL_KEY, p->ssl_key) == 0;
	if (p->ssl_cert)
		ok &= mysql_options(m, MYSQL_OPT_SSL_CERT, p->ssl_cert) == 0;
	if (p->ssl_ca)
		ok &= mysql_options(m, MYSQL_OPT_SSL_CA, p->ssl_ca) == 0;
	if (p->ssl_capath)
		ok &= mysql_options(m, MYSQL_OPT_SSL_CAPATH, p->ssl_capath) == 0;
	if (p->ssl_cipher)
		ok &= mysql_options(m, MYSQL_OPT_SSL_CIPHER, p->ssl_cipher) == 0;
	if (p->tls_version)
		ok &= mysql_options(m, MARIADB_OPT_TLS_VERSION, p->tls_version) == 0;

	/*
	 * In libmariadb MYSQL_OPT_SSL_ENFORCE only asks for TLS: without
	 * certificate verification the handshake silently stays in plain text
	 * when the server lacks TLS, so "required" is checked after connecting.
	 * Verification checks the chain and the host name together: verify_ca
	 * is as strict as verify_identity here.
	 */
	if (p->ssl_mode != CD_MYSQL_SSL_UNSET)
		ok &= mysql_options(m, MYSQL_OPT_SSL_ENFORCE, &on) == 0;
	if (p->ssl_mode == CD_MYSQL_SSL_VERIFY_CA ||
		p->ssl_mode == CD_MYSQL_SSL_VERIFY_IDENTITY || p->ssl_verify >= 0)
	{
		my_bool		verify = (p->ssl_verify != 0);

		ok &= mysql_options(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify) == 0;
	}
	return ok;
}



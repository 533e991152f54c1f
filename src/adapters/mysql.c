/*-------------------------------------------------------------------------
 *
 * mysql.c
 *	  The MySQL/MariaDB adapter: shards reached over libmariadb.
 *
 * This file connects to MySQL and MariaDB servers, runs one statement at a
 * time with its $n parameters interpolated client-side as literals (one
 * round trip, as most MySQL drivers do), hands the buffered result to a
 * row sink with dialect-neutral value kinds, maps the server's and the
 * client library's errors to SQLSTATEs, and validates the foreign-server
 * and user-mapping options of the "mysql" dialect.
 *
 * Every wait goes through the client library's non-blocking API and a
 * latch wait on the connection's socket, so that query cancel,
 * statement_timeout and postmaster death are noticed; an interrupt during
 * a statement cancels it server-side with KILL QUERY sent over a
 * short-lived second connection.
 *
 * It does not cache connections, decide on retries, track transactions or
 * add error context: the remote layer (src/remote/) does.  It does not
 * scan SQL text either: remote/placeholders.c finds the placeholders.
 *
 * mysql.h clashes with PostgreSQL's headers (see the include block below),
 * so no other file includes it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>
#include <sys/socket.h>

#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "adapters/adapter.h"
#include "adapters/lexer.h"
#include "collegedb.h"

/*
 * mysql.h pulls in ma_list.h, which declares list_add(), list_delete(),
 * list_cons(), list_reverse(), list_free(), list_length() and list_walk()
 * for its own LIST type; list_delete(), list_free() and list_length()
 * conflict with pg_list.h.  We never call those functions, so rename the
 * declarations while mysql.h is read and drop the names right after, which
 * leaves PostgreSQL's list API untouched below.  Nothing else clashes.
 */
#define list_add		cd_mariadb_list_add
#define list_delete		cd_mariadb_list_delete
#define list_cons		cd_mariadb_list_cons
#define list_reverse	cd_mariadb_list_reverse
#define list_free		cd_mariadb_list_free
#define list_length		cd_mariadb_list_length
#define list_walk		cd_mariadb_list_walk
#include <mysql.h>
#include <mysqld_error.h>
#include <errmsg.h>
#undef list_add
#undef list_delete
#undef list_cons
#undef list_reverse
#undef list_free
#undef list_length
#undef list_walk

/* MySQL 8 server errors that MariaDB lacks (or numbers differently) */
#define CD_MYSQL_ER_QUERY_TIMEOUT				3024	/* MySQL max_execution_time */
#define CD_MYSQL_ER_LOCK_NOWAIT					3572	/* MySQL NOWAIT */
#define CD_MYSQL_ER_CHECK_CONSTRAINT_VIOLATED	3819	/* MySQL 8.0.16+ */
#define CD_MYSQL_ER_CLIENT_INTERACTION_TIMEOUT	4031	/* MySQL 8.0.24+ only */

/*
 * MariaDB Connector/C's own client errors (CR_EVENT_CREATE_FAILED and up);
 * MySQL servers send nothing in this range.
 */
#define CD_MYSQL_CR_EXT_MIN 5000
#define CD_MYSQL_CR_EXT_MAX 5099

/* the character set number MySQL reports for binary strings */
#define CD_MYSQL_BINARY_CHARSET 63

#define CD_MYSQL_DEFAULT_CONNECT_TIMEOUT 10 /* seconds */
/* parameters one statement may have (MySQL's limit for prepared statements) */
#define CD_MYSQL_MAX_PARAMS 65535

/* the longest key collegedb_tombstones.shard_key holds, in characters */
#define CD_MYSQL_MAX_KEY_LENGTH 512

/* room for the decimal form of any 64-bit integer and a NUL */
#define CD_MYSQL_INTBUF 24

typedef enum CdMysqlSslMode
{
	CD_MYSQL_SSL_UNSET = 0,
	CD_MYSQL_SSL_DISABLED,
	CD_MYSQL_SSL_PREFERRED,
	CD_MYSQL_SSL_REQUIRED,
	CD_MYSQL_SSL_VERIFY_CA,
	CD_MYSQL_SSL_VERIFY_IDENTITY
} CdMysqlSslMode;

/*
 * CdMysqlParams holds what a connection needs to be opened again, which the
 * KILL QUERY connection does.  Strings are malloc'd (NULL when absent): the
 * connection outlives every memory context.
 */
typedef struct CdMysqlParams
{
	char	   *host;
	char	   *user;
	char	   *password;
	char	   *dbname;
	char	   *socket;
	unsigned int port;			/* 0: the library's default */
	int			connect_timeout;	/* seconds */
	CdMysqlSslMode ssl_mode;
	int			ssl_verify;		/* -1 unset, 0 or 1 */
	char	   *ssl_key;
	char	   *ssl_cert;
	char	   *ssl_ca;
	char	   *ssl_capath;
	char	   *ssl_cipher;
	char	   *tls_version;
	bool		password_only;	/* the password rule applies */
} CdMysqlParams;

/* Where an asynchronous statement is (MysqlSend .. MysqlPoll) */
typedef enum CdMysqlPhase
{
	CD_MYSQL_QUERY = 0,			/* running setup[index], then the statement */
	CD_MYSQL_FETCH,				/* streaming the statement's rows */
	CD_MYSQL_NEXT,				/* moving to a further result (a CALL's) */
	CD_MYSQL_FETCH_EXTRA,		/* reading a further result set, to drop it */
	CD_MYSQL_DONE
} CdMysqlPhase;

/* CdMysqlConn is the adapter's connection handle, malloc'd */
typedef struct CdMysqlConn
{
	MYSQL	   *mysql;			/* owned by the client library */
	CdMysqlParams params;

	/* the statement in progress */
	CdMysqlPhase phase;
	bool		started;		/* the current _start call returned a wait */
	int			wait;			/* what it waits for (MYSQL_WAIT_*) */
	int			index;			/* which setup command, nsetup: the statement */
	int			nsetup;
	const char *const *setup;
	char	   *statement;		/* with parameters as literals, in 'context' */
	size_t		statement_len;
	int64		rows;
	bool		midway;			/* sent and not finished */

	/* the result being streamed (mysql_use_result) */
	MYSQL_RES  *res;
	int			ncols;
	MYSQL_FIELD *fields;
	CdValueKind *kinds;
	CdCell	   *cells;
	char	   *bufs;			/* CD_MYSQL_INTBUF bytes per column */

	MemoryContext context;		/* the statement's, reset by each send */
	MemoryContext row_context;	/* reset after each row */
} CdMysqlConn;

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

/* state of one placeholder rewrite */
typedef struct CdMysqlParamState
{
	MYSQL	   *mysql;			/* for charset-aware escaping */
	int			nparams;
	const CdParam *params;
	bool		failed;			/* first failure wins */
	const char *sqlstate;
	char	   *message;
} CdMysqlParamState;

static bool cd_mysql_library_ready = false;

static const char *const mysql_read_words[] = {
	"select", "values", "table", "show", "explain", "describe", "desc", "with", NULL
};

/*
 * "lock": LOCK IN SHARE MODE; "into": SELECT ... INTO OUTFILE, DUMPFILE
 * or variables.
 */
static const char *const mysql_write_words[] = {
	"insert", "update", "delete", "replace", "into", "lock", NULL
};
static const char *const mysql_transaction_words[] = {
	"begin", "start", "commit", "rollback", "savepoint", "release", "xa", NULL
};

/*
 * MySQL's lexical rules: executable comments are code (the server runs
 * /_*!50000 DELETE ... *_/), backslashes escape in literals unless the
 * session has NO_BACKSLASH_ESCAPES (collegedb's sessions do not, but a
 * routed statement can turn it on).
 */
#define MYSQL_LEXER_RULES(backslash) { \
	.backslash_escapes = (backslash), \
	.backtick_idents = true, \
	.hash_comments = true, \
	.dash_comment_space = true, \
	.executable_comments = true, \
	.read_words = mysql_read_words, \
	.write_words = mysql_write_words, \
	.transaction_words = mysql_transaction_words, \
}

static const CdLexerRules mysql_lexer_rules = MYSQL_LEXER_RULES(true);
static const CdLexerRules mysql_lexer_rules_no_backslash = MYSQL_LEXER_RULES(false);

static void MysqlCheckForInterrupts(struct CdMysqlConn *kill);
static void MysqlCloseHandle(MYSQL *m, bool midway);

/*
 * MysqlLexerRules returns the lexical rules a session follows now.
 */
static const CdLexerRules *
MysqlLexerRules(MYSQL *m)
{
	return (m->server_status & SERVER_STATUS_NO_BACKSLASH_ESCAPES) ?
		&mysql_lexer_rules_no_backslash : &mysql_lexer_rules;
}


/* ----------------------------------------------------------------
 *		options
 * ----------------------------------------------------------------
 */

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
static bool
MysqlOptionOk(const char *keyword, Oid catalog)
{
	const CdMysqlOptionDef *def = MysqlFindOption(keyword);

	return def != NULL && def->catalog == catalog;
}

/*
 * MysqlValidOptions lists the option keywords of 'catalog' for hints.
 */
static char *
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
static void
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
static void
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
static bool
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
static bool
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


/* ----------------------------------------------------------------
 *		errors
 * ----------------------------------------------------------------
 */

/*
 * MysqlValidSqlstate says whether a client-library SQLSTATE is worth
 * passing on: five digits or upper-case letters, and not the catch-alls
 * HY000 (general error) or 00000.
 */
static bool
MysqlValidSqlstate(const char *s)
{
	if (s == NULL || strlen(s) != 5)
		return false;
	for (int i = 0; i < 5; i++)
	{
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	}
	return strcmp(s, "HY000") != 0 && strcmp(s, "00000") != 0;
}

/*
 * MysqlSetError fills *err from the last error of 'm': the one place that
 * maps MySQL/MariaDB error numbers to SQLSTATEs.  With 'shard' set, the
 * failure happened while connecting and becomes 08001 naming the shard,
 * with the native message as detail.  Everything is copied out of the
 * handle (AdapterSetError pstrdups), so the caller may close it next.
 */
static void
MysqlSetError(CdRemoteError *err, MYSQL *m, const char *shard)
{
	unsigned int code = mysql_errno(m);
	const char *native = mysql_error(m);
	const char *native_state = mysql_sqlstate(m);
	const char *sqlstate = NULL;
	bool		lost = false;
	char		detail[128];

	if (native == NULL || native[0] == '\0')
		native = code == 0 ? "unknown error" : "no error message available";

	if (shard != NULL)
	{
		char	   *message = psprintf("could not connect to MySQL shard \"%s\"",
									   shard);

		AdapterSetError(err, "08001", true, message, native, NULL);
		pfree(message);
		return;
	}

	switch (code)
	{
		case ER_DUP_ENTRY:
		case ER_DUP_ENTRY_WITH_KEY_NAME:
			sqlstate = "23505"; /* unique_violation */
			break;
		case ER_ROW_IS_REFERENCED:
		case ER_NO_REFERENCED_ROW:
		case ER_ROW_IS_REFERENCED_2:
		case ER_NO_REFERENCED_ROW_2:
			sqlstate = "23503"; /* foreign_key_violation */
			break;
		case ER_BAD_NULL_ERROR:
		case ER_NO_DEFAULT_FOR_FIELD:
			sqlstate = "23502"; /* not_null_violation */
			break;
		case CD_MYSQL_ER_CHECK_CONSTRAINT_VIOLATED:
			sqlstate = "23514"; /* check_violation */
			break;
		case ER_CONSTRAINT_FAILED:
			/* MariaDB's number; MySQL 8 uses 4025 for something else */
			if (native_state && strcmp(native_state, "23000") == 0)
				sqlstate = "23514";
			break;
		case ER_PARSE_ERROR:
		case ER_EMPTY_QUERY:
			sqlstate = "42601"; /* syntax_error */
			break;
		case ER_NO_SUCH_TABLE:
		case ER_BAD_TABLE_ERROR:
		case ER_NO_SUCH_TABLE_IN_ENGINE:
			sqlstate = "42P01"; /* undefined_table */
			break;
		case ER_BAD_FIELD_ERROR:
			sqlstate = "42703"; /* undefined_column */
			break;
		case ER_TABLE_EXISTS_ERROR:
			sqlstate = "42P07"; /* duplicate_table */
			break;
		case ER_CANT_AGGREGATE_2COLLATIONS:
			sqlstate = "42P21"; /* collation_mismatch */
			break;
		case ER_DBACCESS_DENIED_ERROR:
		case ER_TABLEACCESS_DENIED_ERROR:
		case ER_COLUMNACCESS_DENIED_ERROR:
		case ER_SPECIFIC_ACCESS_DENIED_ERROR:
			sqlstate = "42501"; /* insufficient_privilege */
			break;
		case ER_BAD_DB_ERROR:
			sqlstate = "3D000"; /* invalid_catalog_name */
			break;
		case ER_DATA_TOO_LONG:
			sqlstate = "22001"; /* string_data_right_truncation */
			break;
		case ER_WARN_DATA_OUT_OF_RANGE:
		case ER_DATA_OUT_OF_RANGE:
			sqlstate = "22003"; /* numeric_value_out_of_range */
			break;
		case ER_DIVISION_BY_ZERO:
			sqlstate = "22012"; /* division_by_zero */
			break;

			/*
			 * 1366 is a value that does not parse for the column's type
			 * ("Incorrect integer value: 'abc'"), what PostgreSQL reports as
			 * invalid_text_representation; 1292 is nearly always a bad date
			 * or time ("Incorrect datetime value"), hence
			 * invalid_datetime_format.
			 */
		case ER_TRUNCATED_WRONG_VALUE_FOR_FIELD:
			sqlstate = "22P02";
			break;
		case ER_TRUNCATED_WRONG_VALUE:
			sqlstate = "22007";
			break;
		case ER_LOCK_WAIT_TIMEOUT:
		case CD_MYSQL_ER_LOCK_NOWAIT:
			sqlstate = "55P03"; /* lock_not_available */
			break;
		case ER_LOCK_DEADLOCK:
			sqlstate = "40P01"; /* deadlock_detected */
			break;
		case ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION:
		case ER_OPTION_PREVENTS_STATEMENT:
			sqlstate = "25006"; /* read_only_sql_transaction */
			break;
		case ER_QUERY_INTERRUPTED:
		case ER_STATEMENT_TIMEOUT:
		case CD_MYSQL_ER_QUERY_TIMEOUT:
			sqlstate = "57014"; /* query_canceled */
			break;
		case ER_CONNECTION_KILLED:
			/* KILL CONNECTION: the server closes the session */
			sqlstate = "57014";
			lost = true;
			break;
		case ER_SERVER_SHUTDOWN:
			sqlstate = "57P01"; /* admin_shutdown */
			lost = true;
			break;
		case CD_MYSQL_ER_CLIENT_INTERACTION_TIMEOUT:
			/* MariaDB uses 4031 for a missing trigger */
			if (!mariadb_connection(m))
			{
				sqlstate = "08006";
				lost = true;
			}
			break;
		case CR_CONNECTION_ERROR:
		case CR_CONN_HOST_ERROR:
		case CR_UNKNOWN_HOST:
		case CR_SERVER_GONE_ERROR:
		case CR_SERVER_LOST:
		case CR_SERVER_LOST_EXTENDED:
			sqlstate = "08006"; /* connection_failure */
			lost = true;
			break;
		case CR_OUT_OF_MEMORY:
			sqlstate = "53200"; /* out_of_memory */
			lost = true;
			break;
		default:
			break;
	}

	/*
	 * Any other client-library error (out of sync, malformed packet, ...)
	 * leaves the handle in a state we cannot vouch for.
	 */
	if ((code >= CR_MIN_ERROR && code <= CR_MAX_ERROR) ||
		(code >= CD_MYSQL_CR_EXT_MIN && code <= CD_MYSQL_CR_EXT_MAX))
		lost = true;

	if (sqlstate == NULL)
		sqlstate = MysqlValidSqlstate(native_state) ? native_state : "XX000";

	if (native_state != NULL && strlen(native_state) == 5)
		snprintf(detail, sizeof(detail), "MySQL error %u (SQLSTATE %s).",
				 code, native_state);
	else
		snprintf(detail, sizeof(detail), "MySQL error %u.", code);

	AdapterSetError(err, sqlstate, lost, native, detail, NULL);
}


/* ----------------------------------------------------------------
 *		waiting and cancelling
 * ----------------------------------------------------------------
 */

/*
 * MysqlWait waits for what a suspended non-blocking call on 'm' asked for
 * ('status', MYSQL_WAIT_* flags) and returns the events that occurred, to
 * be passed to the matching _cont function, or -1 when the caller should
 * give up: 'deadline' (0: none) passed, or (not 'interruptible') a cancel
 * or termination is pending.  'interruptible': interrupts are serviced
 * meanwhile, and when one throws, 'kill' (if given) has its statement
 * killed on the server first; otherwise it never throws.
 */
static int
MysqlWait(MYSQL *m, int status, CdMysqlConn *kill, bool interruptible,
		  TimestampTz deadline)
{
	pgsocket	sock = mysql_get_socket(m);
	int			events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH;
	TimestampTz lib_deadline = 0;

	if (sock != PGINVALID_SOCKET)
	{
		if (status & (MYSQL_WAIT_READ | MYSQL_WAIT_EXCEPT))
			events |= WL_SOCKET_READABLE;
		if (status & MYSQL_WAIT_WRITE)
			events |= WL_SOCKET_WRITEABLE;
	}
	if (status & MYSQL_WAIT_TIMEOUT)
		lib_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   mysql_get_timeout_value_ms(m));
	if (lib_deadline != 0 || deadline != 0)
		events |= WL_TIMEOUT;

	/* nothing to wait for: let the library go on and fail */
	if ((events & (WL_SOCKET_MASK | WL_TIMEOUT)) == 0)
		return status;

	for (;;)
	{
		long		timeout = -1;
		int			rc;
		int			happened = 0;

		if (interruptible)
			MysqlCheckForInterrupts(kill);
		else if (AdapterStopWaiting())
			return -1;

		if (events & WL_TIMEOUT)
		{
			TimestampTz now = GetCurrentTimestamp();

			/* ours first: it names the timeout in the error */
			if (deadline != 0 && now >= deadline)
				return -1;
			if (lib_deadline != 0 && now >= lib_deadline)
				return MYSQL_WAIT_TIMEOUT;
			if (lib_deadline != 0 && (deadline == 0 || lib_deadline < deadline))
				timeout = TimestampDifferenceMilliseconds(now, lib_deadline);
			else
				timeout = TimestampDifferenceMilliseconds(now, deadline);
		}

		rc = WaitLatchOrSocket(MyLatch, events, sock, timeout,
							   PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
		if (rc & WL_SOCKET_READABLE)
			happened |= (status & MYSQL_WAIT_READ) ? MYSQL_WAIT_READ : MYSQL_WAIT_EXCEPT;
		if (rc & WL_SOCKET_WRITEABLE)
			happened |= MYSQL_WAIT_WRITE;
		if (happened != 0)
			return happened;
		/* latch or timeout: check interrupts and the clock again */
	}
}

/*
 * MysqlConnectHandle runs the non-blocking handshake of 'm' with the
 * parameters 'p' until it is done: true when connected, false on a
 * failure (in the handle) or, with *gave_up set, when MysqlWait gave up.
 */
static bool
MysqlConnectHandle(MYSQL *m, const CdMysqlParams *p, bool interruptible,
				   TimestampTz deadline, bool *gave_up)
{
	MYSQL	   *ret = NULL;

	/*
	 * CLIENT_FOUND_ROWS makes UPDATE report the rows it matched, as
	 * PostgreSQL does, rather than only those it changed.  No
	 * CLIENT_MULTI_STATEMENTS: a second command in a statement is a syntax
	 * error on the server.  The password is never NULL: libmariadb would
	 * then read MYSQL_PWD from the server's environment.
	 */
	int			status = mysql_real_connect_start(&ret, m, p->host, p->user,
												  p->password ? p->password : "",
												  p->dbname, p->port, p->socket,
												  CLIENT_FOUND_ROWS);

	*gave_up = false;
	while (status != 0)
	{
		status = MysqlWait(m, status, NULL, interruptible, deadline);
		if (status < 0)
		{
			*gave_up = true;
			return false;
		}
		status = mysql_real_connect_cont(&ret, m, status);
	}
	if (ret == NULL)
		return false;

	/*
	 * libmariadb switches the socket to blocking mode for the TLS handshake
	 * and leaves it so: TLS reads in the non-blocking API would then block
	 * in the library (seen with 3.3).  Plain connections use MSG_DONTWAIT
	 * and do not care.
	 */
	(void) pg_set_noblock(mysql_get_socket(m));
	return true;
}

/*
 * MysqlQueryHandle runs mysql_real_query on 'm' without blocking; returns
 * its result (0 on success), or -1 when MysqlWait gave up.  'kill': see
 * MysqlWait.
 */
static int
MysqlQueryHandle(MYSQL *m, const char *sql, size_t len, CdMysqlConn *kill,
				 bool interruptible, TimestampTz deadline)
{
	int			ret = 1;
	int			status;

	status = mysql_real_query_start(&ret, m, sql, len);
	while (status != 0)
	{
		status = MysqlWait(m, status, kill, interruptible, deadline);
		if (status < 0)
			return -1;
		status = mysql_real_query_cont(&ret, m, status);
	}
	return ret;
}

/*
 * MysqlCancelQuery asks the server to stop the statement running on
 * 'conn' by sending KILL QUERY over a second connection with the same
 * parameters, driven without blocking and given up after 'timeout_ms' (or
 * at once on a pending cancel or termination).  It runs while an error is
 * being thrown, so it must not throw itself.
 */
static void
MysqlCancelQuery(CdMysqlConn *conn, int timeout_ms)
{
	const CdMysqlParams *p = &conn->params;
	unsigned long thread_id = mysql_thread_id(conn->mysql);
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   Max(timeout_ms, 1));
	unsigned int timeout = Max(timeout_ms / 1000, 1);
	MYSQL	   *c;
	bool		gave_up;
	char		sql[64];

	if (thread_id == 0)
		return;
	c = mysql_init(NULL);
	if (c == NULL)
		return;
	if (mysql_options(c, MYSQL_OPT_NONBLOCK, 0) == 0 &&
		MysqlApplyOptions(c, p, timeout) &&
		MysqlConnectHandle(c, p, false, deadline, &gave_up))
	{
		snprintf(sql, sizeof(sql), "KILL QUERY %lu", thread_id);
		(void) MysqlQueryHandle(c, sql, strlen(sql), NULL, false, deadline);
	}
	MysqlCloseHandle(c, true);
}

/*
 * MysqlCheckForInterrupts services pending interrupts; when one throws
 * while a statement is in flight on 'kill', the statement is killed on the
 * server (within collegedb.cleanup_timeout) before the error goes on.
 */
static void
MysqlCheckForInterrupts(CdMysqlConn *kill)
{
	if (!INTERRUPTS_PENDING_CONDITION())
		return;
	if (kill == NULL)
	{
		CHECK_FOR_INTERRUPTS();
		return;
	}
	PG_TRY();
	{
		CHECK_FOR_INTERRUPTS();
	}
	PG_CATCH();
	{
		MysqlCancelQuery(kill, CollegeCleanupTimeout);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * MysqlCloseHandle closes a client handle; 'midway' says a command may be
 * half sent or half answered, and then the socket is shut down first, so
 * that closing (which sends COM_QUIT) cannot wait for a shard that stopped
 * reading.
 */
static void
MysqlCloseHandle(MYSQL *m, bool midway)
{
	if (m == NULL)
		return;
	if (midway && mysql_get_socket(m) != PGINVALID_SOCKET)
		(void) shutdown(mysql_get_socket(m), SHUT_RDWR);
	mysql_close(m);
}

/* ----------------------------------------------------------------
 *		connect and close
 * ----------------------------------------------------------------
 */

/*
 * MysqlConnFree closes the connection and releases the handle.  A result
 * still being streamed is let go without reading the rest of it (its
 * handle is cleared first: freeing it would read to the end), and a
 * connection in the middle of a statement has its socket shut down before
 * it is closed.
 */
static void
MysqlConnFree(CdMysqlConn *conn)
{
	if (conn == NULL)
		return;
	if (conn->res != NULL)
	{
		conn->res->handle = NULL;
		mysql_free_result(conn->res);
		conn->res = NULL;
	}
	MysqlCloseHandle(conn->mysql, conn->midway);
	MysqlParamsFree(&conn->params);
	if (conn->context != NULL)
		MemoryContextDelete(conn->context);
	free(conn);
}

/*
 * MysqlConnectFailed fills *err for a connection attempt that ended
 * without a client-library error of its own, and frees the handle.
 */
static void *
MysqlConnectFailed(CdMysqlConn *conn, const CdConnInfo *info,
				   CdRemoteError *err, const char *sqlstate, const char *detail)
{
	char	   *message = psprintf("could not connect to MySQL shard \"%s\"",
								   info->shard);

	AdapterSetError(err, sqlstate, true, message, detail, NULL);
	pfree(message);
	MysqlConnFree(conn);
	return NULL;
}

/*
 * The session settings collegedb relies on: UTC (see MysqlEmitParam) and
 * strict SQL mode, so that no value (a key above all) is silently cut or
 * changed, without NO_BACKSLASH_ESCAPES, so that the server reads
 * backslashes in literals as the adapter's lexer does.
 */
#define CD_MYSQL_SESSION_SETUP \
	"SET time_zone = '+00:00', sql_mode = CONCAT_WS(',', NULLIF(TRIM(BOTH ',' FROM " \
	"REPLACE(CONCAT(',', @@SESSION.sql_mode, ','), ',NO_BACKSLASH_ESCAPES,', ',')), ''), " \
	"'STRICT_ALL_TABLES')"

/*
 * MysqlUsesSocket says whether libmariadb would connect over a Unix
 * socket: a socket option, or no host or "localhost".
 */
static bool
MysqlUsesSocket(const CdMysqlParams *p)
{
	return p->socket != NULL || p->host == NULL || strcmp(p->host, "localhost") == 0;
}

/*
 * MysqlConnect opens a connection to a shard: non-blocking handshake under
 * an overall connect_timeout (DNS resolution, inside the library, is the
 * one step that can still block), then the session settings collegedb
 * relies on.  Any failure is 08001 naming the shard.
 *
 * Under the password rule (CdConnInfo.require_password) the connection
 * authenticates with the mapping's password only: never over a Unix socket
 * (where the server can authenticate the front's operating-system user,
 * unix_socket authentication), and only with password-based client
 * authentication plugins.
 */
static void *
MysqlConnect(const CdConnInfo *info, CdRemoteError *err)
{
	CdMysqlConn *conn;
	TimestampTz deadline;
	bool		connected = false;
	bool		timed_out = false;
	int			setup_rc = 0;
	unsigned int timeout;

	if (!cd_mysql_library_ready)
	{
		if (mysql_library_init(0, NULL, NULL) != 0)
		{
			char	   *message = psprintf("could not connect to MySQL shard \"%s\"",
										   info->shard);

			AdapterSetError(err, "08001", true, message,
							"The MySQL client library could not be initialized.", NULL);
			pfree(message);
			return NULL;
		}
		cd_mysql_library_ready = true;
	}

	conn = calloc(1, sizeof(CdMysqlConn));
	if (conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (!MysqlParamsFromInfo(info, &conn->params) ||
		(conn->mysql = mysql_init(NULL)) == NULL)
	{
		MysqlConnFree(conn);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}

	if (conn->params.password_only && MysqlUsesSocket(&conn->params))
	{
		MysqlConnFree(conn);
		AdapterSetError(err, "2F003", true, "password is required",
						"Non-superuser cannot connect to a MySQL shard over a Unix socket, where the server may authenticate the front's operating-system user.",
						"Connect over TCP (a host other than localhost), or have a superuser set password_required=false in the user mapping attributes.");
		return NULL;
	}

	/* the library multiplies by 1000 into an int */
	timeout = (unsigned int) Min(conn->params.connect_timeout, INT_MAX / 1000);
	if (mysql_options(conn->mysql, MYSQL_OPT_NONBLOCK, 0) != 0 ||
		!MysqlApplyOptions(conn->mysql, &conn->params, timeout))
		return MysqlConnectFailed(conn, info, err, "08001",
								  "The MySQL client library rejected a connection option.");

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   (int64) conn->params.connect_timeout * 1000);

	PG_TRY();
	{
		connected = MysqlConnectHandle(conn->mysql, &conn->params, true, deadline,
									   &timed_out);
		if (connected)
			setup_rc = MysqlQueryHandle(conn->mysql, CD_MYSQL_SESSION_SETUP,
										strlen(CD_MYSQL_SESSION_SETUP), NULL, true,
										deadline);
		timed_out |= setup_rc < 0;
	}
	PG_CATCH();
	{
		MysqlConnFree(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (timed_out)
	{
		char	   *detail = psprintf(conn->params.connect_timeout == 1 ?
									  "The connection timed out after %d second." :
									  "The connection timed out after %d seconds.",
									  conn->params.connect_timeout);

		return MysqlConnectFailed(conn, info, err, "08001", detail);
	}
	if (!connected || setup_rc != 0)
	{
		MysqlSetError(err, conn->mysql, info->shard);
		MysqlConnFree(conn);
		return NULL;
	}
	if (conn->params.ssl_mode == CD_MYSQL_SSL_REQUIRED &&
		mysql_get_ssl_cipher(conn->mysql) == NULL)
		return MysqlConnectFailed(conn, info, err, "08001",
								  "The server does not support TLS, which ssl_mode \"required\" demands.");

	conn->context = AllocSetContextCreate(TopMemoryContext, "collegedb mysql statement",
										  ALLOCSET_SMALL_SIZES);
	conn->row_context = AllocSetContextCreate(conn->context, "collegedb mysql row",
											  ALLOCSET_DEFAULT_SIZES);
	return conn;
}

/*
 * MysqlClose closes a connection; NULL is a no-op.  A statement
 * interrupted mid-flight leaves the library's coroutine suspended: closing
 * discards it.
 */
static void
MysqlClose(void *handle)
{
	MysqlConnFree((CdMysqlConn *) handle);
}

/* ----------------------------------------------------------------
 *		parameters
 * ----------------------------------------------------------------
 */

/*
 * MysqlParamFail records the first failure of a placeholder rewrite.
 */
static void
MysqlParamFail(CdMysqlParamState *st, const char *sqlstate, char *message)
{
	if (st->failed)
		return;
	st->failed = true;
	st->sqlstate = sqlstate;
	st->message = message;
}

/*
 * MysqlAppendQuoted appends a single-quoted string literal, escaped for the
 * connection's character set (and for NO_BACKSLASH_ESCAPES, which the
 * library learns from the server's status flags).
 */
static void
MysqlAppendQuoted(StringInfo out, CdMysqlParamState *st, const char *s,
				  int len)
{
	unsigned long n;

	enlargeStringInfo(out, len * 2 + 3);
	out->data[out->len++] = '\'';
	n = mysql_real_escape_string(st->mysql, out->data + out->len, s,
								 (unsigned long) len);
	if (n == (unsigned long) -1)
	{
		MysqlParamFail(st, "22021",
					   pstrdup("parameter cannot be escaped for the MySQL connection character set"));
		n = 0;
	}
	out->len += (int) n;
	out->data[out->len++] = '\'';
	out->data[out->len] = '\0';
}

/*
 * MysqlNumericOk says whether a NUMERIC parameter is a finite decimal that
 * can be pasted into SQL as-is (PostgreSQL's numeric output: sign, digits,
 * point).  NaN and infinities are not.
 */
static bool
MysqlNumericOk(const char *s, int len)
{
	bool		digit = false;

	for (int i = 0; i < len; i++)
	{
		char		c = s[i];

		if (c >= '0' && c <= '9')
			digit = true;
		else if (!(c == '-' || c == '+' || c == '.' ||
				   ((c == 'e' || c == 'E') && digit)))
			return false;
	}
	return digit;
}

/*
 * MysqlEmitParam is the placeholder callback: it appends parameter $n as a
 * MySQL literal.  It cannot fail through the rewrite, so a failure is
 * recorded in the state and checked once the rewrite is done.
 */
static void
MysqlEmitParam(StringInfo out, int n, void *arg)
{
	CdMysqlParamState *st = (CdMysqlParamState *) arg;
	const CdParam *p;

	if (n < 1 || n > st->nparams)
	{
		MysqlParamFail(st, "42P02",
					   psprintf("there is no parameter $%d", n));
		appendStringInfoString(out, "NULL");
		return;
	}
	p = &st->params[n - 1];

	switch (p->kind)
	{
		case CD_VALUE_NULL:
			appendStringInfoString(out, "NULL");
			break;
		case CD_VALUE_BOOL:
			appendStringInfoString(out, p->bval ? "TRUE" : "FALSE");
			break;
		case CD_VALUE_INT:
			appendStringInfo(out, INT64_FORMAT, p->ival);
			break;
		case CD_VALUE_FLOAT:
			if (isnan(p->fval) || isinf(p->fval))
			{
				MysqlParamFail(st, "22003",
							   pstrdup("MySQL cannot store NaN or infinity"));
				appendStringInfoString(out, "NULL");
			}
			else
			{
				char		buf[64];

				snprintf(buf, sizeof(buf), "%.17g", p->fval);
				appendStringInfoString(out, buf);
				/* an exponent makes MySQL read a DOUBLE, not a DECIMAL */
				if (strchr(buf, 'e') == NULL && strchr(buf, 'E') == NULL)
					appendStringInfoString(out, "e0");
			}
			break;
		case CD_VALUE_NUMERIC:
			if (p->str == NULL || !MysqlNumericOk(p->str, p->len))
			{
				MysqlParamFail(st, "22003",
							   pstrdup("MySQL cannot store NaN or infinity"));
				appendStringInfoString(out, "NULL");
			}
			else
				appendBinaryStringInfo(out, p->str, p->len);
			break;
		case CD_VALUE_BYTES:
			{
				static const char hexdig[] = "0123456789ABCDEF";

				enlargeStringInfo(out, p->len * 2 + 3);
				out->data[out->len++] = 'X';
				out->data[out->len++] = '\'';
				for (int i = 0; i < p->len; i++)
				{
					unsigned char c = (unsigned char) p->str[i];

					out->data[out->len++] = hexdig[c >> 4];
					out->data[out->len++] = hexdig[c & 0xF];
				}
				out->data[out->len++] = '\'';
				out->data[out->len] = '\0';
			}
			break;

			/*
			 * TIMESTAMPTZ arrives in UTC without a zone and the session
			 * time_zone is '+00:00' (see MysqlConnect): a plain literal.
			 */
		case CD_VALUE_TEXT:
		case CD_VALUE_JSON:
		case CD_VALUE_DATE:
		case CD_VALUE_TIME:
		case CD_VALUE_TIMESTAMP:
		case CD_VALUE_TIMESTAMPTZ:
		case CD_VALUE_UUID:
			MysqlAppendQuoted(out, st, p->str ? p->str : "", p->str ? p->len : 0);
			break;
		default:
			elog(ERROR, "unexpected collegedb value kind %d", (int) p->kind);
	}
}


/* ----------------------------------------------------------------
 *		results
 * ----------------------------------------------------------------
 */

/*
 * MysqlColumnKind maps a result column's type to a value kind.  Binary
 * strings (character set 63) are bytes; the checks on individual values
 * (zero dates, out-of-range times, unsigned overflow) are in MysqlCell.
 * BOOLEAN columns are TINYINT(1) in MySQL and stay integers.
 */
static CdValueKind
MysqlColumnKind(const MYSQL_FIELD *f)
{
	switch (f->type)
	{
		case MYSQL_TYPE_TINY:
		case MYSQL_TYPE_SHORT:
		case MYSQL_TYPE_LONG:
		case MYSQL_TYPE_LONGLONG:
		case MYSQL_TYPE_INT24:
		case MYSQL_TYPE_YEAR:
		case MYSQL_TYPE_BIT:
			return CD_VALUE_INT;
		case MYSQL_TYPE_FLOAT:
		case MYSQL_TYPE_DOUBLE:
			return CD_VALUE_FLOAT;
		case MYSQL_TYPE_DECIMAL:
		case MYSQL_TYPE_NEWDECIMAL:
			return CD_VALUE_NUMERIC;
		case MYSQL_TYPE_DATE:
		case MYSQL_TYPE_NEWDATE:
			return CD_VALUE_DATE;
		case MYSQL_TYPE_TIME:
		case MYSQL_TYPE_TIME2:
			return CD_VALUE_TIME;
		case MYSQL_TYPE_DATETIME:
		case MYSQL_TYPE_DATETIME2:
		case MYSQL_TYPE_TIMESTAMP:
		case MYSQL_TYPE_TIMESTAMP2:
			return CD_VALUE_TIMESTAMP;
		case MYSQL_TYPE_JSON:
			return CD_VALUE_JSON;
		case MYSQL_TYPE_GEOMETRY:
			/* well-known binary, not text */
			return CD_VALUE_BYTES;
		case MYSQL_TYPE_TINY_BLOB:
		case MYSQL_TYPE_MEDIUM_BLOB:
		case MYSQL_TYPE_LONG_BLOB:
		case MYSQL_TYPE_BLOB:
		case MYSQL_TYPE_STRING:
		case MYSQL_TYPE_VAR_STRING:
		case MYSQL_TYPE_VARCHAR:
			return f->charsetnr == CD_MYSQL_BINARY_CHARSET ?
				CD_VALUE_BYTES : CD_VALUE_TEXT;
		default:
			return CD_VALUE_TEXT;
	}
}

/*
 * MysqlZeroDate says whether a DATE or DATETIME text has a zero year, month
 * or day ('0000-00-00', '2024-00-10'): MySQL accepts those, PostgreSQL
 * does not, so they travel as text.
 */
static bool
MysqlZeroDate(const char *v, unsigned long len)
{
	if (len < 10 || v[4] != '-' || v[7] != '-')
		return true;			/* not the shape we expect: keep as text */
	return strncmp(v, "0000", 4) == 0 || strncmp(v + 5, "00", 2) == 0 ||
		strncmp(v + 8, "00", 2) == 0;
}

/*
 * MysqlTimeOfDay says whether a TIME text is a time of day PostgreSQL
 * accepts; MySQL TIME is an interval (-838:59:59 to 838:59:59).
 */
static bool
MysqlTimeOfDay(const char *v, unsigned long len)
{
	return len >= 8 && v[0] >= '0' && v[0] <= '2' && v[2] == ':' &&
		(v[0] < '2' || v[1] < '4');
}

/*
 * MysqlCell fills one result cell, deciding the kind per value where the
 * column type alone cannot: BIT comes as big-endian bytes and is decoded
 * into 'buf'; unsigned BIGINT and BIT(64) above the int64 range become
 * NUMERIC; zero dates and non-clock TIME values become TEXT.
 */
static void
MysqlCell(CdCell *cell, const MYSQL_FIELD *f, CdValueKind kind,
		  const char *v, unsigned long len, char *buf)
{
	cell->isnull = (v == NULL);
	cell->kind = kind;
	cell->data = v;
	cell->len = (int) len;
	if (v == NULL)
		return;

	switch (f->type)
	{
		case MYSQL_TYPE_BIT:
			{
				uint64		u = 0;

				for (unsigned long i = 0; i < len && i < 8; i++)
					u = (u << 8) | (unsigned char) v[i];
				snprintf(buf, CD_MYSQL_INTBUF, UINT64_FORMAT, u);
				cell->data = buf;
				cell->len = (int) strlen(buf);
				if (u > (uint64) PG_INT64_MAX)
					cell->kind = CD_VALUE_NUMERIC;
			}
			break;
		case MYSQL_TYPE_LONGLONG:
			/* 9223372036854775807 has 19 digits */
			if ((f->flags & UNSIGNED_FLAG) &&
				(len > 19 ||
				 (len == 19 && strncmp(v, "9223372036854775807", 19) > 0)))
				cell->kind = CD_VALUE_NUMERIC;
			break;
		case MYSQL_TYPE_DATE:
		case MYSQL_TYPE_NEWDATE:
		case MYSQL_TYPE_DATETIME:
		case MYSQL_TYPE_DATETIME2:
		case MYSQL_TYPE_TIMESTAMP:
		case MYSQL_TYPE_TIMESTAMP2:
			if (MysqlZeroDate(v, len))
				cell->kind = CD_VALUE_TEXT;
			break;
		case MYSQL_TYPE_TIME:
		case MYSQL_TYPE_TIME2:
			if (!MysqlTimeOfDay(v, len))
				cell->kind = CD_VALUE_TEXT;
			break;
		default:
			break;
	}
}

/*
 * MysqlColumns reads the row description of the result being streamed,
 * into the statement's context, and sends the column names to the sink.
 */
static void
MysqlColumns(CdMysqlConn *conn, CdRowSink *sink)
{
	MemoryContext old = MemoryContextSwitchTo(conn->context);
	int			ncols = (int) mysql_num_fields(conn->res);
	const char **names = palloc(sizeof(char *) * Max(ncols, 1));

	conn->ncols = ncols;
	conn->fields = mysql_fetch_fields(conn->res);
	conn->kinds = palloc(sizeof(CdValueKind) * Max(ncols, 1));
	conn->cells = palloc(sizeof(CdCell) * Max(ncols, 1));
	conn->bufs = palloc((Size) CD_MYSQL_INTBUF * Max(ncols, 1));
	for (int i = 0; i < ncols; i++)
	{
		names[i] = conn->fields[i].name;
		conn->kinds[i] = MysqlColumnKind(&conn->fields[i]);
	}
	MemoryContextSwitchTo(old);
	if (sink != NULL)
		sink->columns(sink, ncols, names);
}

/*
 * MysqlDeliverRow hands the row just fetched to the sink, in the row
 * context.  Reads client memory only.  May throw (from the sink).
 */
static void
MysqlDeliverRow(CdMysqlConn *conn, MYSQL_ROW row, CdRowSink *sink)
{
	unsigned long *lengths = mysql_fetch_lengths(conn->res);

	for (int i = 0; i < conn->ncols; i++)
		MysqlCell(&conn->cells[i], &conn->fields[i], conn->kinds[i], row[i], lengths[i],
				  conn->bufs + (Size) i * CD_MYSQL_INTBUF);
	AdapterDeliverRow(sink, conn->ncols, conn->cells, conn->row_context);
}

/*
 * MysqlSend builds the statement, with its parameters as literals, and
 * starts the first command (a setup command, or the statement) without
 * waiting.  The placeholders are found by the lexical rules the session
 * follows now: a routed statement may have turned NO_BACKSLASH_ESCAPES on,
 * and a literal must end where the server thinks it does.  By those rules,
 * a statement the remote layer runs as a read must still be one.  A bad
 * parameter, or more than MySQL takes, fails before anything is sent.  See
 * adapter.h.
 */
static bool
MysqlSend(void *handle, int nsetup, const char *const *setup,
		  const char *sql, int nparams, const CdParam *params, int flags,
		  CdRemoteError *err)
{
	CdMysqlConn *conn = (CdMysqlConn *) handle;
	CdMysqlParamState st;
	CdStatementShape shape;
	StringInfoData buf;
	MemoryContext old;

	if (conn->midway || conn->res != NULL)
	{
		AdapterSetError(err, "08006", true,
						"the MySQL connection is in the middle of an earlier statement",
						NULL, NULL);
		return false;
	}
	if (nparams > CD_MYSQL_MAX_PARAMS)
	{
		AdapterSetError(err, "54023", false,
						psprintf("cannot send more than %d parameters to a MySQL shard",
								 CD_MYSQL_MAX_PARAMS),
						NULL, NULL);
		return false;
	}

	MemoryContextReset(conn->row_context);
	MemoryContextResetOnly(conn->context);
	old = MemoryContextSwitchTo(conn->context);
	memset(&st, 0, sizeof(st));
	st.mysql = conn->mysql;
	st.nparams = nparams;
	st.params = params;
	initStringInfo(&buf);
	shape = LexerScan(sql, MysqlLexerRules(conn->mysql), &buf, MysqlEmitParam, &st);
	MemoryContextSwitchTo(old);
	if (st.failed)
	{
		AdapterSetError(err, st.sqlstate, false, st.message, NULL, NULL);
		return false;
	}
	if ((flags & CD_EXEC_READ) && !shape.read_only)
	{
		AdapterSetError(err, "25006", false,
						"statement writes, but it was sent to the MySQL shard as a read",
						"The session's NO_BACKSLASH_ESCAPES mode makes the statement's literals end elsewhere, and then it may write.",
						NULL);
		return false;
	}

	conn->phase = CD_MYSQL_QUERY;
	conn->started = false;
	conn->index = 0;
	conn->nsetup = nsetup;
	conn->setup = setup;
	conn->statement = buf.data;
	conn->statement_len = buf.len;
	conn->rows = 0;
	conn->ncols = 0;
	conn->midway = true;
	return true;
}

static CdPollResult
MysqlWaitResult(int status)
{
	return (status & MYSQL_WAIT_WRITE) ? CD_POLL_WRITE : CD_POLL_READ;
}

/*
 * MysqlFetch streams the rows of conn->res to 'sink' (NULL: drops them)
 * as far as it can without blocking: one round trip per command (the
 * protocol, without multi-statements, which stay off so that a statement
 * is exactly one command), then the rows as they arrive, never the whole
 * result in client memory.  Returns CD_POLL_DONE once the result ended
 * (and is freed), the wait it needs, or CD_POLL_FAILED.
 */
static CdPollResult
MysqlFetch(CdMysqlConn *conn, CdRowSink *sink, CdRemoteError *err)
{
	for (;;)
	{
		MYSQL_ROW	row = NULL;
		int			status;

		if (!conn->started)
			status = mysql_fetch_row_start(&row, conn->res);
		else
			status = mysql_fetch_row_cont(&row, conn->res, conn->wait);
		if ((conn->started = status != 0))
		{
			conn->wait = status;
			return MysqlWaitResult(status);
		}
		if (row == NULL)
		{
			/* the end, or an error packet: either way nothing is left to read */
			bool		failed = mysql_errno(conn->mysql) != 0;

			if (failed)
				MysqlSetError(err, conn->mysql, NULL);
			mysql_free_result(conn->res);
			conn->res = NULL;
			return failed ? CD_POLL_FAILED : CD_POLL_DONE;
		}
		conn->rows++;
		if (sink != NULL)
			MysqlDeliverRow(conn, row, sink);
	}
}

/*
 * MysqlPoll advances the statement as far as it can without blocking:
 * the setup commands and the statement, then its rows, streamed (see
 * MysqlFetch); a CALL's further results are read and dropped.  Resuming a
 * suspended call when its socket is not ready yet is harmless: the library
 * suspends again.  See adapter.h.
 */
static CdPollResult
MysqlPoll(void *handle, CdRowSink *sink, int64 *rows_affected, CdRemoteError *err)
{
	CdMysqlConn *conn = (CdMysqlConn *) handle;
	MYSQL	   *m = conn->mysql;

	for (;;)
	{
		int			ret = 1;
		int			status;
		CdPollResult r;

		switch (conn->phase)
		{
			case CD_MYSQL_QUERY:
				if (!conn->started)
				{
					const char *q = conn->index < conn->nsetup ? conn->setup[conn->index] : conn->statement;
					size_t		len = conn->index < conn->nsetup ? strlen(q) : conn->statement_len;

					status = mysql_real_query_start(&ret, m, q, len);
				}
				else
					status = mysql_real_query_cont(&ret, m, conn->wait);
				if ((conn->started = status != 0))
				{
					conn->wait = status;
					return MysqlWaitResult(status);
				}
				if (ret != 0)
				{
					MysqlSetError(err, m, NULL);
					conn->midway = false;
					return CD_POLL_FAILED;
				}
				if (conn->index < conn->nsetup)
				{
					/* transaction control: no result set */
					conn->index++;
					continue;
				}
				if (mysql_field_count(m) == 0)
				{
					conn->rows = (int64) mysql_affected_rows(m);
					conn->phase = CD_MYSQL_NEXT;
					continue;
				}
				/* no I/O: the row description came with the answer */
				conn->res = mysql_use_result(m);
				if (conn->res == NULL)
				{
					MysqlSetError(err, m, NULL);
					err->connection_lost = true;
					return CD_POLL_FAILED;
				}
				MysqlColumns(conn, sink);
				conn->phase = CD_MYSQL_FETCH;
				continue;

			case CD_MYSQL_FETCH:
			case CD_MYSQL_FETCH_EXTRA:
				r = MysqlFetch(conn, conn->phase == CD_MYSQL_FETCH ? sink : NULL, err);
				if (r != CD_POLL_DONE)
				{
					if (r == CD_POLL_FAILED)
						conn->midway = false;
					return r;
				}
				conn->phase = CD_MYSQL_NEXT;
				continue;

			case CD_MYSQL_NEXT:
				if (!conn->started)
				{
					if (!mysql_more_results(m))
					{
						conn->phase = CD_MYSQL_DONE;
						continue;
					}
					status = mysql_next_result_start(&ret, m);
				}
				else
					status = mysql_next_result_cont(&ret, m, conn->wait);
				if ((conn->started = status != 0))
				{
					conn->wait = status;
					return MysqlWaitResult(status);
				}
				if (ret > 0)
				{
					MysqlSetError(err, m, NULL);
					conn->midway = false;
					return CD_POLL_FAILED;
				}
				if (ret == 0 && mysql_field_count(m) > 0)
				{
					conn->res = mysql_use_result(m);
					if (conn->res == NULL)
					{
						MysqlSetError(err, m, NULL);
						err->connection_lost = true;
						return CD_POLL_FAILED;
					}
					conn->phase = CD_MYSQL_FETCH_EXTRA;
				}
				else if (ret < 0)
					conn->phase = CD_MYSQL_DONE;
				continue;

			case CD_MYSQL_DONE:
				conn->midway = false;
				*rows_affected = conn->rows;
				return CD_POLL_DONE;
		}
	}
}

static int
MysqlSocket(void *handle)
{
	return mysql_get_socket(((CdMysqlConn *) handle)->mysql);
}

static void
MysqlCancel(void *handle, int timeout_ms)
{
	MysqlCancelQuery((CdMysqlConn *) handle, timeout_ms);
}

/*
 * MysqlExec runs a statement to completion: MysqlSend, then MysqlPoll
 * while waiting (interruptibly; an interrupt kills the statement on the
 * server before the error goes on).  The waits' deadline is
 * AdapterExecDeadline's (cleanups, COMMIT); when it passes the connection
 * is lost.  See adapter.h.
 */
static bool
MysqlExec(void *handle, int nsetup, const char *const *setup,
		  const char *sql, int nparams, const CdParam *params, int flags,
		  CdRowSink *sink, int64 *rows_affected, CdRemoteError *err)
{
	CdMysqlConn *conn = (CdMysqlConn *) handle;
	bool		interruptible;
	TimestampTz deadline = AdapterExecDeadline(flags, &interruptible);
	CdPollResult r;

	*rows_affected = 0;
	if (!MysqlSend(handle, nsetup, setup, sql, nparams, params, flags, err))
		return false;
	while ((r = MysqlPoll(handle, sink, rows_affected, err)) == CD_POLL_READ ||
		   r == CD_POLL_WRITE)
	{
		conn->wait = MysqlWait(conn->mysql, conn->wait, conn, interruptible, deadline);
		if (conn->wait < 0)
		{
			AdapterSetGaveUp(err, flags);
			return false;
		}
	}
	return r == CD_POLL_DONE;
}

/*
 * MysqlScan classifies a statement by MySQL's lexical rules (executable
 * comments are code), with backslash escapes in literals as collegedb's
 * sessions have them.
 */
static CdStatementShape
MysqlScan(const char *sql)
{
	return LexerScan(sql, &mysql_lexer_rules, NULL, NULL, NULL);
}

/* ----------------------------------------------------------------
 *		dialect text
 * ----------------------------------------------------------------
 */

/*
 * MysqlQuoteIdent quotes an identifier with backticks, doubling embedded
 * ones.
 */
static char *
MysqlQuoteIdent(const char *ident)
{
	return AdapterQuoteIdent(ident, '`');
}

/*
 * Statements after which MySQL has committed the open transaction
 * ("Statements That Cause an Implicit Commit"): they cannot take part in a
 * remote transaction.
 */
static const char *const mysql_implicit_commit[] = {
	"alter", "create", "drop", "rename", "truncate", "grant", "revoke",
	"lock", "unlock", "analyze", "optimize", "repair", "check", "cache",
	"flush", "load", "install", "uninstall", "start", "begin", NULL
};

/*
 * What add_shard creates on a MySQL shard: the tombstone table, keyed
 * (and indexed) so that a writer's locking read of a key's tombstone and a
 * mover's insert of it conflict in InnoDB.
 */
static const char *const mysql_shard_ddl[] = {
	"CREATE TABLE IF NOT EXISTS collegedb_tombstones ("
	"table_name VARCHAR(255) NOT NULL, "
	"shard_key VARCHAR(" CppAsString2(CD_MYSQL_MAX_KEY_LENGTH) ") NOT NULL, "
	"moved_to VARCHAR(255) NOT NULL, "
	"move_id BIGINT NULL, "
	"moved_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), "
	"PRIMARY KEY (shard_key, table_name)"
	") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
	NULL
};

const CdAdapter CdMysqlAdapter = {
	.dialect = CD_DIALECT_MYSQL,
	.name = "mysql",

	.connect = MysqlConnect,
	.exec = MysqlExec,
	.send = MysqlSend,
	.poll = MysqlPoll,
	.socket = MysqlSocket,
	.cancel = MysqlCancel,
	.close = MysqlClose,

	.option_ok = MysqlOptionOk,
	.check_options = MysqlCheckOptions,
	.valid_options = MysqlValidOptions,

	.scan = MysqlScan,
	.max_params = CD_MYSQL_MAX_PARAMS,
	.max_key_length = CD_MYSQL_MAX_KEY_LENGTH,

	.sql_begin = "START TRANSACTION",
	.sql_commit = "COMMIT",
	.sql_rollback = "ROLLBACK",
	.sql_savepoint = "SAVEPOINT s%d",
	.sql_release = "RELEASE SAVEPOINT s%d",
	.sql_rollback_to = "ROLLBACK TO SAVEPOINT s%d",
	.implicit_commit = mysql_implicit_commit,

	.quote_ident = MysqlQuoteIdent,
	.shard_ddl = mysql_shard_ddl,
	.sql_begin_write = "START TRANSACTION",
	.guard_query = "SELECT moved_to FROM collegedb_tombstones WHERE shard_key = $1 LIMIT 1 LOCK IN SHARE MODE",
	/*
	 * A locking read of an absent row takes only a gap lock, and InnoDB's
	 * gap locks never conflict: the mover writes a placeholder tombstone
	 * instead (replaced by the real ones in the same transaction), whose
	 * insert waits for writers holding the guard's shared lock and makes
	 * later guards wait for the move's commit.
	 */
	.lock_key_sql = "INSERT INTO collegedb_tombstones (table_name, shard_key, moved_to) "
	"VALUES ('', $1, '') ON DUPLICATE KEY UPDATE moved_to = moved_to",
	.size_sql = "SELECT CAST(COALESCE(SUM(data_length + index_length), 0) AS SIGNED) AS size FROM information_schema.tables WHERE table_schema = DATABASE()",
};

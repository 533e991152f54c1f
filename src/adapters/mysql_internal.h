/*-------------------------------------------------------------------------
 *
 * mysql_internal.h
 *	  What the MySQL adapter's files share: libmariadb's headers (included
 *	  here and nowhere else), the connection handle and its parameters, its
 *	  cache of prepared statements, and the functions of mysql_connect.c, mysql_errors.c, mysql_options.c, mysql_prepared.c and
 *	  mysql_values.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_MYSQL_INTERNAL_H
#define COLLEGEDB_MYSQL_INTERNAL_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"

#include "adapters/adapter.h"

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

/* the character set number MySQL reports for binary strings */
#define CD_MYSQL_BINARY_CHARSET 63

#define CD_MYSQL_DEFAULT_CONNECT_TIMEOUT 10 /* seconds */

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

/* Where an asynchronous statement is (MysqlSend .. MysqlPoll) */
typedef enum CdMysqlPhase
{
	CD_MYSQL_QUERY = 0,			/* running setup[index], then the statement */
	CD_MYSQL_FETCH,				/* streaming the statement's rows */
	CD_MYSQL_NEXT,				/* moving to a further result (a CALL's) */
	CD_MYSQL_FETCH_EXTRA,		/* reading a further result set, to drop it */
	CD_MYSQL_STMT_PREPARE,		/* closing evicted statements, preparing */
	CD_MYSQL_STMT_EXECUTE,		/* executing the prepared statement */
	CD_MYSQL_STMT_FETCH,		/* streaming its rows */
	CD_MYSQL_DONE
} CdMysqlPhase;

/* prepared statements kept per connection */
#define CD_MYSQL_PREPARED_MAX 64

/*
 * CdMysqlPrepared is one statement text in a connection's cache
 * (mysql_prepared.c), in the connection's prepared_context.
 */
typedef struct CdMysqlPrepared
{
	char	   *sql;			/* the caller's text, with $n placeholders */
	uint32		hash;
	bool		no_backslash;	/* rewritten under NO_BACKSLASH_ESCAPES */
	bool		read_only;		/* its shape by those rules */
	bool		refused;		/* the server cannot prepare it: text */
	char	   *marked;			/* the text with ? placeholders */
	size_t		marked_len;
	int			nmarkers;
	int		   *markers;		/* the n of each ?, in order */
	MYSQL_STMT *stmt;			/* NULL until prepared */
	uint64		used;			/* when last looked up (LRU) */
} CdMysqlPrepared;

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

	/* the statement in progress, when it runs prepared */
	CdMysqlPrepared *entry;		/* NULL: as text */
	MYSQL_BIND *param_binds;	/* one per marker */
	bool		reprepared;		/* prepared again after the server lost it */
	MYSQL_BIND *col_binds;		/* every column as a string */
	unsigned long *lengths;
	my_bool    *nulls;
	char	  **values;			/* the row as MysqlDeliverRow takes it */

	/* the cache of prepared statements (mysql_prepared.c) */
	CdMysqlPrepared *prepared[CD_MYSQL_PREPARED_MAX];
	int			nprepared;
	uint64		prepared_clock;
	MYSQL_STMT **closing;		/* to close on the server */
	int			nclosing;
	int			closing_size;
	MemoryContext prepared_context;

	MemoryContext context;		/* the statement's, reset by each send */
	MemoryContext row_context;	/* reset after each row */
} CdMysqlConn;

/*
 * MysqlWaitResult turns what a suspended libmariadb call waits for into
 * the adapter's poll result.
 */
static inline CdPollResult
MysqlWaitResult(int status)
{
	return (status & MYSQL_WAIT_WRITE) ? CD_POLL_WRITE : CD_POLL_READ;
}



/* mysql_connect.c */
extern void *MysqlConnect(const CdConnInfo *info, CdRemoteError *err);
extern void MysqlClose(void *handle);
extern int64 MysqlSessionId(void *handle);
extern int	MysqlWait(MYSQL *m, int status, CdMysqlConn *kill, bool interruptible,
					  TimestampTz deadline);
extern void MysqlCancelQuery(CdMysqlConn *conn, int timeout_ms);

/* mysql_errors.c */
extern void MysqlSetError(CdRemoteError *err, MYSQL *m, const char *shard);
extern void MysqlSetStmtError(CdRemoteError *err, MYSQL_STMT *stmt);

/* mysql_prepared.c */
extern CdMysqlPrepared *MysqlPreparedFind(CdMysqlConn *conn, const char *sql,
										  bool no_backslash);
extern CdMysqlPrepared *MysqlPreparedAdd(CdMysqlConn *conn, const char *sql,
										 bool no_backslash, bool read_only,
										 const CdLexerRules *rules);
extern bool MysqlPreparedBind(CdMysqlConn *conn, CdMysqlPrepared *entry,
							  int nparams, const CdParam *params,
							  CdRemoteError *err);
extern CdPollResult MysqlPreparedPoll(CdMysqlConn *conn, CdRowSink *sink,
									  CdRemoteError *err);
extern void MysqlPreparedFree(CdMysqlConn *conn);

/* mysql_options.c */
extern bool MysqlOptionOk(const char *keyword, Oid catalog);
extern char *MysqlValidOptions(Oid catalog);
extern void MysqlCheckOptions(List *options, Oid catalog);
extern void MysqlParamsFree(CdMysqlParams *p);
extern bool MysqlParamsFromInfo(const CdConnInfo *info, CdMysqlParams *p);
extern bool MysqlApplyOptions(MYSQL *m, const CdMysqlParams *p, unsigned int timeout);

/* mysql_values.c */
extern void MysqlParamStateInit(CdMysqlParamState *st, MYSQL *m, int nparams,
								const CdParam *params);
extern const CdParam *MysqlParamUsable(CdMysqlParamState *st, int n);
extern void MysqlEmitParam(StringInfo out, int n, void *arg);
extern void MysqlBindParam(MYSQL_BIND *b, const CdParam *p);
extern CdValueKind MysqlColumnKind(const MYSQL_FIELD *f);
extern void MysqlCell(CdCell *cell, const MYSQL_FIELD *f, CdValueKind kind,
					  const char *v, unsigned long len, char *buf);
extern void MysqlColumns(CdMysqlConn *conn, MYSQL_FIELD *fields, int ncols,
						 CdRowSink *sink);
extern void MysqlDeliverRow(CdMysqlConn *conn, MYSQL_ROW row,
							const unsigned long *lengths, CdRowSink *sink);

#endif							/* COLLEGEDB_MYSQL_INTERNAL_H */

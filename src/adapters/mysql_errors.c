/*-------------------------------------------------------------------------
 *
 * mysql_errors.c
 *	  The MySQL adapter's errors: the one place that maps MySQL/MariaDB
 *	  error numbers to SQLSTATEs.
 *
 * Server errors and the client library's own (lost connections, out of
 * sync) become SQLSTATE + message + detail + hint (CdRemoteError), copied
 * out of the handle so that the caller may close it next.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "adapters/mysql_internal.h"

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
 * MysqlMapError fills *err from error 'code' with its message and
 * SQLSTATE as the server or the library gave them: the one place that maps
 * MySQL/MariaDB error numbers to SQLSTATEs.  'm' (NULL: unknown) is the
 * connection, for what differs between MySQL and MariaDB.  With 'shard'
 * set, the failure happened while connecting and becomes 08001 naming the
 * shard, with the native message as detail.  Everything is copied
 * (AdapterSetError pstrdups), so the caller may close the handle next.
 */
static void
MysqlMapError(CdRemoteError *err, unsigned int code, const char *native,
			  const char *native_state, MYSQL *m, const char *shard)
{
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
			if (m != NULL && !mariadb_connection(m))
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

/*
 * MysqlSetError fills *err from the last error of 'm'; 'shard': see
 * MysqlMapError.
 */
void
MysqlSetError(CdRemoteError *err, MYSQL *m, const char *shard)
{
	MysqlMapError(err, mysql_errno(m), mysql_error(m), mysql_sqlstate(m), m, shard);
}

/*
 * MysqlSetStmtError fills *err from the last error of a prepared
 * statement, which holds the server's errors as the connection would.
 */
void
MysqlSetStmtError(CdRemoteError *err, MYSQL_STMT *stmt)
{
	/*
	 * An error packet that ends a result read without blocking
	 * (mysql_stmt_fetch_cont) is recorded on the connection, not on the
	 * statement.
	 */
	if (mysql_stmt_errno(stmt) == 0 && stmt->mysql != NULL && mysql_errno(stmt->mysql) != 0)
		MysqlMapError(err, mysql_errno(stmt->mysql), mysql_error(stmt->mysql),
					  mysql_sqlstate(stmt->mysql), stmt->mysql, NULL);
	else
		MysqlMapError(err, mysql_stmt_errno(stmt), mysql_stmt_error(stmt),
					  mysql_stmt_sqlstate(stmt), stmt->mysql, NULL);
}

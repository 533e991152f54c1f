/*-------------------------------------------------------------------------
 *
 * connection.c
 *	  The per-backend cache of shard connections and the remote
 *	  transactions that follow the front's.
 *
 * One connection per (shard, local user), postgres_fdw style: opened on
 * first use, reused across transactions, closed when the foreign server or
 * a user mapping changes (syscache callbacks) and never reused after it
 * failed mid-statement.
 *
 * The connection uses the calling role's user mapping (or PUBLIC's), and
 * postgres_fdw's password rule, on PostgreSQL and MySQL shards: a
 * non-superuser must have a non-empty password in the mapping, the adapter
 * may authenticate with nothing else of the server's (password files,
 * environment, client certificates, the OS user), and a PostgreSQL shard
 * must have asked for the password, unless a superuser set
 * password_required 'false' on the mapping.  Otherwise a role could reach
 * a shard on the front's own host as the server's OS user (peer, trust or
 * unix_socket authentication) or with the server's own credentials.
 *
 * A remote transaction is opened lazily by the first statement that needs
 * one (see execute.c); from then on it follows the front (xact.c).  A shard
 * whose remote transaction cannot be trusted any more (connection lost,
 * rollback to a savepoint failed) is "doomed": every later use in the same
 * front transaction fails, and so does the commit.
 *
 * This file does not build statements or convert values (execute.c), nor
 * end remote transactions (xact.c, twophase.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "access/xact.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "cd_errcodes.h"
#include "collegedb.h"
#include "remote/connection_internal.h"

static HTAB *connections = NULL;

static void connection_server_callback(Datum arg, int cacheid, uint32 hashvalue);
static void connection_mapping_callback(Datum arg, int cacheid, uint32 hashvalue);

/*
 * ConnectionInit registers the invalidation callbacks (the transaction and
 * subtransaction callbacks are xact.c's).
 */
void
ConnectionInit(void)
{
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, connection_server_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(USERMAPPINGOID, connection_mapping_callback, (Datum) 0);
}

static void
ensure_hash(void)
{
	HASHCTL		ctl;

	if (connections)
		return;
	ctl.keysize = sizeof(CdConnKey);
	ctl.entrysize = sizeof(CdConnection);
	ctl.hcxt = CacheMemoryContext;
	connections = hash_create("collegedb connections", 16, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * ConnectionClose closes the client connection of an entry; the entry
 * stays in the cache, unconnected.
 */
void
ConnectionClose(CdConnection *conn)
{
	if (conn->handle)
	{
		if (conn->session != 0)
			WaitsSessionClosed(conn->key.serverid, conn->session);
		conn->adapter->close(conn->handle);
		RemoteSocketGeneration++;	/* its socket's number may come back */
	}
	conn->session = 0;
	conn->handle = NULL;
	conn->in_flight = false;
	conn->pending = NULL;
	conn->fresh = false;
	conn->invalidated = false;
}

/*
 * add_option appends one keyword/value pair, copied into the current
 * memory context.
 */
static void
add_options(List *defs, bool from_user_mapping, CdConnOption *out, int *n)
{
	ListCell   *lc;

	foreach(lc, defs)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "dialect") == 0 ||
			strcmp(def->defname, "password_required") == 0)
			continue;
		out[*n].keyword = def->defname;
		out[*n].value = defGetString(def);
		out[*n].from_user_mapping = from_user_mapping;
		(*n)++;
	}
}

/*
 * mapping_options returns the options of the user mapping that applies to
 * 'userid' on 'serverid' (its own, else PUBLIC's); *found says whether
 * there is one.
 */
static List *
mapping_options(Oid userid, Oid serverid, bool *found)
{
	HeapTuple	tp;
	List	   *options = NIL;

	tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(userid),
						 ObjectIdGetDatum(serverid));
	if (!HeapTupleIsValid(tp))
		tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(InvalidOid),
							 ObjectIdGetDatum(serverid));
	*found = HeapTupleIsValid(tp);
	if (*found)
	{
		bool		isnull;
		Datum		datum = SysCacheGetAttr(USERMAPPINGUSERSERVER, tp,
											Anum_pg_user_mapping_umoptions,
											&isnull);

		if (!isnull)
			options = untransformRelOptions(datum);
		ReleaseSysCache(tp);
	}
	return options;
}

/*
 * password_rule applies the password rule to a connection of 'userid' to
 * 'shard' with mapping options 'umopts': raises when the mapping has no
 * password (an empty one counts as none: libpq and libmariadb would then
 * take one from the server's environment or files), and returns whether
 * the adapter must use that password and nothing else of the server's.
 * It covers the dialects with a login (CdCapabilities.login); SQLite
 * files have none.
 */
static bool
password_rule(Oid userid, const CdShard *shard, List *umopts)
{
	bool		required = true;
	bool		has_password = false;
	ListCell   *lc;

	if (!AdapterForDialect(shard->dialect)->caps.login || superuser_arg(userid))
		return false;
	foreach(lc, umopts)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "password_required") == 0)
			required = defGetBoolean(def);
		else if (strcmp(def->defname, "password") == 0)
			has_password = defGetString(def)[0] != '\0';
	}
	if (!required)
		return false;
	if (!has_password)
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("Non-superusers must provide a non-empty password in the user mapping for shard \"%s\".",
						   shard->name),
				 errhint("Add a password to the user mapping, or have a superuser set password_required 'false' on it.")));
	return true;
}

/*
 * ConnectionOpen connects an entry to its shard with the server's options
 * and the calling user's mapping.  Raises the adapter's error (class 08,
 * or the password rule's 2F003) naming the shard.
 */
void
ConnectionOpen(CdConnection *conn, const CdShard *shard)
{
	ForeignServer *server = GetForeignServer(shard->serverid);
	bool		has_mapping;
	List	   *umopts = mapping_options(conn->key.userid, shard->serverid, &has_mapping);
	CdConnOption *opts;
	CdConnInfo	info;
	CdRemoteError err;
	int			n = 0;

	if (!has_mapping && AdapterForDialect(shard->dialect)->caps.login)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("user mapping not found for user \"%s\" on shard \"%s\"",
						GetUserNameFromId(conn->key.userid, false), shard->name),
				 errhint("Create one with CREATE USER MAPPING FOR ... SERVER \"%s\" OPTIONS (user '...', password '...').",
						 shard->name)));

	info.require_password = password_rule(conn->key.userid, shard, umopts);
	opts = palloc(sizeof(CdConnOption) * (list_length(server->options) + list_length(umopts) + 1));
	add_options(server->options, false, opts, &n);
	add_options(umopts, true, opts, &n);
	info.shard = shard->name;
	info.noptions = n;
	info.options = opts;

	memset(&err, 0, sizeof(err));
	conn->handle = conn->adapter->connect(&info, &err);
	RemoteSocketGeneration++;
	if (conn->handle == NULL)
		RemoteRaise(CD_REMOTE_CONNECT, shard->name, conn->adapter, NULL, &err);
	/* published for the detection of deadlocks across shards */
	conn->session = conn->adapter->session_id ? conn->adapter->session_id(conn->handle) : 0;
	if (conn->session != 0)
		WaitsSessionOpened(conn->key.serverid, conn->session);
	conn->fresh = true;
	conn->in_flight = false;
	conn->invalidated = false;
}

/*
 * ConnectionGet returns the calling user's connection to 'shard',
 * connecting if needed.
 */
CdConnection *
ConnectionGet(const CdShard *shard)
{
	CdConnKey	key;
	CdConnection *conn;
	bool		found;

	ensure_hash();
	key.serverid = shard->serverid;
	key.userid = GetUserId();
	conn = hash_search(connections, &key, HASH_ENTER, &found);
	if (!found)
	{
		conn->handle = NULL;
		conn->session = 0;
		conn->xact_depth = 0;
		conn->in_flight = false;
		conn->pending = NULL;
		conn->doomed = false;
		conn->invalidated = false;
		conn->fresh = false;
		ConnectionMarkFinished(conn);
	}
	/* the dialect may have changed with ALTER SERVER */
	strlcpy(conn->shard, shard->name, NAMEDATALEN);
	if (conn->handle && conn->invalidated && conn->xact_depth == 0)
		ConnectionClose(conn);
	if (conn->handle == NULL)
	{
		if (conn->xact_depth > 0)
			conn->doomed = true;
		conn->adapter = AdapterForDialect(shard->dialect);
		conn->server_hash = GetSysCacheHashValue1(FOREIGNSERVEROID,
												  ObjectIdGetDatum(shard->serverid));
		ConnectionOpen(conn, shard);
	}
	else
		conn->fresh = false;
	return conn;
}

/*
 * ConnectionIsOpen says whether the calling user's connection to 'shard'
 * is open and will be used as it is: ConnectionGet will not connect, so
 * it cannot fail.
 */
bool
ConnectionIsOpen(const CdShard *shard)
{
	CdConnKey	key;
	CdConnection *conn;

	if (connections == NULL)
		return false;
	key.serverid = shard->serverid;
	key.userid = GetUserId();
	conn = hash_search(connections, &key, HASH_FIND, NULL);
	return conn != NULL && conn->handle != NULL &&
		!(conn->invalidated && conn->xact_depth == 0);
}

/*
 * ConnectionRunCleanup runs a transaction-control command as a cleanup: it waits at
 * most collegedb.cleanup_timeout, and not at all once a cancel or
 * termination is pending (at abort, interrupts are held and nothing else
 * could end the wait).  False when it failed (the error is dropped: the
 * callers are cleanup paths); a connection that did not answer is closed.
 */
bool
ConnectionRunCleanup(CdConnection *conn, const char *sql)
{
	CdRemoteError err;
	int64		rows;
	bool		ok;

	if (conn->handle == NULL)
		return false;
	memset(&err, 0, sizeof(err));
	conn->in_flight = true;
	conn->in_flight_level = GetCurrentTransactionNestLevel();
	ok = conn->adapter->exec(conn->handle, 0, NULL, sql, 0, NULL,
							 CD_EXEC_INTERNAL | CD_EXEC_CLEANUP, NULL, &rows, &err);
	conn->in_flight = false;
	if (!ok && err.connection_lost)
		ConnectionClose(conn);
	return ok;
}

/*
 * ConnectionGroupRun is ConnectionGroupExec that closes the connections
 * lost in their command.
 */
void
ConnectionGroupRun(CdGroupCommand *cmds, int n, int flags)
{
	ConnectionGroupExec(cmds, n, flags);
	for (int i = 0; i < n; i++)
		if (!cmds[i].ok && cmds[i].err.connection_lost)
			ConnectionClose(cmds[i].conn);
}

/*
 * ConnectionListCommand fills 'cmd' with one of a dialect's lists of two-phase
 * commands (CdTwoPhaseSql), each with 'gid', for one exec.
 */
void
ConnectionListCommand(CdConnection *conn, const char *const *list, const char *gid,
			 CdGroupCommand *cmd)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->conn = conn;
	while (list[cmd->nsetup + 1] != NULL)
	{
		Assert(cmd->nsetup < lengthof(cmd->setup));
		cmd->setup[cmd->nsetup] = psprintf(list[cmd->nsetup], gid);
		cmd->nsetup++;
	}
	cmd->sql = psprintf(list[cmd->nsetup], gid);
}

/*
 * ConnectionExecList runs one of a dialect's lists of two-phase commands
 * (CdTwoPhaseSql), each with 'gid', in one exec; false with *err filled
 * when it failed (a connection that was lost is closed).
 */
bool
ConnectionExecList(CdConnection *conn, const char *const *list, const char *gid,
				   int flags, CdRemoteError *err)
{
	CdGroupCommand cmd;

	ConnectionListCommand(conn, list, gid, &cmd);
	ConnectionGroupRun(&cmd, 1, CD_EXEC_INTERNAL | flags);
	*err = cmd.err;
	return cmd.ok;
}

/*
 * ConnectionMarkFinished forgets the shard's remote transaction: it
 * committed, rolled back, or was prepared and decided.
 */
void
ConnectionMarkFinished(CdConnection *conn)
{
	conn->xact_depth = 0;
	conn->wrote = false;
	conn->write_lxid = InvalidLocalTransactionId;
	conn->xa = false;
	conn->prepare_sent = false;
	conn->prepared = false;
	conn->gid[0] = '\0';
}

/*
 * ConnectionParticipants lists the connections that take part in the
 * ending front transaction: an open remote transaction, a lost one, or a
 * prepared one.  The array is in TopTransactionContext, which lives until
 * the end.
 */
CdConnection **
ConnectionParticipants(int *n)
{
	HASH_SEQ_STATUS scan;
	CdConnection *conn;
	CdConnection **parts;

	*n = 0;
	if (connections == NULL)
		return NULL;
	parts = MemoryContextAlloc(TopTransactionContext,
							   sizeof(CdConnection *) * Max(hash_get_num_entries(connections), 1));
	hash_seq_init(&scan, connections);
	while ((conn = hash_seq_search(&scan)) != NULL)
		if (conn->xact_depth > 0 || conn->doomed || conn->prepared)
			parts[(*n)++] = conn;
	return parts;
}

/*
 * ConnectionList returns every connection of the cache (open or not), in
 * a palloc'd array of *n entries, for the callers that end transactions
 * on them (xact.c): an array, so that they may close connections as they
 * go.
 */
CdConnection **
ConnectionList(int *n)
{
	HASH_SEQ_STATUS scan;
	CdConnection *conn;
	CdConnection **all;

	*n = 0;
	if (connections == NULL)
		return NULL;
	all = palloc(sizeof(CdConnection *) * Max(hash_get_num_entries(connections), 1));
	hash_seq_init(&scan, connections);
	while ((conn = hash_seq_search(&scan)) != NULL)
		all[(*n)++] = conn;
	return all;
}

/*
 * ConnectionAnyOpen returns a connection with an open remote transaction,
 * or NULL.
 */
CdConnection *
ConnectionAnyOpen(void)
{
	HASH_SEQ_STATUS scan;
	CdConnection *conn;

	if (connections == NULL)
		return NULL;
	hash_seq_init(&scan, connections);
	while ((conn = hash_seq_search(&scan)) != NULL)
	{
		if (conn->xact_depth > 0)
		{
			hash_seq_term(&scan);
			return conn;
		}
	}
	return NULL;
}

/*
 * invalidate marks the connections to the server with syscache hash value
 * 'server_hash' (0: every connection) for a reconnect at their next use
 * outside a remote transaction.
 */
static void
invalidate(uint32 server_hash)
{
	HASH_SEQ_STATUS scan;
	CdConnection *conn;

	if (connections == NULL)
		return;
	hash_seq_init(&scan, connections);
	while ((conn = hash_seq_search(&scan)) != NULL)
		if (server_hash == 0 || conn->server_hash == server_hash)
			conn->invalidated = true;
}

static void
connection_server_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	invalidate(hashvalue);
}

/*
 * connection_mapping_callback invalidates every connection: a new mapping
 * for a user who used PUBLIC's has another OID, so matching hash values
 * would miss it, and mappings change rarely.
 */
static void
connection_mapping_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	invalidate(0);
}

/*
 * ConnectionDisconnect closes this backend's connections to 'shard'
 * (for every user); true when one was open.  A connection inside the
 * current transaction cannot be closed.
 */
bool
ConnectionDisconnect(const char *shard)
{
	HASH_SEQ_STATUS scan;
	CdConnection *conn;
	bool		closed = false;

	if (connections == NULL)
		return false;
	hash_seq_init(&scan, connections);
	while ((conn = hash_seq_search(&scan)) != NULL)
	{
		if (shard && strcmp(conn->shard, shard) != 0)
			continue;
		if (conn->xact_depth > 0)
		{
			hash_seq_term(&scan);
			ereport(ERROR,
					(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
					 errmsg("cannot close the connection to shard \"%s\" inside a transaction that uses it",
							conn->shard)));
		}
		if (conn->handle)
			closed = true;
		ConnectionClose(conn);
	}
	return closed;
}

/*
 * ConnectionDisconnectAll closes every idle connection of this backend;
 * returns how many were open.
 */
int
ConnectionDisconnectAll(void)
{
	HASH_SEQ_STATUS scan;
	CdConnection *conn;
	int			n = 0;

	if (connections == NULL)
		return 0;
	hash_seq_init(&scan, connections);
	while ((conn = hash_seq_search(&scan)) != NULL)
	{
		if (conn->xact_depth > 0 || conn->handle == NULL)
			continue;
		ConnectionClose(conn);
		n++;
	}
	return n;
}

/*
 * ConnectionStatusList describes this backend's open connections.
 */
CdConnectionStatus *
ConnectionStatusList(int *count)
{
	HASH_SEQ_STATUS scan;
	CdConnection *conn;
	CdConnectionStatus *out;
	int			n = 0;

	*count = 0;
	if (connections == NULL)
		return NULL;
	out = palloc0(sizeof(CdConnectionStatus) * Max(hash_get_num_entries(connections), 1));
	hash_seq_init(&scan, connections);
	while ((conn = hash_seq_search(&scan)) != NULL)
	{
		if (conn->handle == NULL)
			continue;
		strlcpy(out[n].shard, conn->shard, NAMEDATALEN);
		out[n].userid = conn->key.userid;
		out[n].dialect = conn->adapter->name;
		out[n].valid = !conn->invalidated && !conn->doomed;
		out[n].in_transaction = conn->xact_depth > 0;
		n++;
	}
	*count = n;
	return out;
}

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
 * one (see execute.c); from then on it follows the front: savepoints for
 * subtransactions, COMMIT at pre-commit, ROLLBACK at abort.  A shard whose
 * remote transaction cannot be trusted any more (connection lost, rollback
 * to a savepoint failed) is "doomed": every later use in the same front
 * transaction fails, and so does the commit.
 *
 * This file does not build statements or convert values: execute.c does.
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

/* the running front statement is one routed call (RemoteMayCommitAlone) */
static bool commit_alone = false;

static void connection_subxact_callback(SubXactEvent event,
										SubTransactionId mySubid,
										SubTransactionId parentSubid,
										void *arg);
static void connection_server_callback(Datum arg, int cacheid, uint32 hashvalue);
static void connection_mapping_callback(Datum arg, int cacheid, uint32 hashvalue);

/*
 * ConnectionInit registers the subtransaction and invalidation callbacks
 * (the transaction callback is twophase.c's).
 */
void
ConnectionInit(void)
{
	RegisterSubXactCallback(connection_subxact_callback, NULL);
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
		conn->adapter->close(conn->handle);
		RemoteSocketGeneration++;	/* its socket's number may come back */
	}
	conn->handle = NULL;
	conn->in_flight = false;
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
		conn->xact_depth = 0;
		conn->in_flight = false;
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
 * ConnectionRollbackTo undoes the shard's work since savepoint s<level>
 * and releases it, leaving the remote transaction one level up; false when
 * that failed (the caller dooms the transaction).
 */
bool
ConnectionRollbackTo(CdConnection *conn, int level)
{
	char		sql[64];

	if (conn->xact_depth < level)
		return true;
	snprintf(sql, sizeof(sql), conn->adapter->sql_rollback_to, level);
	if (!ConnectionRunCleanup(conn, sql))
		return false;
	snprintf(sql, sizeof(sql), conn->adapter->sql_release, level);
	if (!ConnectionRunCleanup(conn, sql))
		return false;
	conn->xact_depth = level - 1;
	return true;
}

/*
 * group_exec is ConnectionGroupExec that closes the connections lost in
 * their command.
 */
static void
group_exec(CdGroupCommand *cmds, int n, int flags)
{
	ConnectionGroupExec(cmds, n, flags);
	for (int i = 0; i < n; i++)
		if (!cmds[i].ok && cmds[i].err.connection_lost)
			ConnectionClose(cmds[i].conn);
}

/*
 * list_command fills 'cmd' with one of a dialect's lists of two-phase
 * commands (CdTwoPhaseSql), each with 'gid', for one exec.
 */
static void
list_command(CdConnection *conn, const char *const *list, const char *gid,
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

	list_command(conn, list, gid, &cmd);
	group_exec(&cmd, 1, CD_EXEC_INTERNAL | flags);
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
	conn->xa = false;
	conn->prepare_sent = false;
	conn->prepared = false;
	conn->gid[0] = '\0';
}

/*
 * ConnectionCommitTogether commits the remote transactions of 'conns' at
 * front pre-commit, without preparing them: every COMMIT is sent before
 * any is awaited (ConnectionGroupExec), so the shards commit in parallel.
 * A participant that was lost fails before anything is sent; otherwise
 * every answer is collected, and the first failure (in the order of
 * 'conns') aborts the front transaction with the shard's error.
 */
void
ConnectionCommitTogether(CdConnection **conns, int n)
{
	CdGroupCommand *cmds;
	int			failed = -1;

	for (int i = 0; i < n; i++)
		if (conns[i]->doomed || conns[i]->handle == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
					 errmsg("cannot commit: the transaction on shard \"%s\" was lost",
							conns[i]->shard),
					 errdetail("The connection to the shard failed during the transaction.")));
	if (n == 0)
		return;

	cmds = palloc0(sizeof(CdGroupCommand) * n);
	for (int i = 0; i < n; i++)
	{
		if (conns[i]->xa)
			list_command(conns[i], conns[i]->adapter->two_phase_sql->commit_one_phase,
						 conns[i]->gid, &cmds[i]);
		else
		{
			cmds[i].conn = conns[i];
			cmds[i].sql = conns[i]->adapter->sql_commit;
		}
	}
	group_exec(cmds, n, CD_EXEC_INTERNAL | CD_EXEC_COMMIT);

	for (int i = 0; i < n; i++)
	{
		/* the abort that follows rolls back what a shard still holds open */
		if (cmds[i].ok || cmds[i].err.connection_lost ||
			strcmp(cmds[i].err.sqlstate, "40000") == 0)
			ConnectionMarkFinished(conns[i]);	/* committed, or rolled back */
		if (!cmds[i].ok && failed < 0)
			failed = i;
	}
	if (failed >= 0)
		RemoteRaise(CD_REMOTE_COMMIT, conns[failed]->shard, conns[failed]->adapter, NULL,
					&cmds[failed].err);
	pfree(cmds);
}

/*
 * ConnectionCommitOnePhase commits one shard's remote transaction at front
 * pre-commit, without preparing it; failure aborts the front transaction.
 */
void
ConnectionCommitOnePhase(CdConnection *conn)
{
	ConnectionCommitTogether(&conn, 1);
}

/*
 * rollback_remote rolls back one shard's part of an aborting front
 * transaction, as a cleanup (see ConnectionRunCleanup): a prepared one
 * (or one whose PREPARE was sent) with the dialect's rollback of a
 * prepared transaction, one begun for two-phase commit with its rollback
 * list, any other with ROLLBACK.  What fails is left to recovery (a
 * prepared transaction whose front transaction aborted is rolled back by
 * the coordinator) or to the shard (a closed connection rolls back).
 */
static void
rollback_remote(CdConnection *conn)
{
	CdRemoteError err;

	if (conn->prepare_sent)
	{
		if (!ConnectionExecList(conn,
								(const char *const[]) {conn->adapter->two_phase_sql->rollback_prepared, NULL},
								conn->gid, CD_EXEC_CLEANUP, &err) &&
			conn->prepared && !err.connection_lost)
			ereport(WARNING,
					(errcode(err.sqlstate[0] ? MAKE_SQLSTATE(err.sqlstate[0], err.sqlstate[1], err.sqlstate[2],
															 err.sqlstate[3], err.sqlstate[4]) : ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not roll back prepared transaction %s on shard \"%s\": %s",
							conn->gid, conn->shard, err.message ? err.message : "unknown error"),
					 errhint("The coordinator rolls it back later.")));
	}
	else if (conn->xa && conn->xact_depth > 0)
	{
		if (!ConnectionExecList(conn, conn->adapter->two_phase_sql->rollback, conn->gid,
								CD_EXEC_CLEANUP, &err))
			ConnectionClose(conn);
	}
	else if (conn->xact_depth > 0 &&
			 !ConnectionRunCleanup(conn, conn->adapter->sql_rollback))
		ConnectionClose(conn);
}

/*
 * ConnectionCommitNow commits the shard's open remote transaction before
 * the front's; statements after it start a new one.
 */
void
ConnectionCommitNow(CdConnection *conn)
{
	if (conn->xact_depth > 0 || conn->doomed)
		ConnectionCommitOnePhase(conn);
}

/*
 * ConnectionUndoGuard cleans up after a guard found the key moved: a
 * pipelined guard (guard_setup) aborted the remote transaction (or, when it
 * was open before, the guard's savepoint), which is undone here; after a
 * guard query (was_open false) the transaction it opened is rolled back.
 */
void
ConnectionUndoGuard(CdConnection *conn, bool was_open)
{
	if (was_open)
	{
		if (!ConnectionRunCleanup(conn, conn->adapter->guard_rollback_to) ||
			!ConnectionRunCleanup(conn, conn->adapter->guard_release))
			conn->doomed = true;
		return;
	}
	if (!ConnectionRunCleanup(conn, conn->adapter->sql_rollback))
		ConnectionClose(conn);
	ConnectionMarkFinished(conn);
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
 * ConnectionAtEnd ends every shard's part of the ending front transaction.
 * After an abort ('aborted') it rolls each back; a connection in the
 * middle of a statement, or lost, is closed instead (the shard rolls back
 * what was open; a prepared one is rolled back by its gid, or else by
 * recovery).  After a commit it closes the connections whose server or
 * mapping changed.
 */
void
ConnectionAtEnd(bool aborted)
{
	HASH_SEQ_STATUS scan;
	CdConnection *conn;

	commit_alone = false;
	if (connections == NULL)
		return;
	hash_seq_init(&scan, connections);
	while ((conn = hash_seq_search(&scan)) != NULL)
	{
		if (aborted && (conn->in_flight || (conn->doomed && !conn->prepared)))
			ConnectionClose(conn);
		else if (aborted)
			rollback_remote(conn);
		ConnectionMarkFinished(conn);
		conn->doomed = false;
		if (!aborted && conn->invalidated)
			ConnectionClose(conn);
	}
}

/*
 * RemoteMayCommitAlone says (true) that the front statement now running is
 * a single routed call and nothing else: its caller has proved that
 * nothing of the front statement runs after the call returns.  Cleared by
 * the caller after the call, and at the end of the transaction.
 */
void
RemoteMayCommitAlone(bool on)
{
	commit_alone = on;
}

/*
 * ConnectionCommitAloneOk says whether a write may commit on its shard on
 * its own, in one round trip, before the front commits: the front
 * statement is a single routed call (RemoteMayCommitAlone), outside a
 * transaction block and any subtransaction, the front transaction has
 * written nothing itself and no shard has a remote transaction open.  Then
 * the shard's commit is the statement's only effect, and nothing that
 * could still fail follows it but the front's commit of nothing; the
 * front commits right after this statement even inside a pipeline of the
 * extended protocol (XACT_FLAGS_NEEDIMMEDIATECOMMIT), so no later
 * statement joins its transaction.
 */
bool
ConnectionCommitAloneOk(void)
{
	if (!commit_alone || IsTransactionBlock() || GetCurrentTransactionNestLevel() != 1 ||
		FullTransactionIdIsValid(GetTopFullTransactionIdIfAny()) ||
		ConnectionAnyOpen() != NULL)
		return false;
	MyXactFlags |= XACT_FLAGS_NEEDIMMEDIATECOMMIT;
	return true;
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
 * release_together releases savepoint s<level> on every shard that has
 * it, all RELEASEs sent before any is awaited (ConnectionGroupExec).  A
 * failure dooms the shard's transaction and is raised once every answer
 * is in; the subtransaction then aborts, and since the shards that did
 * release can no longer undo its work, they are doomed too.
 */
static void
release_together(int level)
{
	HASH_SEQ_STATUS scan;
	CdConnection *conn;
	CdGroupCommand *cmds = NULL;
	int			n = 0;
	int			failed = -1;

	hash_seq_init(&scan, connections);
	while ((conn = hash_seq_search(&scan)) != NULL)
	{
		if (conn->xact_depth < level)
			continue;
		if (conn->doomed || conn->handle == NULL)
		{
			conn->xact_depth = level - 1;
			continue;
		}
		/* most subtransactions (a fan-out's in autocommit) have none */
		if (cmds == NULL)
			cmds = palloc0(sizeof(CdGroupCommand) * hash_get_num_entries(connections));
		cmds[n].conn = conn;
		cmds[n].sql = psprintf(conn->adapter->sql_release, level);
		n++;
	}
	if (n == 0)
		return;
	group_exec(cmds, n, CD_EXEC_INTERNAL);
	for (int i = 0; i < n; i++)
		if (!cmds[i].ok)
		{
			cmds[i].conn->doomed = true;
			if (failed < 0)
				failed = i;
		}
	for (int i = 0; i < n; i++)
		if (cmds[i].ok)
		{
			cmds[i].conn->xact_depth = level - 1;
			if (failed >= 0)
				cmds[i].conn->doomed = true;
		}
	if (failed >= 0)
		RemoteRaise(CD_REMOTE_RELEASE, cmds[failed].conn->shard, cmds[failed].conn->adapter,
					NULL, &cmds[failed].err);
	pfree(cmds);
}

/*
 * connection_subxact_callback releases or rolls back the shards'
 * savepoints with the front's subtransactions.
 */
static void
connection_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							SubTransactionId parentSubid, void *arg)
{
	HASH_SEQ_STATUS scan;
	CdConnection *conn;
	int			level;

	if (connections == NULL ||
		(event != SUBXACT_EVENT_PRE_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB))
		return;

	level = GetCurrentTransactionNestLevel();
	if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
	{
		release_together(level);
		return;
	}
	hash_seq_init(&scan, connections);
	while ((conn = hash_seq_search(&scan)) != NULL)
	{
		if (conn->in_flight && conn->in_flight_level >= level)
		{
			/*
			 * A statement of this subtransaction abandoned midway (an
			 * interrupt, a row the front could not take): the shard may
			 * still be sending.  What it had open before the statement is
			 * lost with the connection.  Statements an outer level has in
			 * flight (a fan-out's) are not this subtransaction's.
			 */
			if (conn->xact_depth > 0)
				conn->doomed = true;
			ConnectionClose(conn);
			continue;
		}
		if (conn->xact_depth < level)
			continue;
		if (conn->doomed || conn->handle == NULL)
		{
			/* the shard's state inside its transaction is unknown */
			conn->doomed = true;
		}
		else if (!ConnectionRollbackTo(conn, level))
			conn->doomed = true;
		conn->xact_depth = level - 1;
	}
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

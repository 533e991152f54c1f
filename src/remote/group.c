/*-------------------------------------------------------------------------
 *
 * group.c
 *	  Runs one of collegedb's own commands on several shard connections at
 *	  once (the COMMITs of a front transaction's participants, the RELEASEs
 *	  of a subtransaction), and waits on several shards' sockets in one
 *	  wait set (also the fan-out's).
 *
 * Every command goes out first, then all are awaited together: the shards
 * work in parallel and the front pays about one round trip, not one per
 * shard.  A dialect without asynchronous statements (SQLite, which is
 * local) runs its command to completion while the others are in flight.
 * The waits honour what an exec of the same command would
 * (AdapterExecDeadline): a cancel or statement_timeout on the front
 * cancels every command still in flight before the error goes on, and a
 * COMMIT gives up after statement_timeout, its connection then lost.
 * Each command's outcome is data: the caller decides what a failure means.
 *
 * This file neither chooses the commands nor changes the remote
 * transactions' state (connection.c and twophase.c do).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/memutils.h"

#include "collegedb.h"
#include "remote/connection_internal.h"

/*
 * The wait set of waits over several shards, kept for the next one: a
 * fan-out over the same connections as the one before (the usual case)
 * waits on the same sockets for the same events, so it needs no epoll set
 * made, filled and closed per call.  Its sockets are valid only while no
 * shard connection of this backend was opened or closed
 * (RemoteSocketGeneration, which connection.c bumps): a closed socket's
 * number may come back for another connection.
 */
uint64		RemoteSocketGeneration = 0;

struct CdWaitSet
{
	WaitEventSet *set;			/* NULL: none yet */
	uint64		generation;		/* RemoteSocketGeneration when made */
	bool		in_use;
	bool		stale;			/* a socket nobody waits for fired */
	int			nsocks;
	pgsocket   *socks;			/* by position - 2 */
	int		   *events;
};

static CdWaitSet kept;

/*
 * RemoteWaitSetAcquire returns the kept wait set, or when it is in use (a
 * wait inside a wait), a new one; RemoteWaitSetRelease gives it back on
 * every path, 'failed' when an error may have left it midway.
 */
CdWaitSet *
RemoteWaitSetAcquire(void)
{
	CdWaitSet  *ws = &kept;

	if (ws->in_use)
		ws = MemoryContextAllocZero(TopMemoryContext, sizeof(CdWaitSet));
	ws->in_use = true;
	return ws;
}

static void
wait_set_free(CdWaitSet *ws)
{
	if (ws->set)
		FreeWaitEventSet(ws->set);
	ws->set = NULL;
	if (ws->socks)
		pfree(ws->socks);
	if (ws->events)
		pfree(ws->events);
	ws->socks = NULL;
	ws->events = NULL;
	ws->nsocks = 0;
	ws->stale = false;
}

void
RemoteWaitSetRelease(CdWaitSet *ws, bool failed)
{
	if (failed || ws != &kept)
		wait_set_free(ws);
	ws->in_use = false;
	if (ws != &kept)
		pfree(ws);
}

/*
 * wait_set_build makes the wait set again for the slots that wait.
 */
static void
wait_set_build(CdWaitSet *ws, CdWaitSlot *slots, int n)
{
	int			waiting = 0;

	wait_set_free(ws);
	for (int i = 0; i < n; i++)
		waiting += slots[i].events != 0;
	ws->set = CreateWaitEventSet(TopMemoryContext, waiting + 2);
	ws->socks = MemoryContextAlloc(TopMemoryContext, sizeof(pgsocket) * Max(waiting, 1));
	ws->events = MemoryContextAlloc(TopMemoryContext, sizeof(int) * Max(waiting, 1));
	ws->generation = RemoteSocketGeneration;
	AddWaitEventToSet(ws->set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(ws->set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	for (int i = 0; i < n; i++)
	{
		if (slots[i].events == 0)
			continue;
		slots[i].pos = AddWaitEventToSet(ws->set, slots[i].events, slots[i].sock, NULL, NULL);
		ws->socks[slots[i].pos - 2] = slots[i].sock;
		ws->events[slots[i].pos - 2] = slots[i].events;
		ws->nsocks++;
	}
}

/*
 * wait_set_place finds each waiting slot's socket in the wait set and
 * sets the events it waits for there; false when one is not there.
 */
static bool
wait_set_place(CdWaitSet *ws, CdWaitSlot *slots, int n)
{
	if (ws->set == NULL || ws->stale || ws->generation != RemoteSocketGeneration)
		return false;
	for (int i = 0; i < n; i++)
	{
		int			j;

		slots[i].pos = -1;
		if (slots[i].events == 0)
			continue;
		for (j = 0; j < ws->nsocks && ws->socks[j] != slots[i].sock; j++)
			;
		if (j == ws->nsocks)
			return false;
		slots[i].pos = j + 2;
		if (ws->events[j] != slots[i].events)
		{
			ModifyWaitEvent(ws->set, j + 2, slots[i].events, NULL);
			ws->events[j] = slots[i].events;
		}
	}
	return true;
}

/*
 * RemoteWaitSlots waits until the socket of one of 'slots' with events
 * (CdWaitSlot.events, 0: not waiting) is ready, the latch is set, or
 * 'timeout' ms pass (-1: no limit), and marks the slots whose socket is
 * ready (CdWaitSlot.ready); then services interrupts when
 * 'interruptible'.  The wait set is 'ws' (RemoteWaitSetAcquire), made
 * again only when a slot's socket is not in it.
 */
void
RemoteWaitSlots(CdWaitSet *ws, CdWaitSlot *slots, int n, long timeout,
				bool interruptible)
{
	WaitEvent  *events;
	int			got;

	if (!wait_set_place(ws, slots, n))
		wait_set_build(ws, slots, n);
	for (int i = 0; i < n; i++)
		slots[i].ready = false;
	events = palloc(sizeof(WaitEvent) * (ws->nsocks + 2));
	WaitsBegin();
	got = WaitEventSetWait(ws->set, timeout, events, ws->nsocks + 2, PG_WAIT_EXTENSION);
	for (int e = 0; e < got; e++)
	{
		bool		wanted = false;

		if (events[e].events & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			continue;
		}
		for (int i = 0; i < n; i++)
			if (slots[i].events != 0 && slots[i].pos == events[e].pos)
			{
				slots[i].ready = true;
				wanted = true;
			}
		/* a socket kept in the set for later: wait without it next time */
		if (!wanted)
			ws->stale = true;
	}
	pfree(events);
	if (interruptible)
		CHECK_FOR_INTERRUPTS();
	{
		bool		answered = false;

		for (int i = 0; i < n; i++)
			answered |= slots[i].ready;
		WaitsEnd(answered, interruptible);
	}
}

/*
 * RemoteWaitEvents returns the wait-set events for what a poll said it
 * waits for.
 */
int
RemoteWaitEvents(CdPollResult r)
{
	return r == CD_POLL_WRITE ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE;
}

/*
 * ended records a command's outcome.
 */
static void
ended(CdGroupCommand *cmd, CdWaitSlot *slot, bool ok)
{
	cmd->ok = ok;
	slot->events = 0;
	cmd->conn->in_flight = false;
}

/*
 * step polls a sent command once and notes what it waits for next.
 */
static void
step(CdGroupCommand *cmd, CdWaitSlot *slot)
{
	CdConnection *conn = cmd->conn;
	int64		rows = 0;
	CdPollResult r = conn->adapter->poll(conn->handle, NULL, &rows, &cmd->err);

	if (r == CD_POLL_DONE || r == CD_POLL_FAILED)
		ended(cmd, slot, r == CD_POLL_DONE);
	else
		slot->events = RemoteWaitEvents(r);
}

/*
 * run_one runs a command to completion with its adapter's exec.
 */
static void
run_one(CdGroupCommand *cmd, CdWaitSlot *slot, int flags)
{
	CdConnection *conn = cmd->conn;
	int64		rows;

	ended(cmd, slot, conn->adapter->exec(conn->handle, cmd->nsetup, cmd->setup, cmd->sql,
										 0, NULL, flags, NULL, &rows, &cmd->err));
}

/*
 * cancel_waiting asks every shard whose command is still in flight to
 * stop it, all within one collegedb.cleanup_timeout; their connections
 * are closed at abort (in_flight stays set).
 */
static void
cancel_waiting(CdGroupCommand *cmds, CdWaitSlot *slots, int n)
{
	TimestampTz deadline = AdapterCleanupDeadline();

	for (int i = 0; i < n; i++)
	{
		long		left = AdapterWaitTimeout(deadline);

		if (slots[i].events != 0 && cmds[i].conn->handle && left > 0)
			cmds[i].conn->adapter->cancel(cmds[i].conn->handle, (int) left);
	}
}

/*
 * ConnectionGroupExec runs each of 'cmds' (parameterless, no rows) on its
 * connection with exec flags 'flags' (CD_EXEC_*), all at once, and fills
 * in each one's outcome (ok, err).  A connection that is closed fails
 * with 08003; the caller closes those lost in the command
 * (err.connection_lost).  Only interrupts (and errors of the front) are
 * raised, after every command still in flight was cancelled.
 */
void
ConnectionGroupExec(CdGroupCommand *cmds, int n, int flags)
{
	bool		interruptible;
	TimestampTz deadline = AdapterExecDeadline(flags, &interruptible);
	CdWaitSlot *slots = palloc0(sizeof(CdWaitSlot) * Max(n, 1));
	CdWaitSet  *volatile ws = NULL;
	int			async = 0;

	for (int i = 0; i < n; i++)
	{
		CdConnection *conn = cmds[i].conn;

		cmds[i].ok = false;
		memset(&cmds[i].err, 0, sizeof(cmds[i].err));
		slots[i].pos = -1;
		if (conn->handle == NULL)
		{
			AdapterSetError(&cmds[i].err, "08003", true,
							"the connection to the shard is closed", NULL, NULL);
			continue;
		}
		/* abandoned midway (an interrupt): closed at abort */
		conn->in_flight = true;
		conn->in_flight_level = GetCurrentTransactionNestLevel();
		async += conn->adapter->send != NULL;
	}

	PG_TRY();
	{
		/* everything is sent before anything is awaited */
		for (int i = 0; i < n && async > 1; i++)
		{
			CdConnection *conn = cmds[i].conn;

			if (conn->handle == NULL || conn->adapter->send == NULL)
				continue;
			slots[i].sock = conn->adapter->socket(conn->handle);
			if (!conn->adapter->send(conn->handle, cmds[i].nsetup, cmds[i].setup,
									 cmds[i].sql, 0, NULL, flags, &cmds[i].err))
				ended(&cmds[i], &slots[i], false);
			else
				step(&cmds[i], &slots[i]);
		}
		/* the synchronous ones (and a lone asynchronous one) meanwhile */
		for (int i = 0; i < n; i++)
			if (cmds[i].conn->handle != NULL && cmds[i].conn->in_flight &&
				slots[i].events == 0 && (async <= 1 || cmds[i].conn->adapter->send == NULL))
				run_one(&cmds[i], &slots[i], flags);

		for (;;)
		{
			bool		waiting = false;

			for (int i = 0; i < n; i++)
				waiting |= slots[i].events != 0;
			if (!waiting)
				break;
			if (AdapterDeadlinePassed(deadline) || (!interruptible && AdapterStopWaiting()))
			{
				/* the protocol is midway on every one still waiting */
				cancel_waiting(cmds, slots, n);
				for (int i = 0; i < n; i++)
					if (slots[i].events != 0)
					{
						AdapterSetGaveUp(&cmds[i].err, flags);
						ended(&cmds[i], &slots[i], false);
					}
				break;
			}
			if (ws == NULL)
				ws = RemoteWaitSetAcquire();
			RemoteWaitSlots(ws, slots, n, AdapterWaitTimeout(deadline), interruptible);
			for (int i = 0; i < n; i++)
				if (slots[i].events != 0 && slots[i].ready)
					step(&cmds[i], &slots[i]);
		}
	}
	PG_CATCH();
	{
		if (ws)
			RemoteWaitSetRelease(ws, true);
		cancel_waiting(cmds, slots, n);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (ws)
		RemoteWaitSetRelease(ws, false);
	pfree(slots);
}

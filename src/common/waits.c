/*-------------------------------------------------------------------------
 *
 * waits.c
 *	  What each backend publishes for the detection of deadlocks across
 *	  shards (remote/deadlock.c): its remote sessions, since when it waits
 *	  for a shard's answer, and the flag that makes it the victim.
 *
 * One slot per backend (indexed by MyBackendId, MaxBackends slots) holds
 * the backend's pid and PGPROC number, a counter of its top-level
 * transactions (a verdict about an ended transaction is ignored), when
 * its current transaction began, when its current wait for a shard began
 * (0: not waiting), and the session ids of its open shard connections
 * with their servers (PostgreSQL: the shard backend's pid; MySQL: the
 * connection's thread id), at most CD_WAITS_MAX_SESSIONS of them: a
 * backend with more connections is not seen on the others' shards.  The
 * owner writes its slot under the slot's spinlock; the detector copies
 * them under it.  The wait's start and the victim flag are atomics, read
 * and written on every wait.
 *
 * The adapters' and the remote layer's waits call WaitsBegin before they
 * sleep and WaitsEnd after they woke, which raises 40P01 when the
 * detector chose this backend's current transaction.  The error aborts
 * the front transaction, whose abort rolls back the shards' transactions
 * and so releases their locks.  Without preload nothing is published and
 * nothing is detected.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/backendid.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "collegedb.h"

typedef struct WaitsSlot
{
	slock_t		mutex;			/* protects what is not atomic */
	int			pid;			/* 0: unused */
	int			procno;
	Oid			database;
	TimestampTz xact_start;
	int			nsessions;
	CdWaitsSession sessions[CD_WAITS_MAX_SESSIONS];
	char		detail[CD_WAITS_DETAIL_LEN];	/* the victim's errdetail */
	pg_atomic_uint64 xact;		/* top-level transactions begun */
	pg_atomic_uint64 wait_start;	/* TimestampTz; 0: not waiting */
	pg_atomic_uint64 victim;	/* the xact chosen as victim; 0: none */
} WaitsSlot;

static WaitsSlot *slots = NULL;
static WaitsSlot *my_slot = NULL;
static bool raised_victim = false;	/* this transaction got our 40P01 */

static Size
waits_shmem_size(void)
{
	return mul_size(MaxBackends, sizeof(WaitsSlot));
}

/* holding AddinShmemInitLock */
static void
waits_shmem_init(void)
{
	bool		found;

	slots = ShmemInitStruct("collegedb waits", waits_shmem_size(), &found);
	if (!found)
	{
		memset(slots, 0, waits_shmem_size());
		for (int i = 0; i < MaxBackends; i++)
		{
			SpinLockInit(&slots[i].mutex);
			pg_atomic_init_u64(&slots[i].xact, 1);
			pg_atomic_init_u64(&slots[i].wait_start, 0);
			pg_atomic_init_u64(&slots[i].victim, 0);
		}
	}
}

/* the backend leaves: nothing of it stays published */
static void
waits_exit(int code, Datum arg)
{
	if (my_slot == NULL)
		return;
	SpinLockAcquire(&my_slot->mutex);
	my_slot->pid = 0;
	my_slot->nsessions = 0;
	SpinLockRelease(&my_slot->mutex);
	pg_atomic_write_u64(&my_slot->wait_start, 0);
	pg_atomic_write_u64(&my_slot->victim, 0);
	my_slot = NULL;
}

/*
 * slot returns this backend's slot, taking it at the first call; NULL
 * without shared memory or before the backend has an id.
 */
static WaitsSlot *
slot(void)
{
	if (my_slot != NULL)
		return my_slot;
	if (!ShmemIsPreloaded() || slots == NULL || MyBackendId == InvalidBackendId ||
		MyBackendId > MaxBackends || MyProc == NULL)
		return NULL;
	my_slot = &slots[MyBackendId - 1];
	SpinLockAcquire(&my_slot->mutex);
	my_slot->pid = MyProcPid;
	my_slot->procno = MyProc->pgprocno;
	my_slot->database = MyDatabaseId;
	my_slot->xact_start = 0;
	my_slot->nsessions = 0;
	my_slot->detail[0] = '\0';
	SpinLockRelease(&my_slot->mutex);
	pg_atomic_fetch_add_u64(&my_slot->xact, 1);
	pg_atomic_write_u64(&my_slot->wait_start, 0);
	pg_atomic_write_u64(&my_slot->victim, 0);
	before_shmem_exit(waits_exit, 0);
	return my_slot;
}

/* a top-level transaction ended: a verdict about it no longer counts */
static void
waits_xact_callback(XactEvent event, void *arg)
{
	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PREPARE && event != XACT_EVENT_PARALLEL_COMMIT &&
		event != XACT_EVENT_PARALLEL_ABORT)
		return;
	raised_victim = false;
	if (my_slot == NULL)
		return;
	pg_atomic_fetch_add_u64(&my_slot->xact, 1);
	pg_atomic_write_u64(&my_slot->wait_start, 0);
	pg_atomic_write_u64(&my_slot->victim, 0);
}

/* a subtransaction that caught an error mid-wait is not waiting any more */
static void
waits_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && my_slot != NULL)
		pg_atomic_write_u64(&my_slot->wait_start, 0);
}

/*
 * WaitsInit registers the slots' part of shared memory (only while
 * preloading) and the transaction callbacks that count transactions.
 */
void
WaitsInit(void)
{
	ShmemRegister(NULL, 0, waits_shmem_size, waits_shmem_init);
	RegisterXactCallback(waits_xact_callback, NULL);
	RegisterSubXactCallback(waits_subxact_callback, NULL);
}

/*
 * WaitsSessionOpened publishes a new shard connection: its server and
 * the shard's session id.  Beyond CD_WAITS_MAX_SESSIONS, it is not
 * published.
 */
void
WaitsSessionOpened(Oid serverid, int64 session)
{
	WaitsSlot  *s = slot();

	if (s == NULL)
		return;
	SpinLockAcquire(&s->mutex);
	if (s->nsessions < CD_WAITS_MAX_SESSIONS)
	{
		s->sessions[s->nsessions].serverid = serverid;
		s->sessions[s->nsessions].session = session;
		s->nsessions++;
	}
	SpinLockRelease(&s->mutex);
}

/*
 * WaitsSessionClosed withdraws a shard connection that closed.
 */
void
WaitsSessionClosed(Oid serverid, int64 session)
{
	WaitsSlot  *s = slot();

	if (s == NULL)
		return;
	SpinLockAcquire(&s->mutex);
	for (int i = 0; i < s->nsessions; i++)
		if (s->sessions[i].serverid == serverid && s->sessions[i].session == session)
		{
			s->sessions[i] = s->sessions[s->nsessions - 1];
			s->nsessions--;
			break;
		}
	SpinLockRelease(&s->mutex);
}

/*
 * WaitsBegin marks that this backend is about to sleep until a shard
 * answers; a wait already marked keeps its start.  Never throws.
 */
void
WaitsBegin(void)
{
	WaitsSlot  *s = my_slot;

	if (s == NULL || !IsTransactionState() ||
		pg_atomic_read_u64(&s->wait_start) != 0)
		return;
	if (s->xact_start != GetCurrentTransactionStartTimestamp())
	{
		SpinLockAcquire(&s->mutex);
		s->xact_start = GetCurrentTransactionStartTimestamp();
		SpinLockRelease(&s->mutex);
	}
	pg_atomic_write_u64(&s->wait_start, (uint64) GetCurrentTimestamp());
}

/*
 * WaitsEnd follows a wake-up: 'answered' says the shard's socket was
 * ready (the wait is over; a latch or a timeout leaves it marked).  With
 * 'may_raise', raises 40P01 when the detector chose this backend's
 * current transaction as the victim of a deadlock across shards.
 */
void
WaitsEnd(bool answered, bool may_raise)
{
	WaitsSlot  *s = my_slot;
	uint64		victim;
	char		detail[CD_WAITS_DETAIL_LEN];

	if (s == NULL)
		return;
	if (answered)
		pg_atomic_write_u64(&s->wait_start, 0);
	if (!may_raise)
		return;
	victim = pg_atomic_read_u64(&s->victim);
	if (victim == 0 || victim != pg_atomic_read_u64(&s->xact))
		return;
	pg_atomic_write_u64(&s->victim, 0);
	pg_atomic_write_u64(&s->wait_start, 0);
	SpinLockAcquire(&s->mutex);
	strlcpy(detail, s->detail, sizeof(detail));
	SpinLockRelease(&s->mutex);
	raised_victim = true;
	ereport(ERROR,
			(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
			 errmsg("canceling the transaction since it was involved in a deadlock across shards"),
			 detail[0] ? errdetail_internal("%s", detail) : 0,
			 errhint("collegedb.deadlock_detection found the cycle after deadlock_timeout; retry the transaction.")));
}

/*
 * WaitsVictimPending says, without raising, whether WaitsEnd would raise.
 */
bool
WaitsVictimPending(void)
{
	uint64		victim;

	if (my_slot == NULL)
		return false;
	victim = pg_atomic_read_u64(&my_slot->victim);
	return victim != 0 && victim == pg_atomic_read_u64(&my_slot->xact);
}

/*
 * WaitsRaisedVictim says whether this transaction was cancelled by
 * WaitsEnd: such a 40P01 is not a shard's failure to catch and go on.
 */
bool
WaitsRaisedVictim(void)
{
	return raised_victim;
}

/*
 * WaitsSnapshot copies the published slots of the backends of 'database'
 * that have at least one shard session, into palloc'd memory; *n says
 * how many.
 */
CdWaitsBackend *
WaitsSnapshot(Oid database, int *n)
{
	CdWaitsBackend *out;

	*n = 0;
	if (!ShmemIsPreloaded() || slots == NULL)
		return NULL;
	out = palloc(sizeof(CdWaitsBackend) * MaxBackends);
	for (int i = 0; i < MaxBackends; i++)
	{
		WaitsSlot  *s = &slots[i];
		CdWaitsBackend *b = &out[*n];

		SpinLockAcquire(&s->mutex);
		if (s->pid == 0 || s->database != database || s->nsessions == 0)
		{
			SpinLockRelease(&s->mutex);
			continue;
		}
		b->index = i;
		b->pid = s->pid;
		b->xact_start = s->xact_start;
		b->nsessions = s->nsessions;
		memcpy(b->sessions, s->sessions, sizeof(CdWaitsSession) * s->nsessions);
		SpinLockRelease(&s->mutex);
		b->xact = pg_atomic_read_u64(&s->xact);
		b->wait_start = (TimestampTz) pg_atomic_read_u64(&s->wait_start);
		(*n)++;
	}
	return out;
}

/*
 * WaitsChooseVictim makes transaction 'xact' of the backend in slot
 * 'index' the victim, with 'detail' for its error, and wakes it; false
 * when that transaction is over or the backend is not waiting any more.
 */
bool
WaitsChooseVictim(int index, int pid, uint64 xact, const char *detail)
{
	WaitsSlot  *s;
	int			procno;

	if (!ShmemIsPreloaded() || slots == NULL || index < 0 || index >= MaxBackends)
		return false;
	s = &slots[index];
	SpinLockAcquire(&s->mutex);
	if (s->pid != pid || pg_atomic_read_u64(&s->xact) != xact ||
		pg_atomic_read_u64(&s->wait_start) == 0)
	{
		SpinLockRelease(&s->mutex);
		return false;
	}
	strlcpy(s->detail, detail, sizeof(s->detail));
	procno = s->procno;
	pg_atomic_write_u64(&s->victim, xact);
	SpinLockRelease(&s->mutex);
	SetLatch(&ProcGlobal->allProcs[procno].procLatch);
	return true;
}

/*-------------------------------------------------------------------------
 *
 * outbox.h
 *	  The coordinator's delivery of topology groups to their members
 *	  (worker/outbox.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_OUTBOX_H
#define COLLEGEDB_WORKER_OUTBOX_H

#include "postgres.h"

/* OutboxDeliver runs outside a transaction, in the coordinator */
extern long OutboxDeliver(void);
extern void OutboxWakeAtCommit(void);

#endif							/* COLLEGEDB_WORKER_OUTBOX_H */

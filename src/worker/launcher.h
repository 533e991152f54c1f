/*-------------------------------------------------------------------------
 *
 * launcher.h
 *	  The launcher: one coordinator per database that has collegedb
 *	  (worker/launcher.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_WORKER_LAUNCHER_H
#define COLLEGEDB_WORKER_LAUNCHER_H

#include "postgres.h"

#include "fmgr.h"

extern void LauncherInit(void);
extern void LauncherWake(Oid database);
extern void LauncherNoticeDatabase(void);
extern bool LauncherServesDatabase(void);
extern bool LauncherCoordinatorRuns(void);
extern pid_t LauncherCoordinatorPid(void);
extern char *LauncherCoordinatorProblem(bool *no_slot);
extern bool LauncherClaimSlot(int index, Oid database);
extern void LauncherNoExtension(void);
extern void LauncherWakeCoordinator(Oid database);
extern PGDLLEXPORT void collegedb_launcher_main(Datum arg);

#endif							/* COLLEGEDB_WORKER_LAUNCHER_H */

/*-------------------------------------------------------------------------
 *
 * dialects.h
 *	  The adapters' operations tables, one per dialect, for the registry.
 *
 * Only adapters/registry.c and the files that define the tables include
 * this header: everything else reaches a dialect through the registry
 * (adapter.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_DIALECTS_H
#define COLLEGEDB_DIALECTS_H

#include "adapters/adapter.h"

extern const CdAdapter CdPostgresAdapter;	/* pg.c */
extern const CdAdapter CdSqliteAdapter; /* sqlite.c */
extern const CdAdapter CdMysqlAdapter;	/* mysql.c */

#endif							/* COLLEGEDB_DIALECTS_H */

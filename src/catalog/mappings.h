/*-------------------------------------------------------------------------
 *
 * mappings.h
 *	  Reads and writes of the mapping store (catalog table collegedb.mapping).
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CATALOG_MAPPINGS_H
#define COLLEGEDB_CATALOG_MAPPINGS_H

#include "postgres.h"

extern bool MappingFind(const char *stored_key, char *shard);
extern void MappingInsert(const char *stored_key, const char *shard, char *owner);

#endif							/* COLLEGEDB_CATALOG_MAPPINGS_H */

/*-------------------------------------------------------------------------
 *
 * connection_internal.h
 *	  The connection cache entry, shared by connection.c and execute.c only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_CONNECTION_INTERNAL_H
#define COLLEGEDB_CONNECTION_INTERNAL_H

#include "remote/remote.h"

typedef struct CdConnKey
{
	Oid			serverid;
	Oid			userid;
} CdConnKey;

struct CdConnection
{
	CdConnKey	key;			/* hash key: must be first */
	char		shard[NAMEDATALEN];
	const CdAdapter *adapter;
	void	   *handle;			/* NULL: not connected */
	bool		fresh;			/* connected for the current statement */

	/*
	 * xact_depth is 0 while no remote transaction is open; otherwise the
	 * front transaction nesting level the remote side has reached (1: BEGIN
	 * sent; n > 1: also SAVEPOINT s2 .. sn).
	 */
	int			xact_depth;
	bool		in_flight;		/* a statement is on the wire */
	bool		doomed;			/* remote transaction lost: fail until the
								 * front transaction ends */
	bool		invalidated;	/* server or mapping changed: reconnect */
	uint32		server_hash;
};

extern void ConnectionClose(CdConnection *conn);
extern void ConnectionOpen(CdConnection *conn, const CdShard *shard);

#endif							/* COLLEGEDB_CONNECTION_INTERNAL_H */

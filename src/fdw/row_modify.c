/*-------------------------------------------------------------------------
 *
 * row_modify.c
 *	  UPDATE and DELETE of collegedb foreign tables row by row, as
 *	  postgres_fdw runs a statement it cannot send whole: the scan fetches
 *	  the rows with their identity on the shard, the front computes the
 *	  new values, and each row is changed by its own statement, routed by
 *	  the row's key and guarded.
 *
 * This path serves what direct modification (fdw_plan.c) cannot: new
 * values or conditions some dialect among the shards does not compute as
 * PostgreSQL does (numeric arithmetic on SQLite, upper() anywhere), joins
 * with other relations (UPDATE ... FROM, DELETE ... USING), and RETURNING
 * where a dialect has none.
 *
 * A row is identified on its shard by the key (which routes it) and the
 * dialect's row identity (CdAdapter.row_identity: PostgreSQL's ctid,
 * SQLite's rowid), which the scan of the target selects in the shard's
 * write transaction, locking the rows it returns (row_lock_clause; SQLite's
 * write transaction holds the database lock).  A ctid is not stable across
 * a move, but a move deletes the key's rows on the source only under the
 * key's lock, which the rows' locks and the guard of each write keep from
 * it until the front's transaction ends.  The identity travels to the
 * ModifyTable as the junk "ctid" column: a tid, or a 64-bit integer
 * encoded in one (FdwRowIdentity, fdw_exec.c, whose scan reads it).  A dialect without a row identity
 * (MySQL) tells its rows apart by the table's primary key, which the first
 * shard of the dialect names (CdAdapter.primary_key_sql, asked once per
 * statement) and the row's old values give; a table without one there is
 * refused when a row of such a shard is to change.
 *
 * RETURNING gives the row as the front computed it (UPDATE) or fetched it
 * (DELETE), which is what the same statement on a local table returns, on
 * every dialect.  The key column cannot change (FdwEnsureKeyUnchanged, which
 * direct modification calls too).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "optimizer/appendinfo.h"
#include "optimizer/inherit.h"
#include "optimizer/pathnode.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "catalog/shards.h"
#include "cd_errcodes.h"
#include "fdw/fdw.h"
#include "remote/remote.h"
#include "router/router.h"

/* fdw_private of a row-by-row UPDATE or DELETE */
enum RowModifyPrivate
{
	RowPrivSql = 0,				/* List of the per-row statement per dialect */
	RowPrivSetAttnos			/* IntList: the columns an UPDATE sets */
};

typedef struct RowModifyState
{
	FdwModifyKind kind;			/* FDW_MODIFY_ROWS */
	CdForeignTable *table;
	CmdType		op;
	const char *sql[CD_MAX_DIALECTS];	/* by identity; without it, by key only */
	const char *id_sql[CD_MAX_DIALECTS];	/* by identity; "" without it */
	int			nset;
	AttrNumber *set_attnos;
	AttrNumber	ctid_attno;		/* the junk identity in the subplan's rows */
	AttrNumber	wholerow_attno; /* the junk old row */
	bool		pk_asked;		/* the primary keys below are known */
	int			npk[CD_MAX_DIALECTS];	/* columns of the primary key, by dialect */
	const char *pk_sql[CD_MAX_DIALECTS];	/* each row's statement by it */
	AttrNumber *pk_attnos[CD_MAX_DIALECTS];
	MemoryContext row_context;	/* reset before each row */
	FdwObserved observed;		/* under EXPLAIN ANALYZE */
} RowModifyState;

/*
 * collegedb_add_update_targets asks the scan of an UPDATE's or DELETE's
 * target for each row's identity (the junk "ctid"), and for DELETE the old
 * row too (its key routes it, RETURNING shows it).  PostgreSQL itself asks
 * for the whole row of an UPDATE.
 */
void
collegedb_add_update_targets(PlannerInfo *root, Index rtindex, RangeTblEntry *target_rte,
							 Relation target_relation)
{
	Var		   *var = makeVar(rtindex, SelfItemPointerAttributeNumber, TIDOID, -1, InvalidOid, 0);

	add_row_identity_var(root, var, rtindex, "ctid");
	if (root->parse->commandType == CMD_DELETE)
		add_row_identity_var(root, makeWholeRowVar(target_rte, rtindex, 0, false),
							 rtindex, "wholerow");
}

/*
 * FdwEnsureKeyUnchanged refuses an UPDATE that sets the key column of a
 * sharded table: the row would have to move to the new key's shard.
 */
void
FdwEnsureKeyUnchanged(const CdForeignTable *table, AttrNumber attno)
{
	if (attno == table->key_attno)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot change the key column of a sharded table"),
				 errhint("Delete the row and insert it under its new key.")));
}

/*
 * RowModifyPlan builds the statement each row sends, for every dialect:
 * "UPDATE t SET c = $1, ... WHERE key = $k AND <identity>" or "DELETE FROM t
 * WHERE ...", the key where the table has one.  The identity takes two
 * parameters, the tid form and the integer form, the one of the row's
 * dialect set and the other NULL; a dialect without a row identity gets no
 * text.
 */
List *
RowModifyPlan(PlannerInfo *root, ModifyTable *plan, Index resultRelation)
{
	RangeTblEntry *rte = planner_rt_fetch(resultRelation, root);
	CdForeignTable *table = FdwTableInfo(rte->relid);
	CmdType		op = plan->operation;
	List	   *attnos = NIL;
	List	   *params = NIL;
	FdwDeparse	d;
	ListCell   *lc;
	int			id_tid,
				id_int;

	if (op == CMD_UPDATE)
	{
		RelOptInfo *rel = find_base_rel(root, resultRelation);
		Bitmapset  *cols = get_rel_all_updated_cols(root, rel);
		int			col = -1;

		while ((col = bms_next_member(cols, col)) >= 0)
		{
			AttrNumber	attno = col + FirstLowInvalidHeapAttributeNumber;

			if (attno <= InvalidAttrNumber)
				elog(ERROR, "system-column update is not supported");
			FdwEnsureKeyUnchanged(table, attno);
			attnos = lappend_int(attnos, attno);
		}
	}

	DeparseInit(&d, table, resultRelation, &params);
	DeparseModify(&d, op);
	foreach(lc, attnos)
	{
		AttrNumber	attno = lfirst_int(lc);
		char		buf[16];

		/* the new values are the row's, computed here: $1 .. $n */
		params = lappend(params, makeNullConst(TEXTOID, -1, InvalidOid));
		snprintf(buf, sizeof(buf), "$%d", list_length(params));
		DeparseAppend(&d, foreach_current_index(lc) == 0 ? " SET " : ", ");
		DeparseColumn(&d, attno);
		DeparseAppend(&d, " = ");
		DeparseAppend(&d, buf);
	}
	if (table->key_attno > 0)
	{
		Oid			type;
		int32		typmod;
		Oid			collation;

		get_atttypetypmodcoll(table->relid, table->key_attno, &type, &typmod, &collation);
		(void) DeparseWhere(&d, NIL, (Expr *) makeNullConst(type, typmod, collation), true);
	}
	id_tid = list_length(params) + 1;
	id_int = id_tid + 1;
	for (int i = 0; i < AdapterCount(); i++)
	{
		const CdAdapter *adapter = AdapterForDialect(i);
		char		own[16],
					other[16];

		if (adapter->row_identity == NULL)
			continue;			/* the primary key's columns follow at execution */
		snprintf(own, sizeof(own), "$%d", adapter->row_identity_int ? id_int : id_tid);
		snprintf(other, sizeof(other), "$%d", adapter->row_identity_int ? id_tid : id_int);
		appendStringInfoString(&d.sql[i], d.nconds[i]++ ? " AND " : " WHERE ");
		appendStringInfo(&d.sql[i], adapter->row_identity_match, own, other);
	}
	return list_make2(DeparseTexts(&d), attnos);
}

/*
 * RowModifyBegin prepares an UPDATE or DELETE row by row: the statements,
 * where the subplan's rows carry the identity (and the old row), a memory
 * context for each row's work.
 */
void
RowModifyBegin(ModifyTableState *mtstate, ResultRelInfo *rinfo, List *fdw_private)
{
	EState	   *estate = mtstate->ps.state;
	Plan	   *subplan = outerPlanState(mtstate)->plan;
	RowModifyState *st = palloc0(sizeof(RowModifyState));
	List	   *attnos = list_nth(fdw_private, RowPrivSetAttnos);
	ListCell   *lc;

	st->kind = FDW_MODIFY_ROWS;
	st->table = FdwTableInfo(RelationGetRelid(rinfo->ri_RelationDesc));
	st->op = mtstate->operation;
	DeparseTextsOf(list_nth(fdw_private, RowPrivSql), st->sql);
	for (int i = 0; i < AdapterCount(); i++)
		st->id_sql[i] = AdapterForDialect(i)->row_identity ? st->sql[i] : "";
	st->nset = list_length(attnos);
	st->set_attnos = palloc(sizeof(AttrNumber) * Max(st->nset, 1));
	foreach(lc, attnos)
		st->set_attnos[foreach_current_index(lc)] = lfirst_int(lc);
	st->ctid_attno = ExecFindJunkAttributeInTlist(subplan->targetlist, "ctid");
	if (!AttributeNumberIsValid(st->ctid_attno))
		elog(ERROR, "could not find junk ctid column");
	st->wholerow_attno = ExecFindJunkAttributeInTlist(subplan->targetlist, "wholerow");
	if (!AttributeNumberIsValid(st->wholerow_attno))
		elog(ERROR, "could not find junk wholerow column");
	st->row_context = AllocSetContextCreate(estate->es_query_cxt, "collegedb row modify",
											ALLOCSET_SMALL_SIZES);
	FdwObservedInit(&st->observed, estate);
	rinfo->ri_FdwState = st;
}

/*
 * junk_row points 'tuple' at the row's old values (the junk whole row).
 */
static void
junk_row(RowModifyState *st, TupleTableSlot *planSlot, HeapTupleData *tuple)
{
	bool		isnull;
	Datum		datum = ExecGetJunkAttribute(planSlot, st->wholerow_attno, &isnull);
	HeapTupleHeader header;

	if (isnull)
		elog(ERROR, "wholerow is NULL");
	header = DatumGetHeapTupleHeader(datum);
	tuple->t_len = HeapTupleHeaderGetDatumLength(header);
	ItemPointerSetInvalid(&tuple->t_self);
	tuple->t_tableOid = InvalidOid;
	tuple->t_data = header;
}

/*
 * old_row puts a DELETE's old row into 'slot', which keeps its own copy.
 */
static void
old_row(RowModifyState *st, TupleTableSlot *planSlot, TupleTableSlot *slot)
{
	HeapTupleData tuple;

	junk_row(st, planSlot, &tuple);
	ExecForceStoreHeapTuple(&tuple, slot, false);
	ExecMaterializeSlot(slot);
}

/*
 * primary_key_statement builds, for dialect 'dialect', each row's statement
 * by the primary key that 'shard' names for the table (the same as the
 * statement by identity, its identity replaced by the key's columns, as
 * the parameters after the row's key), or leaves it NULL when there is
 * none the foreign table has every column of.
 */
static void
primary_key_statement(RowModifyState *st, const CdShard *shard, int dialect)
{
	const CdAdapter *adapter = AdapterForDialect(dialect);
	CdForeignTable *table = st->table;
	CaptureRowSink names;
	CdParam		args[2];
	StringInfoData sql;
	int			next;
	ListCell   *lc;

	CaptureRowSinkInit(&names);
	ValuesToParam(CStringGetTextDatum(table->name), false, TEXTOID, &args[0]);
	ValuesToParam(table->schema ? CStringGetTextDatum(table->schema) : (Datum) 0,
				  table->schema == NULL, TEXTOID, &args[1]);
	(void) RemoteExecuteInternal(shard, adapter->primary_key_sql, 2, args, &names.base, false);
	if (names.rows == NIL)
		return;
	st->pk_attnos[dialect] = palloc(sizeof(AttrNumber) * list_length(names.rows));
	foreach(lc, names.rows)
	{
		const char *name = ((CdParam *) lfirst(lc))[0].str;
		AttrNumber	attno = 0;

		for (int i = 0; i < table->natts && name; i++)
		{
			if (table->columns[i] && strcmp(table->columns[i], name) == 0)
				attno = i + 1;
		}
		if (attno == 0)
			return;
		st->pk_attnos[dialect][foreach_current_index(lc)] = attno;
	}

	/* the statement by identity up to its key's condition, then the primary key's */
	initStringInfo(&sql);
	appendStringInfoString(&sql, st->sql[dialect]);
	next = st->nset + (table->key_attno > 0 ? 1 : 0) + 1;
	for (int i = 0; i < list_length(names.rows); i++)
	{
		AttrNumber	attno = st->pk_attnos[dialect][i];
		char	   *column = adapter->quote_ident(table->columns[attno - 1]);
		char		param[16];

		snprintf(param, sizeof(param), "$%d", next + i);
		appendStringInfoString(&sql, table->key_attno > 0 || i > 0 ? " AND " : " WHERE ");
		if (ShippableFamily(get_atttype(table->relid, attno)) == CD_FAMILY_TEXT)
			appendStringInfo(&sql, adapter->expr_rules->text_equal, column, param);
		else
			appendStringInfo(&sql, "%s = %s", column, param);
	}
	st->npk[dialect] = list_length(names.rows);
	st->pk_sql[dialect] = sql.data;
}

/*
 * ask_primary_keys finds, once per statement, the primary key of the
 * table on the first shard of each dialect without a row identity.
 */
static void
ask_primary_keys(RowModifyState *st)
{
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(st));
	bool		asked[CD_MAX_DIALECTS] = {false};
	ListCell   *lc;

	foreach(lc, ShardList())
	{
		const CdShard *shard = lfirst(lc);
		const CdAdapter *adapter = AdapterForDialect(shard->dialect);

		if (asked[shard->dialect] || adapter->row_identity || !adapter->primary_key_sql ||
			(st->table->shard && strcmp(st->table->shard, shard->name) != 0))
			continue;
		asked[shard->dialect] = true;
		primary_key_statement(st, shard, shard->dialect);
	}
	st->pk_asked = true;
	MemoryContextSwitchTo(old);
}

/*
 * collegedb_exec_row_modify changes one row (ExecForeignUpdate and
 * ExecForeignDelete): its statement with the new values, the key and the
 * identity, routed by the key and guarded (a foreign table of a shard's
 * own server: on that shard).  Returns the row for RETURNING, or NULL when
 * the shard changed nothing (the row was changed already by this
 * statement, as a local table skips a row a join matches twice).
 */
TupleTableSlot *
collegedb_exec_row_modify(EState *estate, ResultRelInfo *rinfo,
						  TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	RowModifyState *st = rinfo->ri_FdwState;
	TupleDesc	desc = RelationGetDescr(rinfo->ri_RelationDesc);
	int			nfixed = st->nset + (st->table->key_attno > 0 ? 1 : 0);
	int			nparams;
	const char *const *sql = st->id_sql;
	const char *pk_sql[CD_MAX_DIALECTS];
	CdParam    *params;
	char	   *key = NULL;
	bool		isnull;
	Datum		tid;
	ItemPointer ip;
	int			pk_dialect = -1;
	int64		rows;
	MemoryContext old;
	CdRemoteObserver *previous = NULL;

	if (st->op == CMD_DELETE)
		old_row(st, planSlot, slot);
	tid = ExecGetJunkAttribute(planSlot, st->ctid_attno, &isnull);
	ip = isnull ? NULL : (ItemPointer) DatumGetPointer(tid);
	if (ip == NULL || ItemPointerGetOffsetNumberNoCheck(ip) == 0)
	{
		/*
		 * a row of a dialect without row identities: by its primary key (the
		 * first such dialect's; MySQL is the only one)
		 */
		if (!st->pk_asked)
			ask_primary_keys(st);
		for (int i = 0; i < AdapterCount(); i++)
		{
			pk_sql[i] = "";
			if (st->pk_sql[i] && pk_dialect < 0)
			{
				pk_dialect = i;
				pk_sql[i] = st->pk_sql[i];
			}
		}
		if (pk_dialect < 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 st->op == CMD_UPDATE ?
					 errmsg("cannot update a row of \"%s\" one by one: its shard's table has no primary key",
							get_rel_name(st->table->relid)) :
					 errmsg("cannot delete a row of \"%s\" one by one: its shard's table has no primary key",
							get_rel_name(st->table->relid)),
					 errdetail("The row lives on a shard whose dialect tells one row from another only by the table's primary key, and the statement cannot be sent there whole."),
					 errhint("Give the shards' table a primary key of columns the foreign table has, or write the statement so that it can be sent whole.")));
		sql = pk_sql;
	}
	nparams = nfixed + (pk_dialect >= 0 ? st->npk[pk_dialect] : 2);

	MemoryContextReset(st->row_context);
	old = MemoryContextSwitchTo(st->row_context);
	params = palloc0(sizeof(CdParam) * nparams);
	slot_getallattrs(slot);
	for (int i = 0; i < st->nset; i++)
	{
		AttrNumber	attno = st->set_attnos[i];

		ValuesToParam(slot->tts_values[attno - 1], slot->tts_isnull[attno - 1],
					  TupleDescAttr(desc, attno - 1)->atttypid, &params[i]);
	}
	if (st->table->key_attno > 0)
	{
		AttrNumber	k = st->table->key_attno;
		Oid			type = TupleDescAttr(desc, k - 1)->atttypid;

		if (slot->tts_isnull[k - 1])
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("a row of \"%s\" has no key", get_rel_name(st->table->relid))));
		ValuesToParam(slot->tts_values[k - 1], false, type, &params[st->nset]);
		key = FdwKeyText(slot->tts_values[k - 1], type);
	}
	if (pk_dialect < 0)
		FdwRowIdentityParams(ip, &params[nfixed], &params[nfixed + 1]);
	else
	{
		HeapTupleData tuple;

		junk_row(st, planSlot, &tuple);
		for (int i = 0; i < st->npk[pk_dialect]; i++)
		{
			AttrNumber	attno = st->pk_attnos[pk_dialect][i];
			Datum		value = heap_getattr(&tuple, attno, desc, &isnull);

			ValuesToParam(value, isnull, TupleDescAttr(desc, attno - 1)->atttypid,
						  &params[nfixed + i]);
		}
	}

	if (st->observed.observer)
		previous = RemoteObserve(st->observed.observer);
	if (st->table->shard)
	{
		const CdShard *shard = ShardLookup(st->table->shard);

		rows = RemoteExecute(shard, sql[shard->dialect], nparams, params, NULL, true);
	}
	else
		rows = RouterExecuteDialects(key, strlen(key), sql, nparams, params, NULL, true);
	if (st->observed.observer)
		(void) RemoteObserve(previous);
	MemoryContextSwitchTo(old);
	return rows > 0 ? slot : NULL;
}

/*
 * RowModifyExplain shows where the rows go, and with VERBOSE each
 * dialect's per-row statement.
 */
void
RowModifyExplain(ResultRelInfo *rinfo, List *fdw_private, ExplainState *es)
{
	CdForeignTable *table = FdwTableInfo(RelationGetRelid(rinfo->ri_RelationDesc));
	RowModifyState *st = rinfo->ri_FdwState;
	uint32		reach = FdwFleetDialects(table);
	List	   *texts = list_nth(fdw_private, RowPrivSql);

	ExplainPropertyText("Row by Row", table->shard ? table->shard : "each row to its key's shard",
						es);
	if (es->verbose)
	{
		for (int d = 0; d < AdapterCount(); d++)
		{
			const char *sql = strVal(list_nth(texts, d));

			if (!(reach & (1u << d)))
				continue;
			ExplainPropertyText(psprintf("Remote SQL per row (%s)", AdapterDialectName(d)),
								AdapterForDialect(d)->row_identity ? sql :
								psprintf("%s AND <the primary key's columns>", sql), es);
		}
	}
	if (es->analyze && st && st->observed.observer)
		FdwExplainObserved(&st->observed, es);
}

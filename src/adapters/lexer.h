/*-------------------------------------------------------------------------
 *
 * lexer.h
 *	  The small statement lexer the adapters share: it finds $n
 *	  placeholders, emptiness, the first word and whether a statement only
 *	  reads, by the lexical rules each adapter gives it for its dialect.
 *
 * Only the adapters use it: each one declares its rules (CdAdapter.lexer),
 * by which AdapterScan classifies its statements, and the SQLite and MySQL
 * adapters rewrite $n into their own placeholders or literals with it.
 * The remote layer never lexes; it asks AdapterScan.
 *
 *-------------------------------------------------------------------------
 */
#ifndef COLLEGEDB_LEXER_H
#define COLLEGEDB_LEXER_H

#include "postgres.h"

#include "lib/stringinfo.h"

#include "adapters/adapter.h"

/*
 * CdLexerRules describes one dialect's lexical rules and its keywords.
 * The word lists are NULL-terminated, lower case.  An entry of
 * transaction_words may be two words ("prepare transaction"), which the
 * statement's first two words must be.
 */
struct CdLexerRules
{
	bool		nested_comments;	/* PostgreSQL nests block comments */
	bool		dollar_quotes;	/* PostgreSQL $tag$ ... $tag$ */
	bool		e_strings;		/* PostgreSQL E'...' takes backslash escapes */
	bool		backslash_escapes;	/* MySQL: in every '...' and "..." */
	bool		backtick_idents;	/* MySQL and SQLite `...` */
	bool		bracket_idents; /* SQLite [...] */
	bool		hash_comments;	/* MySQL # ... */
	bool		dash_comment_space; /* MySQL: "--" needs a space after it */
	bool		executable_comments;	/* MySQL: the text of / *! ... * / and
										 * / *M! ... * / is code */
	bool		strings_are_names;	/* SQLite takes 'x' as a name in DDL */
	const char *const *read_words;	/* first words of statements that read */
	const char *const *write_words; /* any of these anywhere: a write */
	const char *const *transaction_words;	/* first words of transaction
											 * control */
	const char *const *statement_name_words;	/* a prepared statement's
												 * name follows these */
};

/*
 * LexerEmit appends the dialect's replacement for placeholder $n
 * (1-based) to 'out'.
 */
typedef void (*LexerEmit) (StringInfo out, int n, void *arg);

/*
 * LexerScan scans 'sql' by 'rules' and returns its shape (see
 * CdStatementShape).  With 'out' given, it also copies the statement there,
 * each $n outside literals, quoted identifiers and comments replaced by
 * what 'emit' appends.
 */
extern CdStatementShape LexerScan(const char *sql, const CdLexerRules *rules,
								  StringInfo out, LexerEmit emit, void *arg);

#endif							/* COLLEGEDB_LEXER_H */

/*-------------------------------------------------------------------------
 *
 * lexer.c
 *	  A small lexer that finds $n placeholders, emptiness, the first word
 *	  and whether a statement only reads, by the lexical rules an adapter
 *	  gives it for its dialect.
 *
 * Callers write $1..$n in every dialect.  The SQLite and MySQL adapters
 * rewrite them into their own form with this scan, and every statement is
 * classified with it by its adapter's rules (AdapterScan).  The lexer knows
 * string literals, quoted identifiers, comments, PostgreSQL's dollar
 * quotes and MySQL's executable comments (whose text the server runs, so
 * here it is code); it does not parse SQL.  A statement is a read only
 * when its first word is one of the dialect's read words and no write word
 * appears anywhere outside literals and comments: what the lexer cannot
 * prove a read is a write.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "adapters/lexer.h"

/* the prefix of the names of collegedb's own objects on shards */
#define RESERVED_PREFIX "collegedb_"

static inline bool
is_ident_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		(c >= '0' && c <= '9') || c == '_' || c == '$' || c >= 0x80;
}

static inline bool
is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/*
 * skip_quoted returns the position just past a literal or quoted identifier
 * that opens at p and closes with 'close'.  A doubled closing character
 * stands for itself; with 'backslash' a backslash escapes the next
 * character.  An unterminated literal runs to the end: the shard will
 * report it.
 */
static const char *
skip_quoted(const char *p, char close, bool backslash)
{
	p++;						/* opening character */
	while (*p)
	{
		if (backslash && *p == '\\' && p[1])
			p += 2;
		else if (*p == close)
		{
			if (p[1] == close)
				p += 2;
			else
				return p + 1;
		}
		else
			p++;
	}
	return p;
}

/*
 * skip_block_comment returns the position just past a comment opening at p
 * ("/" "*"); PostgreSQL nests them, the others do not.
 */
static const char *
skip_block_comment(const char *p, bool nested)
{
	int			depth = 0;

	while (*p)
	{
		if (p[0] == '/' && p[1] == '*')
		{
			depth = nested ? depth + 1 : 1;
			p += 2;
		}
		else if (p[0] == '*' && p[1] == '/')
		{
			p += 2;
			if (--depth == 0)
				return p;
		}
		else
			p++;
	}
	return p;
}

static const char *
skip_line_comment(const char *p)
{
	while (*p && *p != '\n')
		p++;
	return p;
}

/*
 * executable_comment_end returns the position just past the opener of a
 * MySQL executable comment at p ("/" "*!" or "/" "*M!", then an optional
 * version number), or NULL when p opens an ordinary comment.
 */
static const char *
executable_comment_end(const char *p)
{
	const char *q = p + 2;

	if (*q == 'M' && q[1] == '!')
		q += 2;
	else if (*q == '!')
		q++;
	else
		return NULL;
	while (*q >= '0' && *q <= '9')
		q++;
	return q;
}

/*
 * dollar_quote_end returns the end of a PostgreSQL dollar-quoted string
 * opening at p, or NULL when p does not open one ($tag$ with tag an
 * identifier not starting with a digit, or $$).
 */
static const char *
dollar_quote_end(const char *p)
{
	const char *q = p + 1;
	size_t		taglen;
	const char *body;

	if (*q >= '0' && *q <= '9')
		return NULL;
	while (*q && *q != '$' && is_ident_char((unsigned char) *q))
		q++;
	if (*q != '$')
		return NULL;
	taglen = q - p + 1;			/* includes both dollars */
	body = q + 1;
	while (*body)
	{
		if (*body == '$' && strncmp(body, p, taglen) == 0)
			return body + taglen;
		body++;
	}
	return body;
}

static bool
word_in(const char *word, size_t len, const char *const *words)
{
	if (words == NULL)
		return false;
	for (int i = 0; words[i]; i++)
		if (strlen(words[i]) == len && pg_strncasecmp(word, words[i], len) == 0)
			return true;
	return false;
}

/*
 * word_pair_in says whether 'first' (lower case) followed by the word at
 * 'word' is one of the two-word entries of 'words' ("prepare transaction":
 * its first word alone matches nothing).
 */
static bool
word_pair_in(const char *first, const char *word, size_t len, const char *const *words)
{
	size_t		flen = strlen(first);

	if (words == NULL || flen == 0)
		return false;
	for (int i = 0; words[i]; i++)
	{
		const char *space = strchr(words[i], ' ');

		if (space && (size_t) (space - words[i]) == flen &&
			strncmp(words[i], first, flen) == 0 && strlen(space + 1) == len &&
			pg_strncasecmp(space + 1, word, len) == 0)
			return true;
	}
	return false;
}

/*
 * reserved_name says whether a name (a bare word, or the inside of a quoted
 * one starting at 'p') begins with collegedb's prefix.
 */
static bool
reserved_name(const char *p, size_t len)
{
	size_t		plen = strlen(RESERVED_PREFIX);

	return len >= plen && pg_strncasecmp(p, RESERVED_PREFIX, plen) == 0;
}

/*
 * LexerScan scans 'sql' by 'rules' and, if 'out' is given, copies it there
 * with each $n replaced by what 'emit' appends.  See lexer.h.
 */
CdStatementShape
LexerScan(const char *sql, const CdLexerRules *rules, StringInfo out,
		  LexerEmit emit, void *arg)
{
	CdStatementShape shape;
	bool		seen_word = false;
	bool		second_seen = false;
	bool		write_word = false;
	bool		in_executable = false;
	bool		name_next = false;	/* a prepared statement's name may come */
	const char *p = sql;

	memset(&shape, 0, sizeof(shape));
	shape.empty = true;

	while (*p)
	{
		const char *start = p;
		unsigned char c = (unsigned char) *p;
		bool		token = true;
		const char *exec_end;
		bool		word = false;

		if (is_space(c))
		{
			p++;
			token = false;
		}
		else if (c == '-' && p[1] == '-' &&
				 (!rules->dash_comment_space || p[2] == '\0' ||
				  is_space((unsigned char) p[2]) || iscntrl((unsigned char) p[2])))
		{
			p = skip_line_comment(p);
			token = false;
		}
		else if (c == '#' && rules->hash_comments)
		{
			p = skip_line_comment(p);
			token = false;
		}
		else if (c == '/' && p[1] == '*' && rules->executable_comments &&
				 !in_executable && (exec_end = executable_comment_end(p)) != NULL)
		{
			/* the server runs what follows: go on lexing it as code */
			p = exec_end;
			in_executable = true;
			token = false;
		}
		else if (c == '*' && p[1] == '/' && in_executable)
		{
			p += 2;
			in_executable = false;
			token = false;
		}
		else if (c == '/' && p[1] == '*')
		{
			p = skip_block_comment(p, rules->nested_comments);
			token = false;
		}
		else if (c == '\'')
		{
			bool		backslash = rules->backslash_escapes;

			/* PostgreSQL's E'...' strings take backslash escapes */
			if (rules->e_strings && p > sql &&
				(p[-1] == 'E' || p[-1] == 'e') &&
				(p - 1 == sql || !is_ident_char((unsigned char) p[-2])))
				backslash = true;
			p = skip_quoted(p, '\'', backslash);
			if (rules->strings_are_names && reserved_name(start + 1, p - start - 1))
				shape.names_reserved = true;
		}
		else if (c == '"' || (c == '`' && rules->backtick_idents) ||
				 (c == '[' && rules->bracket_idents))
		{
			p = skip_quoted(p, c == '[' ? ']' : c,
							c == '"' && rules->backslash_escapes);
			if (reserved_name(start + 1, p - start - 1))
			{
				shape.names_reserved = true;
				shape.statement_name_reserved |= name_next;
			}
			name_next = false;
		}
		else if (c == '$' && p[1] >= '0' && p[1] <= '9' &&
				 (p == sql || !is_ident_char((unsigned char) p[-1])))
		{
			int			n = 0;

			p++;
			while (*p >= '0' && *p <= '9')
			{
				if (n < 100000000)
					n = n * 10 + (*p - '0');
				p++;
			}
			if (n > shape.max_param)
				shape.max_param = n;
			if (out)
			{
				emit(out, n, arg);
				start = p;		/* nothing more to copy */
			}
		}
		else if (c == '$' && rules->dollar_quotes &&
				 (p == sql || !is_ident_char((unsigned char) p[-1])) &&
				 dollar_quote_end(p) != NULL)
			p = dollar_quote_end(p);
		else if (c == ';')
		{
			p++;
			token = false;
		}
		else if (is_ident_char(c))
		{
			size_t		len;

			while (*p && is_ident_char((unsigned char) *p))
				p++;
			len = p - start;
			if (!seen_word)
			{
				shape.read_only = word_in(start, len, rules->read_words);
				shape.transaction_control = word_in(start, len, rules->transaction_words);
				if (len < sizeof(shape.first_word))
				{
					for (size_t i = 0; i < len; i++)
						shape.first_word[i] = pg_tolower((unsigned char) start[i]);
					shape.first_word[len] = '\0';
				}
			}
			else
			{
				if (!second_seen &&
					word_pair_in(shape.first_word, start, len, rules->transaction_words))
					shape.transaction_control = true;
				second_seen = true;
				if (!write_word)
					write_word = word_in(start, len, rules->write_words);
			}
			if (reserved_name(start, len))
			{
				shape.names_reserved = true;
				shape.statement_name_reserved |= name_next;
			}
			name_next = word_in(start, len, rules->statement_name_words);
			word = true;
			seen_word = true;
		}
		else
			p++;

		if (token)
			shape.empty = false;
		/* only the token right after such a word is the name */
		if (token && !word)
			name_next = false;
		if (out && p > start)
			appendBinaryStringInfo(out, start, p - start);
	}
	if (write_word)
		shape.read_only = false;
	return shape;
}

/*
 * The last statement text each dialect classified, and its shape: a routed
 * call classifies its statement once to know whether it writes and again
 * before it sends it, and an application sends the same texts again and
 * again, so the second scan of a text is a comparison.  A bulk load's
 * batches repeat one INSERT of a thousand rows' placeholders (tens of
 * kilobytes).  Texts longer than SCAN_MEMO_MAX are scanned every time.
 */
#define SCAN_MEMO_MAX (512 * 1024)

typedef struct ScanMemo
{
	const CdAdapter *adapter;
	char	   *sql;			/* in TopMemoryContext */
	CdStatementShape shape;
} ScanMemo;

static ScanMemo scan_memo[CD_MAX_DIALECTS];

/*
 * AdapterScan classifies a statement by the lexical rules of 'adapter''s
 * dialect (see CdStatementShape).
 */
CdStatementShape
AdapterScan(const CdAdapter *adapter, const char *sql)
{
	ScanMemo   *memo = NULL;
	size_t		len;

	for (int i = 0; i < CD_MAX_DIALECTS; i++)
	{
		if (scan_memo[i].adapter == adapter || scan_memo[i].adapter == NULL)
		{
			memo = &scan_memo[i];
			break;
		}
	}
	if (memo && memo->sql && strcmp(memo->sql, sql) == 0)
		return memo->shape;

	len = strlen(sql);
	if (memo == NULL || len > SCAN_MEMO_MAX)
		return LexerScan(sql, adapter->lexer, NULL, NULL, NULL);
	if (memo->sql)
		pfree(memo->sql);
	memo->sql = NULL;
	memo->adapter = adapter;
	memo->shape = LexerScan(sql, adapter->lexer, NULL, NULL, NULL);
	memo->sql = MemoryContextStrdup(TopMemoryContext, sql);
	return memo->shape;
}

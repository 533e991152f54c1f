/*-------------------------------------------------------------------------
 *
 * placeholders.c
 *	  A small lexer that finds $n placeholders, emptiness and whether a
 *	  statement only reads, by the lexical rules of each shard dialect.
 *
 * Callers write $1..$n in every dialect.  The SQLite and MySQL adapters
 * rewrite them into their own form, and the remote layer uses the same scan
 * to check parameter counts and classify the statement before it leaves
 * the front.  The lexer knows string literals, quoted
 * identifiers, comments and (for PostgreSQL) dollar quotes; it does not
 * parse SQL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "remote/placeholders.h"

static inline bool
is_ident_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		(c >= '0' && c <= '9') || c == '_' || c == '$' || c >= 0x80;
}

/*
 * skip_quoted returns the position just past a literal or quoted identifier
 * that opens at p with 'quote' (and closes with 'close').  A doubled closing
 * character stands for itself; with 'backslash' a backslash escapes the
 * next character.  An unterminated literal runs to the end: the shard will
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

static const char *const read_words[] = {
	"select", "values", "table", "show", "explain", "with", NULL
};
static const char *const write_words[] = {
	"insert", "update", "delete", "merge", "into", NULL
};

static bool
word_in(const char *word, size_t len, const char *const *words)
{
	for (int i = 0; words[i]; i++)
		if (strlen(words[i]) == len && pg_strncasecmp(word, words[i], len) == 0)
			return true;
	return false;
}

/*
 * PlaceholdersRewrite scans 'sql' by the lexical rules of 'dialect' and, if
 * 'out' is given, copies it there with each $n replaced by what 'emit'
 * appends.  See placeholders.h.
 */
CdStatementShape
PlaceholdersRewrite(const char *sql, CdDialect dialect, StringInfo out,
					PlaceholderEmit emit, void *arg)
{
	CdStatementShape shape = {0, true, false, ""};
	bool		seen_word = false;
	bool		write_word = false;
	const char *p = sql;

	while (*p)
	{
		const char *start = p;
		unsigned char c = (unsigned char) *p;
		bool		token = true;

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v')
		{
			p++;
			token = false;
		}
		else if (c == '-' && p[1] == '-' &&
				 (dialect != CD_DIALECT_MYSQL || p[2] == '\0' ||
				  isspace((unsigned char) p[2]) || iscntrl((unsigned char) p[2])))
		{
			p = skip_line_comment(p);
			token = false;
		}
		else if (c == '#' && dialect == CD_DIALECT_MYSQL)
		{
			p = skip_line_comment(p);
			token = false;
		}
		else if (c == '/' && p[1] == '*')
		{
			p = skip_block_comment(p, dialect == CD_DIALECT_POSTGRES);
			token = false;
		}
		else if (c == '\'')
		{
			bool		backslash = dialect == CD_DIALECT_MYSQL;

			/* PostgreSQL's E'...' strings take backslash escapes */
			if (dialect == CD_DIALECT_POSTGRES && p > sql &&
				(p[-1] == 'E' || p[-1] == 'e') &&
				(p - 1 == sql || !is_ident_char((unsigned char) p[-2])))
				backslash = true;
			p = skip_quoted(p, '\'', backslash);
		}
		else if (c == '"')
			p = skip_quoted(p, '"', dialect == CD_DIALECT_MYSQL);
		else if (c == '`' && dialect != CD_DIALECT_POSTGRES)
			p = skip_quoted(p, '`', false);
		else if (c == '[' && dialect == CD_DIALECT_SQLITE)
			p = skip_quoted(p, ']', false);
		else if (c == '$' && p[1] >= '0' && p[1] <= '9' &&
				 (p == sql || !is_ident_char((unsigned char) p[-1])))
		{
			int			n = 0;

			p++;
			while (*p >= '0' && *p <= '9')
			{
				if (n < 100000)
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
		else if (c == '$' && dialect == CD_DIALECT_POSTGRES &&
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
			while (*p && is_ident_char((unsigned char) *p))
				p++;
			if (!seen_word)
			{
				size_t		len = p - start;

				shape.read_only = word_in(start, len, read_words);
				if (len < sizeof(shape.first_word))
				{
					for (size_t i = 0; i < len; i++)
						shape.first_word[i] = pg_tolower((unsigned char) start[i]);
					shape.first_word[len] = '\0';
				}
			}
			else if (!write_word)
				write_word = word_in(start, p - start, write_words);
			seen_word = true;
		}
		else
			p++;

		if (token)
			shape.empty = false;
		if (out && p > start)
			appendBinaryStringInfo(out, start, p - start);
	}
	if (write_word)
		shape.read_only = false;
	return shape;
}

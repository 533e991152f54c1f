/* collegedb--0.2--0.3.sql: upgrade from 0.2 to 0.3 */

\echo Use "ALTER EXTENSION collegedb UPDATE TO '0.3'" to load this file. \quit

/*
 * The full 0.3 script is collegedb--0.1.sql, then collegedb--0.1--0.2.sql,
 * then this file (see the Makefile), so a fresh install and an upgrade run
 * the same statements; sql/upgrade.sql checks that they end with the same
 * objects.
 *
 * Objects created here are not covered by the earlier scripts' REVOKEs from
 * PUBLIC: revoke what PUBLIC must not use next to its CREATE, and list the
 * functions a grant set should hold in privilege_set.
 */

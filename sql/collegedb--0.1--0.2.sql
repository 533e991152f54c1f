/* collegedb--0.1--0.2.sql: upgrade from 0.1 to 0.2 */

\echo Use "ALTER EXTENSION collegedb UPDATE TO '0.2'" to load this file. \quit

/*
 * The full 0.2 script is collegedb--0.1.sql followed by this file (see the
 * Makefile), so a fresh install and an upgrade from 0.1 run the same
 * statements; sql/upgrade.sql checks that they end with the same objects.
 *
 * Objects created here are not covered by the 0.1 script's REVOKEs from
 * PUBLIC: revoke what PUBLIC must not use next to its CREATE, and list the
 * functions a grant set should hold in privilege_set (at the end of this
 * file).
 */

/* collegedb--0.2--0.3.sql: upgrade from 0.2 to 0.3 */

\echo Use "ALTER EXTENSION collegedb UPDATE TO '0.3'" to load this file. \quit

/*
 * The statements that turn a 0.2 catalog into the 0.3 one.  A fresh install
 * of 0.3 runs sql/collegedb.sql instead (copied to collegedb--0.3.sql by the
 * Makefile), so every object created or changed here is also written there,
 * in its place, as a fresh install creates it; sql/upgrade.sql installs 0.1,
 * updates it to the newest version and fails when the catalog differs from
 * a fresh install's.
 *
 * Objects created here are not covered by the earlier scripts' REVOKEs from
 * PUBLIC: revoke what PUBLIC must not use next to its CREATE.  A function
 * that a grant set should hold goes into privilege_set: here with CREATE OR
 * REPLACE FUNCTION collegedb.privilege_set and the whole list, in
 * sql/collegedb.sql in its list.
 */

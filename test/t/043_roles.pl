# Counters hold their roles by identity, as tables and sequences do: each counter's privileges are
# the ACL of its guard sequence slotted_counters."<name>". What a user notices: a renamed role keeps
# its counters and grants, and a new role of the old name gets none of them; DROP ROLE refuses a
# role that owns or may use a counter (from any database of the cluster), naming the counter's
# sequence; REASSIGN OWNED and DROP OWNED give away or drop counters and revoke grants; DROP
# SEQUENCE of the guard drops the counter, for its owner only, and DROP EXTENSION takes it along;
# a dump restores owners and grants by name into a cluster whose roles have other OIDs, again
# over itself with --clean, and with --no-owner gives the counter and its attached table to the
# restoring role, whose attachment then runs; an attached table given to a role that cannot read
# the counter makes the attachment fail, shown in slotted_counter.attachments and logged once,
# not at every flush.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('roles', "slotted_counter.flush_interval = 100\n");
my $restored = preloaded_node('roles_restored', "slotted_counter.flush_interval = 100\n");

# Runs $sql in $db as $role (the superuser if undef): 'success', or the SQLSTATE it failed with
# (in list context, with psql's stderr, which holds the DETAIL).
sub attempt
{
	my ($on, $db, $sql, $role) = @_;
	my ($rc, $out, $err) = $on->psql($db, "\\set VERBOSITY verbose\n$sql",
		extra_params => [ defined $role ? ('-U', $role) : () ]);
	my $state =
		$rc == 0 ? 'success'
	  : $err =~ /ERROR:  ([0-9A-Z]{5}):/ ? $1
	  :                                    "failed without a SQLSTATE: $err";
	return wantarray ? ($state, $err) : $state;
}

# The output of $sql in $db as $role (the superuser if undef), or its error, so that a failing
# query fails the assertion that reads it rather than the whole test.
sub query
{
	my ($on, $db, $sql, $role) = @_;
	my ($rc, $out, $err) = $on->psql($db, $sql,
		extra_params => [ defined $role ? ('-U', $role) : () ]);
	return $rc == 0 ? $out : "error: $err";
}

# The owner of the counter's guard sequence, as \ds slotted_counters.* shows it.
sub counter_owner
{
	my ($on, $db, $counter) = @_;
	return query($on, $db, qq{
SELECT coalesce((SELECT pg_get_userbyid(c.relowner) FROM pg_class c
                 JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = 'slotted_counters' AND c.relname = '$counter'
                   AND c.relkind = 'S'), 'no guard sequence')});
}

sub has_privilege
{
	my ($on, $db, $role, $counter, $privilege) = @_;
	return query($on, $db, qq{SELECT sc_has_privilege('$role', '$counter', '$privilege')});
}

# Roles that own or may use a counter only (no privilege on the database), so that whatever
# keeps DROP ROLE from dropping them is the counter. A superuser creates the counters and gives
# them away.
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE ROLE olga LOGIN;
CREATE ROLE gus LOGIN;
CREATE ROLE dave LOGIN;
CREATE ROLE viewer LOGIN;
CREATE ROLE erin LOGIN;
CREATE ROLE carol LOGIN;
CREATE DATABASE elsewhere;
});

is( query($node, 'postgres', q{
SELECT count(*) FROM information_schema.columns
WHERE table_schema = 'slotted_counter'
  AND ((table_name = 'counters' AND column_name IN ('owner', 'readers', 'writers'))
       OR (table_name = 'attachments' AND column_name = 'role'))}),
	'0', 'catalog: no role is kept by name in slotted_counter.counters or .attachments');

# 1. A renamed role keeps its grants and its counters.
$node->safe_psql('postgres', q{
SELECT sc_create('bob_kept', 'buffered');
SELECT sc_create('bob_dropped', 'buffered');
SELECT sc_alter_owner('bob_kept', 'bob');
SELECT sc_alter_owner('bob_dropped', 'bob');
SELECT sc_create('alice_c', 'buffered');
SELECT sc_alter_owner('alice_c', 'alice');
SELECT sc_grant('alice_c', 'ALL', 'bob');
});
is(counter_owner($node, 'postgres', 'bob_kept'), 'bob',
	'rename: the counter\'s guard sequence is owned by its owner');
is(query($node, 'postgres', q{SELECT sc_incr('alice_c', 1)}, 'bob'), '1',
	'rename: before, bob writes alice\'s counter through his grant');
$node->safe_psql('postgres', 'ALTER ROLE bob RENAME TO robert');
is( query($node, 'postgres', q{SELECT sc_incr('alice_c', 1); SELECT sc_sum('alice_c', 1)},
		'robert'),
	"2\n2", 'rename: robert keeps bob\'s grant: he writes and reads alice\'s counter');
is(counter_owner($node, 'postgres', 'bob_kept'), 'robert', 'rename: robert owns bob\'s counter');
is(query($node, 'postgres', q{SELECT sc_incr('bob_kept', 1, 5)}, 'robert'), '5',
	'rename: robert writes the counter bob created');
is(attempt($node, 'postgres', q{SELECT sc_drop('bob_dropped')}, 'robert'), 'success',
	'rename: robert, as its owner, drops a counter bob created');
is(attempt($node, 'postgres', q{SELECT sc_sum('bob_dropped', 1)}), '42704',
	'rename: that counter is gone');

# 2. A new role with the old name gets nothing.
$node->safe_psql('postgres', 'CREATE ROLE bob LOGIN');
is(attempt($node, 'postgres', q{SELECT sc_sum('alice_c', 1)}, 'bob'), '42501',
	'new bob: does not read the counter granted to the old bob');
is(attempt($node, 'postgres', q{SELECT sc_incr('alice_c', 1)}, 'bob'), '42501',
	'new bob: does not write it either');
is(attempt($node, 'postgres', q{SELECT sc_sum('bob_kept', 1)}, 'bob'), '42501',
	'new bob: does not read the counter the old bob owned');
is(attempt($node, 'postgres', q{SELECT sc_drop('bob_kept')}, 'bob'), '42501',
	'new bob: may not drop it');
is(has_privilege($node, 'postgres', 'bob', 'alice_c', 'SELECT, UPDATE'), 'f',
	'new bob: sc_has_privilege says he holds nothing on alice\'s counter');
is(query($node, 'postgres', q{SELECT sc_sum('bob_kept', 1)}, 'robert'), '5',
	'new bob: robert still reads his counter');

# 3. DROP ROLE refuses the owner of a counter and a grantee, naming the guard sequence.
$node->safe_psql('postgres', q{
SELECT sc_create('olga_c', 'buffered');
SELECT sc_alter_owner('olga_c', 'olga');
SELECT sc_grant('olga_c', 'SELECT', 'gus');
});
my ($state, $err) = attempt($node, 'postgres', 'DROP ROLE olga');
is($state, '2BP01', 'DROP ROLE of a counter\'s owner fails with 2BP01');
like($err, qr/owner of sequence slotted_counters\.olga_c/,
	'DROP ROLE of the owner: the DETAIL names the counter\'s sequence');
($state, $err) = attempt($node, 'postgres', 'DROP ROLE gus');
is($state, '2BP01', 'DROP ROLE of a counter\'s grantee fails with 2BP01');
like($err, qr/privileges for sequence slotted_counters\.olga_c/,
	'DROP ROLE of the grantee: the DETAIL names the counter\'s sequence');
is(query($node, 'postgres', q{SELECT sc_incr('olga_c', 1, 3)}, 'olga'), '3',
	'after the refused DROP ROLEs, the owner still writes the counter');
is(query($node, 'postgres', q{SELECT sc_sum('olga_c', 1)}, 'gus'), '3',
	'after the refused DROP ROLEs, the grantee still reads it');

# 4. The same from another database of the cluster, which has no counters.
($state, $err) = attempt($node, 'elsewhere', 'DROP ROLE olga');
is($state, '2BP01', 'from another database: DROP ROLE of the owner fails with 2BP01');
like($err, qr/objects? in database postgres/,
	'from another database: the owner\'s DETAIL points at the database with the counter');
($state, $err) = attempt($node, 'elsewhere', 'DROP ROLE gus');
is($state, '2BP01', 'from another database: DROP ROLE of the grantee fails with 2BP01');
like($err, qr/objects? in database postgres/,
	'from another database: the grantee\'s DETAIL points at the database with the counter');
is( query($node, 'postgres',
		q{SELECT sc_incr('olga_c', 1, 1); SELECT sc_sum('olga_c', 1)}, 'olga'),
	"4\n4", 'from another database: the counter still works for its owner');
is(query($node, 'postgres', q{SELECT sc_sum('olga_c', 1)}, 'gus'), '4',
	'from another database: and for its grantee');

# 5. REASSIGN OWNED gives the counter away.
$node->safe_psql('postgres', q{
SELECT sc_create('dave_c', 'buffered');
SELECT sc_alter_owner('dave_c', 'dave');
});
is(query($node, 'postgres', q{SELECT sc_incr('dave_c', 1, 2)}, 'dave'), '2',
	'reassign: before, dave writes his counter');
$node->safe_psql('postgres', 'REASSIGN OWNED BY dave TO alice');
is(counter_owner($node, 'postgres', 'dave_c'), 'alice', 'reassign: alice owns dave\'s counter');
is(has_privilege($node, 'postgres', 'alice', 'dave_c', 'UPDATE'), 't',
	'reassign: sc_has_privilege: alice may write it');
is(attempt($node, 'postgres', q{SELECT sc_grant('dave_c', 'SELECT', 'viewer')}, 'alice'),
	'success', 'reassign: alice grants on it, as its owner');
is(query($node, 'postgres', q{SELECT sc_sum('dave_c', 1)}, 'viewer'), '2',
	'reassign: alice\'s grantee reads it');
is(attempt($node, 'postgres', q{SELECT sc_drop('dave_c')}, 'dave'), '42501',
	'reassign: dave may no longer drop it');
is(has_privilege($node, 'postgres', 'dave', 'dave_c', 'SELECT, UPDATE'), 'f',
	'reassign: dave holds nothing on it');

# 6. DROP OWNED drops the role's counters and revokes its grants; then DROP ROLE works.
$node->safe_psql('postgres', q{
SELECT sc_create('erin_c', 'buffered');
SELECT sc_alter_owner('erin_c', 'erin');
SELECT sc_create('shared_c', 'buffered');
SELECT sc_alter_owner('shared_c', 'alice');
SELECT sc_grant('shared_c', 'SELECT', 'erin');
});
my $erin_id = $node->safe_psql('postgres', q{SELECT 'erin_c'::slotted_counter::integer});
$node->safe_psql('postgres', q{SELECT sc_incr('erin_c', 1, 4)}, extra_params => [ '-U', 'erin' ]);
$node->safe_psql('postgres', q{SELECT sc_rollup() >= 0});
# Counted after that flush: still in the buffer when DROP OWNED runs, unless a flush took it.
$node->safe_psql('postgres', q{SELECT sc_incr('erin_c', 2, 4)}, extra_params => [ '-U', 'erin' ]);
is( query($node, 'postgres',
		qq{SELECT count(*) > 0 FROM slotted_counter.key_values WHERE counter = $erin_id}),
	't', 'drop owned: before, erin\'s counter has flushed rows');
is(has_privilege($node, 'postgres', 'erin', 'shared_c', 'SELECT'), 't',
	'drop owned: before, erin may read alice\'s counter');
$node->safe_psql('postgres', 'DROP OWNED BY erin');
is(attempt($node, 'postgres', q{SELECT sc_sum('erin_c', 1)}), '42704',
	'drop owned: erin\'s counter is dropped');
$node->safe_psql('postgres', q{SELECT sc_rollup() >= 0});
is( query($node, 'postgres',
		qq{SELECT count(*) FROM slotted_counter.key_values WHERE counter = $erin_id}),
	'0', 'drop owned: after a flush, none of its rows is left in slotted_counter.key_values');
is(has_privilege($node, 'postgres', 'erin', 'shared_c', 'SELECT'), 'f',
	'drop owned: erin\'s grant on alice\'s counter is revoked');
is(attempt($node, 'postgres', q{SELECT sc_sum('shared_c', 1)}, 'erin'), '42501',
	'drop owned: erin no longer reads alice\'s counter');
is(attempt($node, 'postgres', 'DROP ROLE erin'), 'success', 'drop owned: then DROP ROLE succeeds');
is(query($node, 'postgres', q{SELECT sc_incr('shared_c', 1)}, 'alice'), '1',
	'drop owned: alice\'s counter still works');

# 7. DROP SEQUENCE of a guard (what pg_restore --clean runs for every sequence it restores):
# refused to another role (42501), and by the counter's owner it drops the counter with it.
$node->safe_psql('postgres', q{
SELECT sc_create('carol_c', 'buffered');
SELECT sc_alter_owner('carol_c', 'carol');
});
is(query($node, 'postgres', q{SELECT sc_incr('carol_c', 1)}, 'carol'), '1',
	'DROP SEQUENCE: before, carol writes her counter');
is(attempt($node, 'postgres', 'DROP SEQUENCE slotted_counters.carol_c', 'alice'), '42501',
	'DROP SEQUENCE of a guard sequence by another role fails with 42501');
is(query($node, 'postgres', q{SELECT sc_incr('carol_c', 1)}, 'carol'), '2',
	'DROP SEQUENCE: the counter still works after the refusal');
is(attempt($node, 'postgres', 'DROP SEQUENCE slotted_counters.carol_c', 'carol'), 'success',
	'DROP SEQUENCE of a guard sequence by the counter\'s owner succeeds');
is(attempt($node, 'postgres', q{SELECT sc_sum('carol_c', 1)}), '42704',
	'DROP SEQUENCE: the counter went with its sequence');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM slotted_counter.key_values t
WHERE NOT EXISTS (SELECT FROM slotted_counter.counters c WHERE c.id = t.counter)}),
	'0', 'DROP SEQUENCE: no value of the counter is left');

# 8. DROP EXTENSION, without CASCADE, takes the guard sequences along; the owner of a counter there
# can then be dropped, and CREATE EXTENSION starts afresh.
$node->safe_psql('postgres', q{
CREATE DATABASE dropext;
CREATE ROLE passing;
});
$node->safe_psql('dropext', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('a', 'buffered');
SELECT sc_create('b');
SELECT sc_alter_owner('a', 'passing');
SELECT sc_grant('b', 'SELECT', 'passing');
SELECT sc_incr('a', 1), sc_incr('b', 1);
});
my $guards = q{SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'slotted_counters'};
is(query($node, 'dropext', $guards), '2',
	'drop extension: before, each counter has a guard sequence');
is(attempt($node, 'dropext', 'DROP EXTENSION slotted_counter'), 'success',
	'drop extension: DROP EXTENSION without CASCADE succeeds with counters present');
is( query($node, 'dropext',
		q{SELECT count(*) FROM pg_namespace WHERE nspname IN ('slotted_counters', 'slotted_counter')}),
	'0', 'drop extension: no schema slotted_counters (nor slotted_counter) is left');
is(attempt($node, 'postgres', 'DROP ROLE passing'), 'success',
	'drop extension: the counters\' owner and grantee there can be dropped');
is( query($node, 'dropext', q{
CREATE EXTENSION slotted_counter;
SELECT count(*) FROM slotted_counter.counters;
SELECT sc_create('a', 'buffered') IS NOT NULL;
SELECT sc_incr('a', 1);}),
	"0\nt\n1", 'drop extension: CREATE EXTENSION again works, with no counter left over');
is(counter_owner($node, 'dropext', 'a'), $node->safe_psql('dropext', 'SELECT current_user'),
	'drop extension: the new counter has its guard sequence again');

# 9. A dump restores owners and grants by name into a cluster whose roles have other OIDs.
$node->safe_psql('postgres', q{
CREATE ROLE app LOGIN;
CREATE ROLE reader LOGIN;
CREATE DATABASE shop;
CREATE DATABASE pages;
});
# Other roles first, and these two in the other order, so that their OIDs differ.
$restored->safe_psql('postgres', q{
CREATE ROLE filler_1;
CREATE ROLE filler_2;
CREATE ROLE reader LOGIN;
CREATE ROLE app LOGIN;
CREATE ROLE outsider;
CREATE DATABASE shop;
CREATE DATABASE pages;
});
my $oids = q{SELECT 'app'::regrole::oid || ',' || 'reader'::regrole::oid};
isnt($node->safe_psql('postgres', $oids), $restored->safe_psql('postgres', $oids),
	'dump: app and reader have other OIDs in the second cluster');
$node->safe_psql('shop', q{
CREATE EXTENSION slotted_counter;
GRANT CREATE ON DATABASE shop TO app;
});
$node->safe_psql('shop', q{
SELECT sc_create('orders', 'buffered');
SELECT sc_grant('orders', 'SELECT', 'reader');
SELECT sc_incr('orders', 1, 7);
}, extra_params => [ '-U', 'app' ]);
$node->safe_psql('shop', q{SELECT sc_rollup() >= 0});
my $shop_dump = $node->basedir . '/shop.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $shop_dump, '-d', $node->connstr('shop') ],
	'dump: pg_dump -Fc');
$restored->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $restored->connstr('shop'), $shop_dump ],
	'dump: pg_restore into the second cluster');
is(counter_owner($restored, 'shop', 'orders'), 'app', 'dump: app owns the restored counter');
is(query($restored, 'shop', q{SELECT sc_sum('orders', 1)}, 'reader'), '7',
	'dump: reader reads the restored counter through the restored grant');
is(attempt($restored, 'shop', q{SELECT sc_incr('orders', 1)}, 'reader'), '42501',
	'dump: reader still may not write it');
is(has_privilege($restored, 'shop', 'app', 'orders', 'UPDATE'), 't',
	'dump: sc_has_privilege: app, the owner, may write it');
is(query($restored, 'shop', q{SELECT sc_incr('orders', 1)}, 'app'), '8',
	'dump: app writes it');
is(attempt($restored, 'shop', q{SELECT sc_grant('orders', 'UPDATE', 'reader')}, 'app'),
	'success', 'dump: app grants on it, as its owner');
is(query($restored, 'shop', q{SELECT sc_incr('orders', 1)}, 'reader'), '9',
	'dump: and the grant takes effect');

# 10. pg_restore --no-owner: the table and the counter are the restoring role's, and the
# attachment runs as the table's new owner.
$node->safe_psql('pages', q{
CREATE EXTENSION slotted_counter;
GRANT CREATE ON DATABASE pages TO app;
GRANT CREATE ON SCHEMA public TO app;
});
$node->safe_psql('pages', q{
CREATE TABLE page_stats (id bigint PRIMARY KEY, views bigint);
INSERT INTO page_stats VALUES (1, 0), (2, 0);
SELECT sc_create('views', 'buffered');
SELECT sc_attach('views', 'page_stats', 'id', 'views', '1 second');
SELECT sc_incr('views', 1, 5);
}, extra_params => [ '-U', 'app' ]);
$node->safe_psql('pages', q{SELECT sc_rollup() >= 0});
my $pages_dump = $node->basedir . '/pages.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $pages_dump, '-d', $node->connstr('pages') ],
	'no-owner: pg_dump -Fc');
$restored->command_ok(
	[
		'pg_restore', '--no-owner', '--exit-on-error', '-d', $restored->connstr('pages'),
		$pages_dump
	],
	'no-owner: pg_restore --no-owner as the superuser');
my $superuser = $restored->safe_psql('pages', 'SELECT current_user');
is( query($restored, 'pages',
		q{SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'page_stats'::regclass}),
	$superuser, 'no-owner: the table belongs to the restoring role');
is(counter_owner($restored, 'pages', 'views'), $superuser,
	'no-owner: the counter belongs to the restoring role');
is(query($restored, 'pages', q{SELECT sc_incr('views', 1, 10)}), '15',
	'no-owner: the restored counter counts on from its restored value');
$restored->safe_psql('pages', q{SELECT sc_rollup() >= 0});
ok( $restored->poll_query_until('pages',
		q{SELECT sc_rollup() >= 0 AND (SELECT views FROM page_stats WHERE id = 1) = 15}),
	'no-owner: the attachment writes the new value into page_stats');
is( query($restored, 'pages', q{
SELECT count(*), count(*) FILTER (WHERE last_error IS NULL AND failures = 0)
FROM slotted_counter.attachments}),
	'1|1', 'no-owner: the attachment has no error');

# 11. The table goes to a role that cannot read the counter: the attachment fails, says so, and
# is logged once, not at every flush.
is(has_privilege($restored, 'pages', 'outsider', 'views', 'SELECT'), 'f',
	'new table owner: outsider may not read the counter');
my $flushes = q{SELECT flushes FROM slotted_counter.stats WHERE datname = current_database()};
my $flushes_before = $restored->safe_psql('pages', $flushes);
my $log_offset = -s $restored->logfile;
$restored->safe_psql('pages', q{
ALTER TABLE page_stats OWNER TO outsider;
SELECT sc_incr('views', 1, 1);
});
ok( $restored->poll_query_until('pages', q{
SELECT sc_rollup() >= 0
   AND (SELECT last_error IS NOT NULL FROM slotted_counter.attachments)}),
	'new table owner: the attachment records a last_error');
# More changes and flushes, until the run has failed three times in a row (the attachment's
# backoff begins there): many flushes, each of which could have logged.
ok( $restored->poll_query_until('pages', q{
SELECT sc_incr('views', 2, 1) > 0 AND sc_rollup() >= 0
   AND (SELECT failures >= 3 FROM slotted_counter.attachments)}),
	'new table owner: the run keeps failing');
is( query($restored, 'pages', q{SELECT string_agg(views::text, ',' ORDER BY id) FROM page_stats}),
	'15,0', 'new table owner: the attachment wrote nothing');
is( query($restored, 'pages', q{SELECT sc_sum('views', 1) > 15 AND sc_sum('views', 2) > 0}),
	't', 'new table owner: while the counter moved on');
is( query($restored, 'pages', qq{SELECT ($flushes) > $flushes_before + 3}),
	't', 'new table owner: many flushes ran meanwhile');
my $log = slurp_file($restored->logfile, $log_offset);
my $logged = () = $log =~ /^.*\b(?:WARNING|ERROR):.*(?:"views"|page_stats).*$/mg;
cmp_ok($logged, '>=', 1, 'new table owner: the failure is in the server log');
cmp_ok($logged, '<=', 3,
	"new table owner: as $logged WARNING or ERROR lines, not one per flush");

# 12. pg_restore --clean over the restored database: it drops every sequence it restores, the
# guards included, then the extension, and restores them again: no error, the values and grants
# as dumped.
$restored->command_ok(
	[
		'pg_restore', '--clean', '--if-exists', '--exit-on-error', '-d',
		$restored->connstr('shop'), $shop_dump
	],
	'clean: pg_restore --clean --if-exists over the restored database');
is(query($restored, 'shop', q{SELECT sc_sum('orders', 1)}, 'reader'), '7',
	'clean: the value and the grant are those of the dump');
is(attempt($restored, 'shop', q{SELECT sc_incr('orders', 1)}, 'reader'), '42501',
	'clean: the grant made after the first restore is gone with it');

$node->stop;
$restored->stop;
done_testing();

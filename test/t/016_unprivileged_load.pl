# Roles that hold one privilege only, with a buffer too small for the keys: a writer with UPDATE
# only loads, evicts and writes through under load, and a reader with SELECT only reads keys that
# live in the tables alone. Row-level security hides the counters' rows from the writer, yet every
# value stays exact: the extension reads its tables as itself, whoever calls.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('unprivileged_load', qq{
slotted_counter.max_entries = 128
slotted_counter.flush_interval = 50
});

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION slotted_counter;
CREATE ROLE writer LOGIN;
CREATE ROLE reader LOGIN;
SELECT sc_create('ub', 'buffered'), sc_create('ut');
SELECT sc_grant('ub', 'UPDATE', 'writer'), sc_grant('ut', 'UPDATE', 'writer'),
       sc_grant('ub', 'SELECT', 'reader'), sc_grant('ut', 'SELECT', 'reader');
-- 300 keys with 10 each, most of them evicted to the tables by the time the writer comes.
DO $$ BEGIN
  FOR k IN 1..300 LOOP
    PERFORM sc_incr('ub', k, 10), sc_incr('ut', k, 10);
    COMMIT;
  END LOOP;
END $$;
SELECT sc_rollup();
});

is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM slotted_counter.key_values},
		extra_params => [ '-U', 'writer' ]),
	'0', 'the writer sees no row of the tables (it may not read the counters)');

my $script = q{
\set k random(1, 300)
SELECT sc_incr('ub', :k);
BEGIN;
SELECT sc_incr('ut', :k, 2);
COMMIT;
};
$node->pgbench(
	'--no-vacuum --client=4 --jobs=2 --transactions=500 -U writer',
	0, [qr{actually processed: 2000/2000}], [qr{^$}],
	'the UPDATE-only writer counts under eviction',
	{ 'writer.sql' => $script });

my $keys = 'ARRAY(SELECT generate_series(1, 300)::bigint)';
is( $node->safe_psql(
		'postgres', "SELECT sc_sum_keys('ub', $keys), sc_sum_keys('ut', $keys)",
		extra_params => [ '-U', 'reader' ]),
	(3000 + 2000) . '|' . (3000 + 2 * 2000),
	'the SELECT-only reader reads every increment: none was lost to a load that saw no row');
is( $node->safe_psql(
		'postgres', "SELECT sum(sc_sum('ub', k)), sum(sc_sum('ut', k)) FROM generate_series(1, 300) k",
		extra_params => [ '-U', 'reader' ]),
	'5000|7000', 'and key by key, from the buffer and from the tables');
is( $node->safe_psql(
		'postgres', q{SELECT sum(value) FROM sc_top('ub', 1000)},
		extra_params => [ '-U', 'reader' ]),
	'5000', 'sc_top over every key agrees');

$node->safe_psql('postgres', 'SELECT sc_rollup()');
is( $node->safe_psql(
		'postgres', q{SELECT sum(value) FILTER (WHERE counter = 'ub'::slotted_counter::integer),
		                     sum(value) FILTER (WHERE counter = 'ut'::slotted_counter::integer)
		              FROM slotted_counter.key_values},
		extra_params => [ '-U', 'reader' ]),
	'5000|7000', 'the reader sees the lagged values of the counters it may read');
is( $node->safe_psql(
		'postgres', q{SELECT evictions > 0 FROM slotted_counter.stats
		              WHERE datname = current_database()}),
	't', 'keys were evicted and loaded again');

my ($rc, $out, $err) = $node->psql('postgres', q{SELECT sc_sum('ub', 1)},
	extra_params => [ '-U', 'writer' ]);
like($err, qr/permission denied for counter "ub"/, 'the writer may not read');

$node->stop;
done_testing();

# Monitoring from the database an exporter connects to (postgres), not the application's: with the
# extension created there, slotted_counter.stats shows every database's flusher to a member of
# pg_monitor (which holds pg_read_all_stats), and that database gets no flusher of its own for it.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Utils;
use Test::More;
use SlottedCounterTest;

my $node = preloaded_node('monitoring', "slotted_counter.flush_interval = 0\n");
$node->safe_psql('postgres', q{
CREATE DATABASE app;
CREATE EXTENSION slotted_counter;
CREATE ROLE exporter LOGIN IN ROLE pg_monitor;
CREATE ROLE nosy LOGIN;
});
$node->safe_psql('app', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('views', 'buffered');
SELECT count(sc_incr('views', k)) FROM generate_series(1, 100) k;
SELECT sc_rollup();
});

my $seen = q{SELECT datname, flushes > 0, rows_written >= 100 FROM slotted_counter.stats
  WHERE datname = 'app'};
is($node->safe_psql('postgres', $seen, extra_params => [ '-U', 'exporter' ]),
	'app|t|t', "a member of pg_monitor connected to postgres sees app's flusher and its flushes");
is( $node->safe_psql('postgres', q{SELECT string_agg(datname, ',' ORDER BY datname)
  FROM slotted_counter.stats}, extra_params => [ '-U', 'nosy' ]),
	'postgres', 'a role without pg_read_all_stats sees its own database only');
is( $node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
  WHERE backend_type = 'slotted_counter flusher' AND datname = 'postgres'}),
	'0', 'the extension in postgres, where nothing counts, starts no flusher there');

$node->stop;
done_testing();

# A full disk: slotted_counter.key_values lives in a tablespace on a small filesystem that a table
# fills. Increments go on and are exact, every flush fails and slotted_counter.stats says why, a
# clean restart saves what could not be flushed and restores it, and once there is room again
# every acknowledged increment reaches the table, once.
#
# Needs a small filesystem that the test's user may write: test/run.sh mounts one (tmpfs) and
# names it in SC_SMALL_FS.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

plan skip_all => 'SC_SMALL_FS names no small filesystem (test/run.sh mounts one when it can)'
  unless $ENV{SC_SMALL_FS};

my $location = "$ENV{SC_SMALL_FS}/full_disk";
mkdir $location or die "mkdir $location: $!";

my $node = preloaded_node('full_disk', "slotted_counter.flush_interval = 100\n");
$node->safe_psql('postgres', qq{
CREATE TABLESPACE small LOCATION '$location';
CREATE EXTENSION slotted_counter;
ALTER TABLE slotted_counter.key_values SET TABLESPACE small;
ALTER INDEX slotted_counter.key_values_pkey SET TABLESPACE small;
SELECT sc_create('b', 'buffered');
SELECT count(sc_incr('b', g, 1)) FROM generate_series(1, 100) g;
SELECT sc_rollup();
CREATE TABLE filler (x text) TABLESPACE small;
CREATE PROCEDURE fill() LANGUAGE plpgsql AS \$\$
BEGIN
  LOOP
    INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 100);
    COMMIT;
  END LOOP;
END \$\$;
});
my ($rc, $out, $err) = $node->psql('postgres', 'CALL fill()');
like($err, qr/No space left on device/, 'the tablespace is full');

# 5,000 new keys, 3 increments each: their rows do not fit.
$node->safe_psql('postgres', q{
SELECT count(sc_incr('b', g, 1)) FROM generate_series(1, 5100) g, generate_series(1, 3)});
my $expected = 100 + 5100 * 3;
my $values = q{SELECT sum(sc_sum('b', g)) FROM generate_series(1, 5100) g};
is($node->safe_psql('postgres', $values), $expected, 'every increment is counted, exactly');
ok( $node->poll_query_until(
		'postgres', q{SELECT worker_state = 'failing' AND flush_failures >= 2
		              AND last_error LIKE '%No space left on device%'
		              FROM slotted_counter.stats WHERE datname = current_database()}),
	'slotted_counter.stats: the flusher is failing, and why');
($rc, $out, $err) = $node->psql('postgres', 'SELECT sc_rollup()');
like($err, qr/could not flush counters: .*No space left on device/, 'sc_rollup() reports it');
my $stored = q{SELECT coalesce(sum(value), 0) FROM slotted_counter.key_values};
my $before = $node->safe_psql('postgres', $stored);
cmp_ok($before, '<', $expected, 'the table lacks what could not be flushed');

my $offset = -s $node->logfile;
$node->restart;
my $log = substr(slurp_file($node->logfile), $offset);
like($log, qr/slotted_counter: saved \d+ values that could not be flushed/,
	'a clean restart saved the values to a file');
like($log, qr/slotted_counter: restored \d+ values/, 'and the next start restored them');
is($node->safe_psql('postgres', $values), $expected, 'every increment is still there');

$node->safe_psql('postgres', 'DROP TABLE filler');
ok($node->poll_query_until('postgres', $stored, $expected),
	'room again: every acknowledged increment reaches the table, once');
ok( $node->poll_query_until(
		'postgres', q{SELECT worker_state <> 'failing' AND flush_failures = 0
		              FROM slotted_counter.stats WHERE datname = current_database()}),
	'and the flusher is no longer failing');

$node->stop;
done_testing();

# A slow flush does not widen what a crash loses. A flush writes in steps, each a transaction of
# its own, and every flush interval it takes what turned dirty since (a hot key among them) ahead
# of the rest of its work (src/workers/flush.cpp). Here the slow part is the fold of 400,000
# transactional deltas (forty 10,000-key batches committed while no flush ran), and a client
# increments a buffered hot key meanwhile, logging each value it was acknowledged (a committed
# row per call):
#   - while that one flush still runs (slotted_counter.stats counts no new flush, deltas remain
#     to fold), the hot key's row in slotted_counter.key_values advances at least twice: its values
#     commit during the flush, not after it (they did only after it, one transaction, before);
#     and stats shows the flush, once it ran three intervals, as 'lagging', which the alert
#     query of docs/operations.md catches;
#   - the server then crashes (an immediate stop); after the restart every transactional value
#     is exact, and the hot key holds at least what its row held before the crash and no value
#     it never returned: the lost increments are only those after its last commit. How many
#     were lost, and how old the oldest of them was at the crash, is reported.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

# No flush runs until the configuration says so (flush_interval = 0: only when asked).
my $node = preloaded_node('crash_window', qq{
slotted_counter.flush_interval = 0
slotted_counter.max_entries = 50000
});
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('bulk'), sc_create('hot', 'buffered');
CREATE TABLE acked (v bigint, at timestamptz);
SELECT sc_rollup();
});

# 400,000 deltas: forty transactions of 10,000 keys each, none folded yet.
$node->safe_psql('postgres', join("\n", map { q{SELECT cardinality(sc_incr_batch('bulk',
  ARRAY(SELECT generate_series(1, 10000)::bigint), array_fill(1::bigint, ARRAY[10000])));} }
	  1 .. 40));
is($node->safe_psql('postgres', 'SELECT count(*) FROM slotted_counter.deltas'),
	'400000', 'the deltas wait for a fold');

# The hot key's client: one call a transaction, each acknowledged value logged as it commits,
# until the crash ends it.
$node->safe_psql('postgres', q{
CREATE PROCEDURE count_hot() LANGUAGE plpgsql AS $$
BEGIN
  LOOP
    INSERT INTO acked VALUES (sc_incr('hot', 1), clock_timestamp());
    COMMIT;
  END LOOP;
END
$$;
});
my ($out, $err) = ('', '');
my $hot = IPC::Run::start(
	[
		'psql', '-X', '-d', $node->connstr('postgres'), '-c', 'SET statement_timeout = 0',
		'-c', 'CALL count_hot()'
	],
	'>', \$out, '2>', \$err);
ok($node->poll_query_until('postgres', 'SELECT count(*) >= 100 FROM acked'),
	'the hot key is being counted');

# The watch: from the reload that starts the flushes, until the hot key's row advanced twice
# during one flush that still has deltas to fold, or that flush ended first.
$node->append_conf('postgresql.conf', "slotted_counter.flush_interval = 100\n");
$node->safe_psql('postgres', q{
CREATE FUNCTION watch() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  f0 bigint; f bigint; v0 bigint; v bigint; d bigint; advances int := 0; started boolean := false;
  state text; lagging boolean := false;
BEGIN
  SELECT flushes INTO f0 FROM slotted_counter.stats WHERE datname = current_database();
  SELECT coalesce(max(value), 0) INTO v0 FROM slotted_counter.key_values
   WHERE counter = 'hot'::slotted_counter::integer;
  PERFORM pg_reload_conf();
  LOOP
    SELECT flushes, worker_state INTO f, state FROM slotted_counter.stats
     WHERE datname = current_database();
    SELECT coalesce(max(value), 0) INTO v FROM slotted_counter.key_values
     WHERE counter = 'hot'::slotted_counter::integer;
    SELECT count(*) INTO d FROM slotted_counter.deltas;
    IF f <> f0 THEN
      RETURN format('the flush ended after %s advances, lagging: %s', advances, lagging);
    END IF;
    started := started OR d < 400000;
    lagging := lagging OR (started AND state = 'lagging');
    IF started AND d > 0 AND v <> v0 THEN
      advances := advances + 1;
      v0 := v;
    END IF;
    IF advances >= 2 AND lagging AND d > 0 THEN
      RETURN 'advanced twice and shown lagging, ' || d || ' deltas still to fold';
    END IF;
    PERFORM pg_sleep(0.005);
  END LOOP;
END
$$;
});
my $watched = $node->safe_psql('postgres', 'SET statement_timeout = 0; SELECT watch()');
like($watched, qr/^advanced twice and shown lagging/,
	"the hot key's values committed twice while the slow flush ran, which stats showed as "
	  . "lagging ($watched)");
my $before = $node->safe_psql('postgres', q{
SELECT coalesce(max(value), 0) FROM slotted_counter.key_values
 WHERE counter = 'hot'::slotted_counter::integer});

$node->stop('immediate');
eval { $hot->finish; };
$node->start;
# The deltas left unfolded by the crash are folded first (until then every load of a key reads
# them too).
$node->safe_psql('postgres', 'SELECT sc_rollup()');

is( $node->safe_psql('postgres', q{
SELECT sc_sum_keys('bulk', ARRAY(SELECT generate_series(1, 10000)::bigint))}),
	'400000', 'every transactional increment survived the crash');
# The age of the oldest lost increment: from its acknowledgement to the last one before the crash.
my ($kept, $acked, $lost, $age) = split /\|/, $node->safe_psql('postgres', q{
WITH k AS (SELECT sc_sum('hot', 1) AS v)
SELECT k.v, (SELECT max(v) FROM acked), (SELECT count(*) FROM acked WHERE v > k.v),
       (SELECT round(1000 * extract(epoch FROM (SELECT max(at) FROM acked) - min(at)))
          FROM acked WHERE v > k.v) FROM k});
cmp_ok($kept, '>=', $before, "the hot key kept what its row held before the crash ($before)");
cmp_ok($kept, '<=', $acked, 'and no value it never returned');
note sprintf('the crash lost %d of %d acknowledged increments of the hot key%s',
	$lost, $acked, $lost > 0 ? ", the oldest acknowledged $age ms before the crash" : '');

$node->stop;
done_testing();

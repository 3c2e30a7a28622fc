# Every pool that the databases of a server share is shared fairly: a database (or, for the
# indexes of sc_rank, a role within a database) below its share of a pool never waits on one
# above it, and what one frees is taken again at once.
#   1. Rank memory (slotted_counter.rank_memory = 1 MB): a counter whose index does not fit beside
#      a larger one is refused; once the larger counter is dropped, the next sc_rank asks again
#      and the flush builds its index (before, the refusal stayed for 10 minutes), and a refused
#      counter holds no slot.
#   2. Rank slots (32 in all): one role's 32 one-key counters hold every slot; another database's
#      sc_rank, and another role's in the same database, get an index all the same (the role over
#      its share gives one up), where before they counted rows in slotted_counter.key_values on every
#      call. A rank answered by an index reads no table: pg_stat_xact_all_tables shows it.
#   3. Request ids of buffered sc_incr_once (slotted_counter.max_request_ids = 2048: two parts,
#      each shared on its own, request_ids.hpp): one database
#      takes every id it can while its flush cannot write (its values table is locked), and its
#      next call fails after 10 s (begun first, it waits while 1 and 2 run); another database's
#      calls complete at once, where before they waited 10 s for the other database's flush and
#      failed with 53400. Every id counts once in both databases afterwards.
#   4. A database whose request ids unflushed reach half its share of a part asks its flusher for
#      a flush: the ids are written before calls find the part full and wait (the flusher, asked
#      by nothing else here, writes them).
# The flusher runs only when asked (flush_interval = 0) and stays (idle_timeout = 0): a new
# flusher would drop its database's indexes.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('shared_pools', q{
slotted_counter.flush_interval = 0
slotted_counter.idle_timeout = 0
slotted_counter.rank_memory = 1
slotted_counter.max_request_ids = 2048
});
$node->safe_psql('postgres', q{
CREATE DATABASE mem; CREATE DATABASE ranks; CREATE DATABASE other;
CREATE DATABASE flood; CREATE DATABASE quiet; CREATE DATABASE early;
CREATE ROLE hog LOGIN; CREATE ROLE meek LOGIN;
GRANT CREATE ON DATABASE ranks TO hog, meek;
});
$node->safe_psql($_, 'CREATE EXTENSION slotted_counter') for qw(mem ranks other flood quiet early);

my $ready = q{SELECT rank_indexes FROM slotted_counter.stats WHERE datname = current_database()};

# How many times sc_rank(counter, key) read slotted_counter.key_values (0: its index answered), as
# role $role (the superuser by default). The key is read first, so that it is resident and its
# own value costs no read either.
sub rank_reads
{
	my ($db, $counter, $key, $role) = @_;
	my $as = $role ? "SET ROLE $role;" : '';
	my $out = $node->safe_psql($db, qq{$as
SELECT sc_sum('$counter', $key) IS NOT NULL;
BEGIN;
SELECT sc_rank('$counter', $key) > 0;
SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_xact_all_tables
 WHERE relid = 'slotted_counter.key_values'::regclass;
COMMIT;});
	return (split /\n/, $out)[-1];
}

# A buffered counter of keys 1..n (values 1..n), flushed.
sub counter_of
{
	my ($db, $name, $n) = @_;
	$node->safe_psql($db, qq{
SELECT sc_create('$name', 'buffered');
SELECT cardinality(sc_incr_batch('$name', ARRAY(SELECT generate_series(1, $n)::bigint),
                                 ARRAY(SELECT generate_series(1, $n)::bigint)));
SELECT sc_rollup();});
}

# 3, begun first: its flood waits 10 s for a flush that cannot come, while 1 and 2 run. flood's
# values table is locked: its flush cannot write, so its ids stay in shared memory. It takes all
# it can; its next call waits for its own flush, and fails after 10 s. The keys are counted (by
# 0) first: a key not resident would be read from the locked table.
$node->safe_psql('flood', q{SELECT sc_create('f', 'buffered'); SELECT sc_incr('f', 1, 0)});
$node->safe_psql('quiet', q{SELECT sc_create('q', 'buffered'); SELECT sc_incr('q', 1, 0)});
my $locker = $node->background_psql('flood');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE slotted_counter.key_values IN ACCESS EXCLUSIVE MODE');
my ($flood_out, $flood_err) = ('', '');
my $flood = IPC::Run::start(
	[
		'psql', '-X', '-At', '-v', 'VERBOSITY=verbose', '-c',
		q{SELECT count(sc_incr_once('f', 1, 1, 'flood-' || g)) FROM generate_series(1, 2500) g},
		'-h', $node->host, '-p', $node->port, 'flood'
	],
	'>', \$flood_out, '2>', \$flood_err);

# 1. Rank memory. 1 MB holds the index of 30,000 keys, or of 15,000, not both.
counter_of('mem', 'big', 30000);
counter_of('mem', 'mid', 15000);
$node->safe_psql('mem', q{SELECT sc_rank('big', 5); SELECT sc_rollup()});
is($node->safe_psql('mem', $ready), '1', 'the larger counter has its index');
$node->safe_psql('mem', q{SELECT sc_rank('mid', 5); SELECT sc_rollup()});
is($node->safe_psql('mem', $ready), '1', 'the smaller one, beside it, is refused');
isnt(rank_reads('mem', 'mid', 5), '0', 'its sc_rank counts rows');
$node->safe_psql('mem', q{SELECT sc_drop('big'); SELECT sc_rollup()});
$node->safe_psql('mem', q{SELECT sc_rank('mid', 5); SELECT sc_rollup()});
is($node->safe_psql('mem', $ready), '1',
	'once the larger counter is dropped, the refused one is built at its next sc_rank');
is(rank_reads('mem', 'mid', 5), '0', 'and its sc_rank reads no table');
$node->safe_psql('mem', q{SELECT sc_drop('mid'); SELECT sc_rollup()});
is($node->safe_psql('mem', $ready), '0', 'a dropped counter frees its index');

# 2. Rank slots: hog's 32 one-key counters in database ranks take all 32.
$node->safe_psql('ranks', q{
SET ROLE hog;
SELECT count(sc_create('h' || i, 'buffered')) FROM generate_series(1, 32) i;
SELECT count(sc_incr('h' || i, 1, i)) FROM generate_series(1, 32) i;
SELECT sc_rollup();
SELECT count(sc_rank('h' || i, 1)) FROM generate_series(1, 32) i;
SELECT sc_rollup();});
is($node->safe_psql('ranks', $ready), '32', "hog's 32 counters hold every slot");

counter_of('other', 'o', 100);
$node->safe_psql('other', q{SELECT sc_rank('o', 5); SELECT sc_rollup()});
is($node->safe_psql('other', $ready), '1', "another database's sc_rank gets an index");
is(rank_reads('other', 'o', 5), '0', 'and reads no table');
is($node->safe_psql('ranks', $ready), '31', 'a slot of the database over its share went');

$node->safe_psql('ranks', q{SET ROLE meek; SELECT sc_create('m', 'buffered');
SELECT sc_incr('m', 1, 5), sc_incr('m', 2, 7); SELECT sc_rollup();});
$node->safe_psql('ranks', q{SET ROLE meek; SELECT sc_rank('m', 1); SELECT sc_rollup()});
is(rank_reads('ranks', 'm', 1, 'meek'), '0',
	"another role's counter in the same database gets an index too");
is($node->safe_psql('ranks', $ready), '31', 'taken from the role over its share');
is(rank_reads('other', 'o', 5), '0', "and not from the other database's");
is($node->safe_psql('ranks', q{SET ROLE meek; SELECT sc_rank('m', 2), sc_rank('m', 1)}),
	'1|2', "meek's ranks are right");

# hog asks again for every counter: over its share, it gets no slot back, and takes none from
# the others.
$node->safe_psql('ranks', q{SET ROLE hog;
SELECT count(sc_rank('h' || i, 1)) FROM generate_series(1, 32) i; SELECT sc_rollup();});
is(rank_reads('other', 'o', 5) . rank_reads('ranks', 'm', 1, 'meek'), '00',
	'a role over its share takes no slot back from those within theirs');

# 3. Request ids: the flood, begun first, ran out.
$flood->finish;
like($flood_err, qr/ERROR:  53400: no room for the request id of counter "f"/,
	'the flood takes request ids until none is left for it');
my $flooded = $node->safe_psql('flood', q{SELECT sc_sum('f', 1)});
note "the flood applied $flooded ids before it ran out";

# quiet's calls, while flood's flush still cannot write (the lock is held).
my ($ret, $out, $err) = $node->psql('quiet',
	q{SELECT sc_incr_once('q', 1, 1, 'quiet-' || g) FROM generate_series(1, 5) g},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
is($out, join("\n", 1 .. 5), "another database's sc_incr_once calls complete meanwhile");
is($err, '', 'with no error');
# Once quiet's own flush wrote them, its ids are free again: quiet goes on.
($ret, $out, $err) = $node->psql('quiet', q{SELECT sc_rollup() >= 0;
SELECT sc_incr_once('q', 1, 1, 'quiet-' || g) FROM generate_series(1, 10) g},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
is($out, join("\n", 't', 1 .. 5, 6 .. 10),
	'and after its own flush, the same ids repeat their values and new ones count');
is($err, '', 'with no error either');
is($locker->query_safe('SELECT 1'), '1', 'the lock was held all along');

$locker->query_safe('COMMIT');
$locker->quit;
# Every id of both counts once: flood's 2500 sent again apply those that had not been.
is( $node->safe_psql('flood', q{SELECT sc_rollup() >= 0;
SELECT count(sc_incr_once('f', 1, 1, 'flood-' || g)) FROM generate_series(1, 2500) g;
SELECT sc_sum('f', 1)}),
	"t\n2500\n2500", "the flood's ids count once each");
is($node->safe_psql('quiet', q{SELECT sc_rollup() >= 0, sc_sum('q', 1)}),
	't|10', "quiet's count once each");

# 4. Once flood's and quiet's ids are written, early is alone: its share of each part is
# (1024 - 1024 / 16) = 960 ids, so 1200 calls (about 600 ids a part, within the share) pass half
# of it in both parts.
$node->safe_psql($_, 'SELECT sc_rollup()') for qw(flood quiet);
is($node->safe_psql('early', q{SELECT sc_create('e', 'buffered');
SELECT count(sc_incr_once('e', 1, 1, 'early-' || g)) FROM generate_series(1, 1200) g}),
	"e\n1200", 'calls with new ids take half the share of their parts');
ok($node->poll_query_until('early', q{SELECT count(*) > 0 FROM slotted_counter.requests}),
	'and their flush comes without a sc_rollup() or a flush interval');
is($node->safe_psql('early', q{SELECT sc_rollup() >= 0;
SELECT count(*), sum(result) FROM slotted_counter.requests}),
	"t\n1200|720600", 'every id written once, with its result');

$node->stop;
done_testing();

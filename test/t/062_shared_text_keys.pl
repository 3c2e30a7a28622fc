# The ids of text keys are shared by the backends (slotted_counter.shared_text_keys): a key one
# session looked up or was given is found by a new session without reading slotted_counter.keys
# (pg_stat_xact_all_tables counts its scans), a key too long to share is read as before, and no
# shared id outlives its counter: after DROP EXTENSION and CREATE EXTENSION, a counter with the
# same id as the dropped one reads its own texts; in the transaction that drops the extension no
# counter is created. With shared_text_keys = 0 nothing is shared and everything still counts.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('shared_text_keys', '');

# The scans of slotted_counter.keys that $sql made, in a new session, with its output.
sub keys_read
{
	my ($sql) = @_;
	my $out = $node->safe_psql('postgres', qq{BEGIN;
$sql;
SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_xact_all_tables
 WHERE relid = 'slotted_counter.keys'::regclass;
COMMIT;});
	return join('|', split /\n/, $out);
}

my $long = '/' . ('l' x 200);
$node->safe_psql('postgres', qq{
CREATE EXTENSION slotted_counter;
SELECT sc_create('a', 'buffered', key_type => 'text');
SELECT sc_incr('a', '/x', 5), sc_incr('a', '$long', 3);
});
my $old_id = $node->safe_psql('postgres', q{SELECT 'a'::slotted_counter::integer});

is(keys_read(q{SELECT sc_incr('a', '/x', 1)}), '6|0',
	"a new session finds another's key without reading slotted_counter.keys");
is(keys_read(qq{SELECT sc_incr('a', '$long', 1)}), '4|1',
	'a key longer than a shared slot holds is read from the table');
is(keys_read(q{SELECT sc_sum('a', '/never')}), '0|1',
	'a key never given an id is looked for in the table');

# The extension dropped and created again: its counters' ids start again, and the ids of the
# texts too; 'b' is 'a''s id, and its '/y' is given the id '/x' had.
$node->safe_psql('postgres', q{
DROP EXTENSION slotted_counter CASCADE;
CREATE EXTENSION slotted_counter;
SELECT sc_create('b', 'buffered', key_type => 'text');
SELECT sc_incr('b', '/y', 7);
});
is($node->safe_psql('postgres', q{SELECT 'b'::slotted_counter::integer}),
	$old_id, 'the new counter has the dropped one\'s id');
is($node->safe_psql('postgres', q{SELECT sc_sum('b', '/x'), sc_sum('b', '/y')}),
	'0|7', 'a new session reads no shared id of the dropped counter');
is($node->safe_psql('postgres', q{SELECT sc_incr('b', '/x', 1), sc_sum('b', '/y')}),
	'1|7', 'and counts the old text from 0');

# In one transaction, the extension dropped and created again: a counter created then would have
# the dropped one's id while the dropped one's values and cached ids stay until the commit (and
# come back with a rollback), so sc_create refuses (before, the new counter read the old one's
# value and the rollback purged the old one's unflushed increments).
my ($ret, $out, $err) = $node->psql(
	'postgres', q{BEGIN;
DROP EXTENSION slotted_counter CASCADE;
CREATE EXTENSION slotted_counter;
SELECT sc_create('c', 'buffered', key_type => 'text');
ROLLBACK;}, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  0A000: cannot create a counter in the transaction that dropped the extension/,
	'sc_create refuses in the transaction that dropped the extension');
is($node->safe_psql('postgres', q{SELECT sc_sum('b', '/x'), sc_sum('b', '/y')}),
	'1|7', 'and the rolled back drop left the old counter as it was');

# Nothing shared: the setting at 0.
$node->append_conf('postgresql.conf', 'slotted_counter.shared_text_keys = 0');
$node->restart;
is($node->safe_psql('postgres', 'SHOW slotted_counter.shared_text_keys'), '0', 'the setting is 0');
$node->safe_psql('postgres', q{SELECT sc_incr('b', '/z', 2)});
is(keys_read(q{SELECT sc_incr('b', '/z', 1), sc_sum('b', '/y')}), '3|7|2',
	'with nothing shared, a new session reads both keys from the table and counts all the same');

$node->stop;
done_testing();

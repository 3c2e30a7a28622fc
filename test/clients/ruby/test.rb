# slotted_counter through ruby-pg and ActiveRecord, called as docs/guides/drivers.md shows each,
# in the database libpq's PG* environment variables name. Prints "ok STACK: ..." or
# "not ok STACK: ...", and exits 1 if a check failed.
require 'pg'
require 'active_record'

$failures = 0

def check(stack, name)
  yield
  puts "ok #{stack}: #{name}"
rescue StandardError => e
  $failures += 1
  puts "not ok #{stack}: #{name}: #{e.class}: #{e.message.split.join(' ')}"
  puts e.backtrace.first(5)
end

def eq(actual, expected, what)
  raise "#{what}: got #{actual.inspect}, expected #{expected.inspect}" unless actual == expected
end

# ruby-pg sends its parameters untyped, as text: an Integer key reaches the text form, which
# reads it as the bigint it spells on a counter keyed by bigint. A Ruby array is not encoded by
# default: PG::TextEncoder::Array makes the literal, or a type map for queries does it.
conn = PG.connect
check('ruby-pg', 'int and str keys, untyped') do
  eq(conn.exec_params('SELECT sc_create($1, $2)', ['pg_views', 'buffered']).getvalue(0, 0),
     'pg_views', 'sc_create')
  (1..3).each do |n|
    eq(conn.exec_params('SELECT sc_incr($1, $2)', ['pg_views', 42]).getvalue(0, 0).to_i, n,
       'an Integer key')
  end
  conn.exec_params('SELECT sc_create($1, $2, key_type => $3)', ['pg_urls', 'buffered', 'text'])
  eq(conn.exec_params('SELECT sc_incr($1, $2)', ['pg_urls', '/pricing']).getvalue(0, 0), '1',
     'a String key')
end
check('ruby-pg', 'arrays of keys, encoded') do
  array = PG::TextEncoder::Array.new
  got = conn.exec_params('SELECT sc_incr_batch($1, $2, $3)',
                         ['pg_views', array.encode([1, 42]), array.encode([5, 1])]).getvalue(0, 0)
  eq(got, '{5,4}', 'sc_incr_batch with PG::TextEncoder::Array')
  typed = PG.connect
  typed.type_map_for_queries = PG::BasicTypeMapForQueries.new(typed)
  typed.type_map_for_results = PG::BasicTypeMapForResults.new(typed)
  eq(typed.exec_params('SELECT sc_sum_keys($1, $2)', ['pg_views', [1, 42]]).getvalue(0, 0), 9,
     'sc_sum_keys with a type map for queries')
  eq(typed.exec_params('SELECT sc_incr($1, $2)', ['pg_views', 42]).getvalue(0, 0), 5,
     'an Integer key with a type map (sent as bigint)')
  typed.close
end
check('ruby-pg', 'void, SQLSTATE, a rollback') do
  eq(conn.exec_params('SELECT sc_drop($1)', ['pg_urls']).getvalue(0, 0), '', 'void')
  begin
    conn.exec_params('SELECT sc_incr($1, $2)', ['no_such_counter', 1])
    raise 'an unknown counter did not fail'
  rescue PG::Error => e
    eq(e.result.error_field(PG::PG_DIAG_SQLSTATE), '42704', 'SQLSTATE')
  end
  conn.exec_params('SELECT sc_create($1)', ['pg_sold'])
  conn.transaction { conn.exec_params('SELECT sc_incr($1, $2)', ['pg_sold', 1]) }
  conn.exec('BEGIN')
  conn.exec_params('SELECT sc_incr($1, $2)', ['pg_sold', 1])
  conn.exec('ROLLBACK')
  eq(conn.exec_params('SELECT sc_sum($1, $2)', ['pg_sold', 1]).getvalue(0, 0), '1',
     'one committed, one rolled back')
end
conn.close

# ActiveRecord: sanitize_sql_array quotes the values into the statement, as its finders do;
# an Array becomes a list, so an array argument is written ARRAY[?].
ActiveRecord::Base.establish_connection(adapter: 'postgresql', host: ENV['PGHOST'],
                                        port: ENV['PGPORT'], database: ENV['PGDATABASE'],
                                        username: ENV['PGUSER'])
db = ActiveRecord::Base.connection
sql = ->(*args) { ActiveRecord::Base.sanitize_sql_array(args) }
check('activerecord', 'int and str keys, arrays, void, a rollback') do
  eq(db.select_value(sql.call('SELECT sc_create(?, ?)', 'ar_views', 'buffered')), 'ar_views',
     'sc_create')
  (1..3).each do |n|
    eq(db.select_value(sql.call('SELECT sc_incr(?, ?)', 'ar_views', 42)), n, 'an Integer key')
  end
  eq(db.select_value(sql.call('SELECT sc_incr_batch(?, ARRAY[?], ARRAY[?])', 'ar_views',
                              [1, 42], [5, 1])), '{5,4}', 'arrays as ARRAY[?]')
  db.select_value(sql.call("SELECT sc_create(?, ?, key_type => 'text')", 'ar_urls', 'buffered'))
  eq(db.select_value(sql.call('SELECT sc_incr(?, ?)', 'ar_urls', '/pricing')), 1, 'a String key')
  eq(db.select_value(sql.call('SELECT sc_drop(?)', 'ar_urls')), '', 'void')
  db.select_value(sql.call('SELECT sc_create(?)', 'ar_sold'))
  ActiveRecord::Base.transaction { db.select_value(sql.call('SELECT sc_incr(?, ?)', 'ar_sold', 1)) }
  ActiveRecord::Base.transaction do
    db.select_value(sql.call('SELECT sc_incr(?, ?)', 'ar_sold', 1))
    raise ActiveRecord::Rollback
  end
  eq(db.select_value(sql.call('SELECT sc_sum(?, ?)', 'ar_sold', 1)), 1,
     'one committed, one rolled back')
end
check('activerecord', 'SQLSTATE of an unknown counter') do
  db.select_value(sql.call('SELECT sc_incr(?, ?)', 'no_such_counter', 1))
  raise 'an unknown counter did not fail'
rescue ActiveRecord::StatementInvalid => e
  eq(e.cause.result.error_field(PG::PG_DIAG_SQLSTATE), '42704', 'SQLSTATE')
end

exit($failures.zero? ? 0 : 1)

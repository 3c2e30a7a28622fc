// flush_copy.cpp: rows a flush inserts (the request ids it took, the rows of the text ids backends
// gave, and its fresh keys' rows of slotted_counter.key_values when that table's columns are not
// as made: flush_insert.cpp) written through COPY's bulk insertion (flush_internal.hpp).
//
// An INSERT of unnested arrays inserts its rows one at a time: a heap insertion, a WAL record and
// a buffer lock per row. COPY FROM (CopyFrom) fills a page's worth of rows at once
// (heap_multi_insert: one WAL record per page) and then inserts their index entries; defaults
// (updated_at, a requests row's), constraints, unique indexes and the statement triggers (with
// their transition tables) run as for the INSERT. Its
// input is COPY's binary format, made here from the rows as CopyFrom reads it: no text to parse.
#include <algorithm>
#include <cstring>

#include "definitions/catalog.hpp"
#include "workers/flush.hpp"
#include "workers/flush_internal.hpp"

namespace sc {

namespace {

// Appends row i of `rows` to s: its field count, then each field.
using EncodeRow = void (*)(StringInfo s, const void* rows, int64 i);

// The rows CopyFrom is reading, and the encoded bytes not yet read. Its callback takes no
// argument: one COPY at a time in this process, between CopyInto's start and end.
struct CopyStream {
  const void* rows;
  EncodeRow encode;
  int64 n;
  int64 next;  // the first row not yet encoded
  bool ended;  // the trailer is encoded
  StringInfoData bytes;
  int read;    // bytes[0, read) were read
};
CopyStream* stream = nullptr;

constexpr int kRowsPerRefill = 512;

// COPY's binary format: a signature, flags and the length of a header extension (both 0); then
// per row its field count and each field's length (-1: NULL) and bytes, in network order; a
// field count of -1 ends the data.
constexpr char kSignature[11] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', '\377', '\r', '\n', '\0'};

void PutInt4(StringInfo s, int32 value) {
  pq_sendint32(s, 4);
  pq_sendint32(s, uint32(value));
}

// bigint, and timestamptz (its int64 of microseconds)
void PutInt8(StringInfo s, int64 value) {
  pq_sendint32(s, 8);
  pq_sendint64(s, uint64(value));
}

// Encodes the next rows (or the trailer) once the bytes read so far are used up.
void Refill(CopyStream* s) {
  if (s->read < s->bytes.len || s->ended) return;
  resetStringInfo(&s->bytes);
  s->read = 0;
  int64 end = std::min(s->n, s->next + kRowsPerRefill);
  for (; s->next < end; s->next++) s->encode(&s->bytes, s->rows, s->next);
  if (s->next == s->n) {
    pq_sendint16(&s->bytes, uint16(-1));
    s->ended = true;
  }
}

// copy_data_source_cb: at least minread bytes, at most maxread, 0 once everything was read.
int ReadRows(void* out, int minread, int maxread) {
  CopyStream* s = stream;
  Assert(s != nullptr);
  int given = 0;
  while (given < minread || given == 0) {
    Refill(s);
    int size = std::min(maxread - given, s->bytes.len - s->read);
    if (size <= 0) break;
    memcpy(static_cast<char*>(out) + given, s->bytes.data + s->read, size);
    s->read += size;
    given += size;
  }
  return given;
}

// Inserts n rows into the extension's table `table`, its columns `columns` (the others take their
// defaults), each row encoded by `encode`. Fails as an INSERT would (23505 on a duplicate key).
void CopyInto(const char* table, std::initializer_list<const char*> columns, const void* rows,
              int64 n, EncodeRow encode) {
  if (n == 0) return;
  Oid relid = ExtensionRelation(table);
  if (!OidIsValid(relid)) elog(ERROR, "slotted_counter.%s is missing", table);
  Relation rel = table_open(relid, RowExclusiveLock);
  // What COPY's statement would have: the table in a range table, for CopyFrom's executor state.
  ParseState* pstate = make_parsestate(nullptr);
  addRangeTableEntryForRelation(pstate, rel, RowExclusiveLock, nullptr, false, false);
  List* names = NIL;
  for (const char* column : columns) names = lappend(names, makeString(pstrdup(column)));
  List* options = list_make1(
      makeDefElem(pstrdup("format"), reinterpret_cast<Node*>(makeString(pstrdup("binary"))), -1));
  CopyStream s{rows, encode, n, 0, false, {}, 0};
  initStringInfo(&s.bytes);
  appendBinaryStringInfo(&s.bytes, kSignature, sizeof(kSignature));
  pq_sendint32(&s.bytes, 0);
  pq_sendint32(&s.bytes, 0);
  // An error leaves `stream` pointing here until the next call sets it again: nothing reads it
  // but a COPY this file starts.
  stream = &s;
  CopyFromState cstate =
      BeginCopyFrom(pstate, rel, nullptr, nullptr, false, ReadRows, names, options);
  uint64 copied = CopyFrom(cstate);
  EndCopyFrom(cstate);
  stream = nullptr;
  Assert(int64(copied) == n);
  (void)copied;
  pfree(s.bytes.data);
  free_parsestate(pstate);
  table_close(rel, NoLock);
  // What the rows' writer sees of them from here on, as after an SPI statement.
  CommandCounterIncrement();
}

void EncodeFresh(StringInfo s, const void* rows, int64 i, bool stamped) {
  const FlushItem& item = static_cast<const FlushItem*>(rows)[i];
  pq_sendint16(s, stamped ? 5 : 4);
  PutInt4(s, item.counter);
  PutInt8(s, item.key);
  PutInt8(s, item.bucket);  // kNoBucket: -infinity
  PutInt8(s, item.claim.delta);
  if (stamped) PutInt8(s, StampToStore(item.claim.stamped ? item.claim.stamp : kNoWrite));
}

void EncodeFreshStamped(StringInfo s, const void* rows, int64 i) { EncodeFresh(s, rows, i, true); }
void EncodeFreshNow(StringInfo s, const void* rows, int64 i) { EncodeFresh(s, rows, i, false); }

void EncodeRequestId(StringInfo s, const void* rows, int64 i) {
  const TakenRequestId& taken = static_cast<const TakenRequestId*>(rows)[i];
  int length = int(strlen(taken.id));
  pq_sendint16(s, 6);
  PutInt4(s, taken.counter);
  pq_sendint32(s, uint32(length));
  appendBinaryStringInfo(s, taken.id, length);  // text's binary form: its bytes
  PutInt8(s, taken.key);
  PutInt8(s, taken.bucket);
  PutInt8(s, taken.result);
  PutInt8(s, taken.applied_at);
}

void EncodeKeyRow(StringInfo s, const void* rows, int64 i) {
  const KeyRow& row = static_cast<const KeyRow*>(rows)[i];
  pq_sendint16(s, 3);
  PutInt4(s, row.counter);
  PutInt8(s, row.id);
  pq_sendint32(s, uint32(row.len));
  appendBinaryStringInfo(s, row.text, row.len);  // text's binary form: its bytes
}

}  // namespace

void CopyFreshRows(const FlushItem* items, int64 n, bool stamped) {
  if (stamped)
    CopyInto("key_values", {"counter", "key", "bucket", "value", "written_at"}, items, n,
             EncodeFreshStamped);
  else
    CopyInto("key_values", {"counter", "key", "bucket", "value"}, items, n, EncodeFreshNow);
}

void CopyRequestIds(const TakenRequestId* taken, int64 n) {
  CopyInto("requests", {"counter", "request_id", "key", "bucket", "result", "applied_at"}, taken,
           n, EncodeRequestId);
}

void CopyKeyRows(const KeyRow* rows, int64 n) {
  CopyInto("keys", {"counter", "id", "key"}, rows, n, EncodeKeyRow);
}

}  // namespace sc

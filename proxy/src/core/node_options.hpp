// node_options.hpp: the settings the router gives every connection it opens to a data node, as
// the words of libpq's `options` (the server splits them at white space, a backslash escaping the
// next character: postinit.c, pg_split_opts), and the quoting of a conninfo value. Both the
// router's own connections (remote.cpp) and PL/Proxy's take the node strings of the router's
// foreign server, which sc_proxy_configure writes with these settings last, so that they win
// over anything earlier in the string and over the role's and the database's defaults:
//
//   -c search_path=pg_catalog,"<slotted_counter's schema on that node>",pg_temp
//   -c slotted_counter_proxy.hop=on
//
// The path finds slotted_counter's API and type and nothing of the calling role's (its schemas,
// its temporary objects); the hop marks the session as a router's, so that a router reached
// through it refuses the call instead of routing it again (a loop).
//
// Pure: no PostgreSQL header, no allocation (the writers fill a caller's buffer and return the
// length they need, as snprintf); test/unit/node_options_test.cpp drives it.
#pragma once

#include <cstddef>
#include <cstring>

namespace sc_proxy {

inline constexpr const char* kHopSetting = "slotted_counter_proxy.hop=on";
inline constexpr const char* kPathSetting = "search_path=pg_catalog,";

namespace options_detail {

inline bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Appends to out[0 .. capacity) and counts what it would need.
struct Writer {
  char* out;
  size_t capacity;
  size_t length;
  void Put(char c) {
    if (length + 1 < capacity) out[length] = c;
    length++;
  }
  void Put(const char* s) {
    while (*s != '\0') Put(*s++);
  }
  size_t Finish() {
    if (capacity > 0) out[length < capacity ? length : capacity - 1] = '\0';
    return length;
  }
};

// A character of a word of `options`: white space and backslashes escaped with a backslash.
inline void PutOptionChar(Writer* w, char c) {
  if (c == '\\' || IsSpace(c)) w->Put('\\');
  w->Put(c);
}

}  // namespace options_detail

// The router's settings; schema nullptr (not known yet): pg_catalog and pg_temp only. The schema
// is always double-quoted, as an identifier of any spelling needs.
inline size_t RouterSettings(const char* schema, char* out, size_t capacity) {
  options_detail::Writer w = {out, capacity, 0};
  w.Put("-c ");
  for (const char* p = kPathSetting; *p != '\0'; p++) options_detail::PutOptionChar(&w, *p);
  if (schema != nullptr) {
    options_detail::PutOptionChar(&w, '"');
    for (const char* p = schema; *p != '\0'; p++) {
      if (*p == '"') options_detail::PutOptionChar(&w, '"');
      options_detail::PutOptionChar(&w, *p);
    }
    w.Put("\",");
  }
  w.Put("pg_temp -c ");
  w.Put(kHopSetting);
  return w.Finish();
}

// `value` as a conninfo value: in single quotes, backslashes and quotes escaped
// (libpq's conninfo_parse).
inline size_t ConninfoValue(const char* value, char* out, size_t capacity) {
  options_detail::Writer w = {out, capacity, 0};
  w.Put('\'');
  for (const char* p = value; *p != '\0'; p++) {
    if (*p == '\\' || *p == '\'') w.Put('\\');
    w.Put(*p);
  }
  w.Put('\'');
  return w.Finish();
}

// Whether `options` ends with the router's settings: a search_path of pg_catalog, then a quoted
// schema or none, then pg_temp; then the hop. Nothing after them overrides them.
inline bool EndsWithRouterSettings(const char* options) {
  if (options == nullptr) return false;
  // The last four words, as the server reads them (longer ones are not the router's).
  constexpr size_t kWord = 512;
  char words[4][kWord];
  int count = 0;
  const char* p = options;
  while (true) {
    while (options_detail::IsSpace(*p)) p++;
    if (*p == '\0') break;
    char* word = words[count % 4];
    size_t length = 0;
    while (*p != '\0' && !options_detail::IsSpace(*p)) {
      if (*p == '\\' && p[1] != '\0') p++;
      if (length + 1 < kWord) word[length] = *p;
      length++;
      p++;
    }
    if (length + 1 >= kWord) return false;
    word[length] = '\0';
    count++;
  }
  if (count < 4) return false;
  const char* c1 = words[(count - 4) % 4];
  const char* path = words[(count - 3) % 4];
  const char* c2 = words[(count - 2) % 4];
  const char* hop = words[(count - 1) % 4];
  size_t prefix = strlen(kPathSetting);
  if (strncmp(path, kPathSetting, prefix) != 0) return false;
  const char* rest = path + prefix;
  const char* tail = "\",pg_temp";
  size_t rest_length = strlen(rest);
  size_t tail_length = strlen(tail);
  bool pinned = strcmp(rest, "pg_temp") == 0 ||
                (rest_length > tail_length && rest[0] == '"' &&
                 strcmp(rest + rest_length - tail_length, tail) == 0);
  return strcmp(c1, "-c") == 0 && pinned && strcmp(c2, "-c") == 0 && strcmp(hop, kHopSetting) == 0;
}

}  // namespace sc_proxy

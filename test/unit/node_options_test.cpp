// The settings the router gives its connections to the data nodes (proxy/src/core/
// node_options.hpp): written into a node string's `options`, they must come out of libpq's
// conninfo quoting and the server's word splitting as the same words, whatever the schema's name
// and whatever options the string had already; and the check that a string still ends with them
// must refuse a string whose settings were edited away.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/node_options.hpp"

namespace {

std::string Settings(const char* schema) {
  size_t length = sc_proxy::RouterSettings(schema, nullptr, 0);
  std::string out(length + 1, '\0');
  EXPECT_EQ(sc_proxy::RouterSettings(schema, &out[0], out.size()), length);
  out.resize(length);
  return out;
}

std::string Quoted(const std::string& value) {
  size_t length = sc_proxy::ConninfoValue(value.c_str(), nullptr, 0);
  std::string out(length + 1, '\0');
  sc_proxy::ConninfoValue(value.c_str(), &out[0], out.size());
  out.resize(length);
  return out;
}

// libpq's reading of a single-quoted conninfo value (conninfo_parse): a backslash escapes the
// next character.
std::string UnquoteConninfo(const std::string& quoted) {
  std::string out;
  for (size_t i = 1; i + 1 < quoted.size(); i++) {
    if (quoted[i] == '\\') i++;
    out += quoted[i];
  }
  return out;
}

// The server's splitting of `options` (pg_split_opts).
std::vector<std::string> Words(const std::string& options) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < options.size()) {
    while (i < options.size() && isspace(static_cast<unsigned char>(options[i]))) i++;
    if (i == options.size()) break;
    std::string word;
    while (i < options.size() && !isspace(static_cast<unsigned char>(options[i]))) {
      if (options[i] == '\\' && i + 1 < options.size()) i++;
      word += options[i++];
    }
    words.push_back(word);
  }
  return words;
}

TEST(NodeOptions, SettingsWithoutASchema) {
  EXPECT_EQ(Settings(nullptr), "-c search_path=pg_catalog,pg_temp -c slotted_counter_proxy.hop=on");
  EXPECT_TRUE(sc_proxy::EndsWithRouterSettings(Settings(nullptr).c_str()));
}

TEST(NodeOptions, AShortBufferIsFilledAsFarAsItGoesAndEnded) {
  char buffer[8];
  size_t length = sc_proxy::RouterSettings("public", buffer, sizeof(buffer));
  EXPECT_EQ(length, Settings("public").size());
  EXPECT_EQ(std::string(buffer), Settings("public").substr(0, 7));
}

TEST(NodeOptions, SchemaNamesOfAnySpellingSurviveQuotingAndSplitting) {
  const char* schemas[] = {"public", "My Schema", "a\"b", "back\\slash", "tab\there", "it's"};
  for (const char* schema : schemas) {
    std::string options = "-c work_mem=1MB " + Settings(schema);
    std::string value = UnquoteConninfo(Quoted(options));
    EXPECT_EQ(value, options) << schema;
    std::vector<std::string> words = Words(value);
    ASSERT_EQ(words.size(), 6u) << schema;
    std::string quoted = "\"";
    for (const char* p = schema; *p != '\0'; p++) {
      if (*p == '"') quoted += '"';
      quoted += *p;
    }
    EXPECT_EQ(words[3], "search_path=pg_catalog," + quoted + "\",pg_temp") << schema;
    EXPECT_EQ(words[5], "slotted_counter_proxy.hop=on") << schema;
    EXPECT_TRUE(sc_proxy::EndsWithRouterSettings(value.c_str())) << schema;
  }
}

TEST(NodeOptions, AStringWhoseSettingsWereEditedAwayIsNotTaken) {
  const char* edited[] = {
      nullptr,
      "",
      "-c search_path=pg_catalog,pg_temp",
      "-c slotted_counter_proxy.hop=on",
      "-c search_path=pg_catalog,\"public\",pg_temp -c slotted_counter_proxy.hop=on -c "
      "search_path=evil",
      "-c search_path=evil,pg_catalog,pg_temp -c slotted_counter_proxy.hop=on",
      "-c search_path=pg_catalog,evil_pg_temp -c slotted_counter_proxy.hop=on",
      "-c search_path=pg_catalog,\"public\",pg_temp -c slotted_counter_proxy.hop=off",
      "--search_path=pg_catalog,pg_temp -c slotted_counter_proxy.hop=on",
  };
  for (const char* options : edited)
    EXPECT_FALSE(sc_proxy::EndsWithRouterSettings(options)) << (options ? options : "(null)");
}

}  // namespace

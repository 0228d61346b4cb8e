// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The trace's JSON reader and writer.
#include <cuasync/trace/json.hpp>

#include <catch2/catch.hpp>

#include <limits>
#include <string>

namespace json = cuasync::trace::json;

TEST_CASE("the JSON reader reads every kind of value and keeps object order", "[trace][json]") {
  const json::value v = json::parse(R"( {"b": [1, -2.5e3, 0.125, true, false, null], "a": {"x": "y"}, "s": ""} )");
  REQUIRE(v.is_object());
  CHECK(v.as_object()[0].first == "b");
  const json::array& b = v.find("b")->as_array();
  REQUIRE(b.size() == 6);
  CHECK(b[0].as_number() == 1);
  CHECK(b[0].is_integer());
  CHECK(b[1].as_number() == -2500);
  CHECK(b[2].as_number() == 0.125);
  CHECK_FALSE(b[2].is_integer());
  CHECK(b[3].as_bool());
  CHECK_FALSE(b[4].as_bool());
  CHECK(b[5].is_null());
  CHECK(v.find("a")->find("x")->as_string() == "y");
  CHECK(v.find("s")->as_string().empty());
  CHECK(v.find("missing") == nullptr);
  CHECK_THROWS(v.find("s")->as_number());
}

TEST_CASE("the JSON reader decodes escapes, surrogate pairs included", "[trace][json]") {
  CHECK(json::parse(R"("a\"b\\c\/d\n\t\u00e9\u20ac\ud83d\ude00")").as_string() ==
        "a\"b\\c/d\n\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
}

TEST_CASE("the JSON reader refuses malformed text, saying where", "[trace][json]") {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "01", "1.", "-", "+1", ".5", "1e", "tru",
                          "nul", "\"abc", "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"", "\"a\nb\"", "[1] 2", "{1:2}",
                          "NaN", "Infinity", "1e999"}) {
    INFO(bad);
    CHECK_THROWS_AS(json::parse(bad), json::parse_error);
  }
  try {
    json::parse("[1, 2, x]");
    FAIL("no error");
  } catch (const json::parse_error& e) {
    CHECK(e.offset() == 7);
  }
}

TEST_CASE("the JSON reader bounds nesting instead of overflowing the stack", "[trace][json]") {
  const std::string ok = std::string(json::max_depth - 1, '[') + std::string(json::max_depth - 1, ']');
  CHECK_NOTHROW(json::parse(ok));
  const std::string deep(100000, '[');
  CHECK_THROWS_WITH(json::parse(deep), Catch::Contains("nesting"));
}

TEST_CASE("the JSON writer places commas and escapes strings, and its output reads back", "[trace][json]") {
  json::writer w;
  w.begin_object().member("name", "a \"quoted\"\nline\x01").member("n", 42).member("neg", std::int64_t{-7});
  w.member("big", std::uint64_t{18446744073709551615u}).member("half", 0.5).member("yes", true);
  w.key("list").begin_array().value(1).value("two").null().newline().begin_object().end_object().end_array();
  w.member("inf", std::numeric_limits<double>::infinity()).key("raw").raw("1.250").end_object();
  const std::string text = w.str();
  CHECK(text.find("\\u0001") != std::string::npos);
  CHECK(text.find("[1,\"two\",null,\n{}]") != std::string::npos);
  const json::value v = json::parse(text);
  CHECK(v.find("name")->as_string() == "a \"quoted\"\nline\x01");
  CHECK(v.find("n")->as_number() == 42);
  CHECK(v.find("neg")->as_number() == -7);
  CHECK(v.find("half")->as_number() == 0.5);
  CHECK(v.find("list")->as_array().size() == 4);
  CHECK(v.find("inf")->is_null());
  CHECK(v.find("raw")->as_number() == 1.25);
}

TEST_CASE("bytes that are not UTF-8 become U+FFFD in reading and writing; well-formed UTF-8 passes", "[trace][json]") {
  const std::string replacement = "\xEF\xBF\xBD";
  // A stray continuation byte, an overlong form, a surrogate, a truncated sequence; then 2-, 3- and 4-byte characters.
  const json::value v = json::parse("[\"a\x80" "b\", \"\xC0\xAF\", \"\xED\xA0\x80\", \"x\xE2\x82\", "
                                    "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"]");
  const auto& a = v.as_array();
  CHECK(a[0].as_string() == "a" + replacement + "b");
  CHECK(a[1].as_string() == replacement + replacement);
  CHECK(a[2].as_string() == replacement + replacement + replacement);
  CHECK(a[3].as_string() == "x" + replacement + replacement);
  CHECK(a[4].as_string() == "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");  // é € 😀
  json::writer w;
  w.begin_array().value(std::string_view("bad \xff\xfe ok \xC3\xA9")).end_array();
  CHECK(w.str() == "[\"bad " + replacement + replacement + " ok \xC3\xA9\"]");
  CHECK(json::parse(w.str()).as_array()[0].as_string() == "bad " + replacement + replacement + " ok \xC3\xA9");
}

// The JSON writer of the metrics log and the benchmarks' records: numbers that are not finite
// are null, strings are escaped so that any path or message stays one valid JSON line.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "resnet_ddp/json_line.h"

using namespace rddp;

TEST_CASE("a number that is not finite is null; others keep nine significant digits") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(JsonLine().number("loss", nan).number("mfu", inf).number("lr", -inf).text() ==
        R"({"loss":null,"mfu":null,"lr":null})");
  CHECK(JsonLine().number("x", 0.1234567891234).integer("n", -7).boolean("b", false).text() ==
        R"({"x":0.123456789,"n":-7,"b":false})");
  CHECK(JsonLine().numbers("w", std::vector<double>{1.5, nan, 2}).text() ==
        R"({"w":[1.5,null,2]})");
}

TEST_CASE("strings are escaped: quotes, backslashes, control characters") {
  CHECK(JsonLine::quoted(R"(/data/"quoted" dir\sub)") == R"("/data/\"quoted\" dir\\sub")");
  CHECK(JsonLine::quoted(std::string("a\nb\tc\rd\x01" "e\x1f", 10)) ==
        R"("a\nb\tc\rd\u0001e\u001f")");
  CHECK(JsonLine().string("path", "x\"y").text() == R"({"path":"x\"y"})");
  // Keys are escaped alike.
  CHECK(JsonLine().integer("odd\"key", 1).text() == R"({"odd\"key":1})");
}

TEST_CASE("UTF-8 passes as it is; bytes that are not UTF-8 become U+FFFD") {
  CHECK(JsonLine::quoted("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  // A Latin-1 file name, a lone continuation byte, an overlong '/', a surrogate, a cut sequence.
  CHECK(JsonLine::quoted("caf\xe9") == R"("caf\ufffd")");
  CHECK(JsonLine::quoted("\x80x") == R"("\ufffdx")");
  CHECK(JsonLine::quoted("\xc0\xaf") == R"("\ufffd\ufffd")");
  CHECK(JsonLine::quoted("\xed\xa0\x80") == R"("\ufffd\ufffd\ufffd")");
  CHECK(JsonLine::quoted("\xe2\x82") == R"("\ufffd\ufffd")");
}

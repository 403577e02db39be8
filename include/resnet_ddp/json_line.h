#pragma once
// One JSON object on one line: the training metrics (--log-json) and the benchmarks' records,
// which scripts read back (scripts/plot_metrics.py, bench/compare_throughput.py). Strings are
// escaped as RFC 8259 asks, bytes that are not UTF-8 (a file name in another encoding) become
// U+FFFD so that the line stays valid JSON, and numbers that are not finite (a quantity that was
// not measured, or a loss that diverged) are written as null.
#include <string>

namespace rddp {

class JsonLine {
 public:
  JsonLine& number(const char* key, double value) { return raw(key, number_text(value)); }
  JsonLine& integer(const char* key, long long value) { return raw(key, std::to_string(value)); }
  JsonLine& boolean(const char* key, bool value) { return raw(key, value ? "true" : "false"); }
  JsonLine& string(const char* key, const std::string& value) { return raw(key, quoted(value)); }
  JsonLine& null(const char* key) { return raw(key, "null"); }
  JsonLine& object(const char* key, const JsonLine& value) { return raw(key, value.text()); }
  // An array of numbers, non-finite ones as null.
  template <typename Container>
  JsonLine& numbers(const char* key, const Container& values) {
    std::string text = "[";
    for (const double value : values) text += (text.size() > 1 ? "," : "") + number_text(value);
    return raw(key, text + "]");
  }

  std::string text() const { return "{" + body_ + "}"; }

  // The JSON text of a number (9 significant digits) or a string, as the methods above write it.
  static std::string number_text(double value);
  static std::string quoted(const std::string& value);

 private:
  JsonLine& raw(const char* key, const std::string& value) {
    body_ += (body_.empty() ? "" : ",") + quoted(key) + ":" + value;
    return *this;
  }

  std::string body_;
};

}  // namespace rddp

#pragma once
// One JSON object on one line, for the machine-readable records of the benchmarks: a table
// maker reads them back (bench/compare_throughput.py), so strings are escaped and numbers that
// are not finite (a quantity that was not measured or is unknown) are written as null.
#include <cmath>
#include <cstdio>
#include <string>

namespace rddp::bench {

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

 private:
  static std::string number_text(double value) {
    if (!std::isfinite(value)) return "null";
    char text[64];
    std::snprintf(text, sizeof text, "%.9g", value);
    return text;
  }
  static std::string quoted(const std::string& value) {
    std::string out = "\"";
    for (const char c : value) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
            out += escaped;
          } else {
            out += c;
          }
      }
    }
    return out + "\"";
  }
  JsonLine& raw(const char* key, const std::string& value) {
    body_ += (body_.empty() ? "" : ",") + quoted(key) + ":" + value;
    return *this;
  }

  std::string body_;
};

}  // namespace rddp::bench

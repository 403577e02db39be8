#include "class_difference.h"

#include <algorithm>
#include <iterator>

#include "resnet_ddp/printable.h"

namespace rddp::data {

namespace {

std::string only_in(const std::string& has, const std::vector<std::string>& names,
                    const std::string& lacks) {
  if (names.empty()) return "";
  std::string text = has + " has ";
  for (size_t i = 0; i < names.size() && i < 5; ++i) text += (i ? ", " : "") + printable(names[i]);
  if (names.size() > 5) text += " and " + std::to_string(names.size() - 5) + " more";
  return text + " that " + lacks + " lacks";
}

}  // namespace

std::string class_difference(const std::string& a_name, const std::vector<std::string>& a,
                             const std::string& b_name, const std::vector<std::string>& b) {
  std::vector<std::string> only_a, only_b;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only_a));
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(only_b));
  const std::string first = only_in(a_name, only_a, b_name);
  const std::string second = only_in(b_name, only_b, a_name);
  return first + (first.empty() || second.empty() ? "" : "; ") + second;
}

}  // namespace rddp::data

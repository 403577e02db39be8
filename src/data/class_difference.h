#pragma once
// Which classes one list has that another lacks, for messages about two splits (or a class
// list and a folder) that must name the same classes.
#include <string>
#include <vector>

namespace rddp::data {

// "train/ has b, d that val/ lacks; val/ has x that train/ lacks" (up to five names each,
// printable); "" when both hold the same names. `a` and `b` are sorted.
std::string class_difference(const std::string& a_name, const std::vector<std::string>& a,
                             const std::string& b_name, const std::vector<std::string>& b);

}  // namespace rddp::data

#pragma once
// Kernel durations summed by name, and written as Nsight Systems' kernel summary is (`nsys stats
// --report cuda_gpu_kern_sum --format csv`): what bench/profile_breakdown.py reads. Filled by
// bench/kernel_times.h from CUPTI's records; no CUDA here, so that the unit tests check it.
#include <cxxabi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace rddp::bench {

// One kernel name's launches.
struct KernelTotal {
  std::string name;
  double total_ns = 0, min_ns = 0, max_ns = 0;
  int64_t launches = 0;
};

// Launches summed by name, kept in the order nsys prints: longest total first.
class KernelTotals {
 public:
  void add(const std::string& name, double ns) {
    KernelTotal& k = by_name_[name];
    if (k.launches == 0) {
      k.name = name;
      k.min_ns = k.max_ns = ns;
    }
    k.total_ns += ns;
    k.min_ns = std::min(k.min_ns, ns);
    k.max_ns = std::max(k.max_ns, ns);
    ++k.launches;
  }
  std::vector<KernelTotal> sorted() const {
    std::vector<KernelTotal> kernels;
    for (const auto& [name, kernel] : by_name_) kernels.push_back(kernel);
    std::stable_sort(kernels.begin(), kernels.end(),
                     [](const KernelTotal& a, const KernelTotal& b) {
                       return a.total_ns > b.total_ns;
                     });
    return kernels;
  }
  size_t distinct() const { return by_name_.size(); }
  int64_t launches() const {
    int64_t n = 0;
    for (const auto& entry : by_name_) n += entry.second.launches;
    return n;
  }
  double total_ns() const {
    double ns = 0;
    for (const auto& entry : by_name_) ns += entry.second.total_ns;
    return ns;
  }

 private:
  std::map<std::string, KernelTotal> by_name_;
};

// A CSV field as nsys quotes it: always in quotes, a quote doubled.
inline std::string csv_field(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Nsight Systems' kernel summary in CSV: its header and one row a kernel name.
inline std::string kernel_summary_csv(const KernelTotals& totals) {
  const double all = totals.total_ns();
  std::string csv =
      "\"Time (%)\",\"Total Time (ns)\",\"Instances\",\"Avg (ns)\",\"Min (ns)\",\"Max (ns)\","
      "\"Name\"\n";
  char row[160];
  for (const KernelTotal& k : totals.sorted()) {
    std::snprintf(row, sizeof row, "%.1f,%.0f,%lld,%.1f,%.0f,%.0f,",
                  all > 0 ? 100.0 * k.total_ns / all : 0.0, k.total_ns,
                  static_cast<long long>(k.launches), k.total_ns / static_cast<double>(k.launches),
                  k.min_ns, k.max_ns);
    csv += row + csv_field(k.name) + "\n";
  }
  return csv;
}

// A kernel's name as Nsight Systems prints it: demangled where it is a C++ symbol.
inline std::string demangled(const char* name) {
  if (name == nullptr) return "(unnamed kernel)";
  int status = 0;
  char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || text == nullptr) return name;
  std::string out = text;
  std::free(text);
  return out;
}

}  // namespace rddp::bench

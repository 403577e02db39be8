// bench/kernel_summary.h: kernel durations summed by name and written as Nsight Systems' kernel
// summary, which bench/profile_breakdown.py reads (parity.test_kernel_summaries reads this
// test's expected text with it).
#include <doctest/doctest.h>

#include <string>

#include "kernel_summary.h"

using rddp::bench::KernelTotals;

TEST_CASE("kernel launches are summed by name, longest total first, with their extremes") {
  KernelTotals totals;
  totals.add("void fprop<int>(float)", 1000);
  totals.add("grad_sums_kernel", 250);
  totals.add("void fprop<int>(float)", 3000);
  CHECK(totals.launches() == 3);
  CHECK(totals.distinct() == 2);
  CHECK(totals.total_ns() == 4250);
  const auto kernels = totals.sorted();
  REQUIRE(kernels.size() == 2);
  CHECK(kernels[0].name == "void fprop<int>(float)");
  CHECK(kernels[0].launches == 2);
  CHECK(kernels[0].total_ns == 4000);
  CHECK(kernels[0].min_ns == 1000);
  CHECK(kernels[0].max_ns == 3000);
  CHECK(kernels[1].name == "grad_sums_kernel");
}

TEST_CASE("the summary is nsys's CSV: its header, a row a name, quotes doubled") {
  KernelTotals totals;
  totals.add("void fprop<int>(float)", 1000);
  totals.add("void fprop<int>(float)", 3000);
  totals.add("say \"hi\", twice", 500);
  CHECK(rddp::bench::kernel_summary_csv(totals) ==
        "\"Time (%)\",\"Total Time (ns)\",\"Instances\",\"Avg (ns)\",\"Min (ns)\",\"Max (ns)\","
        "\"Name\"\n"
        "88.9,4000,2,2000.0,1000,3000,\"void fprop<int>(float)\"\n"
        "11.1,500,1,500.0,500,500,\"say \"\"hi\"\", twice\"\n");
  CHECK(rddp::bench::kernel_summary_csv(KernelTotals()) ==
        "\"Time (%)\",\"Total Time (ns)\",\"Instances\",\"Avg (ns)\",\"Min (ns)\",\"Max (ns)\","
        "\"Name\"\n");
}

TEST_CASE("kernel names are demangled as Nsight Systems prints them; others pass as they are") {
  CHECK(rddp::bench::demangled("_Z6kernelPfi") == "kernel(float*, int)");
  CHECK(rddp::bench::demangled("triton_red_fused_native_batch_norm_0") ==
        "triton_red_fused_native_batch_norm_0");
  CHECK(rddp::bench::demangled(nullptr) == "(unnamed kernel)");
}

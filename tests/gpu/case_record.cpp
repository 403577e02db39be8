// A doctest listener for the GPU test program: after every case it checks that the CUDA context
// still works, and it writes each case's outcome to a record that scripts/run_gpu_tests.sh reads.
//
// Why: an illegal address, a device-side assert or a kernel that traps leaves the context
// unusable (a "sticky" error), and every later case in the same process then fails for that
// reason alone. On a GPU lent for minutes that would cost the whole run's findings. So once the
// context is lost the program stops at once with kContextLostStatus, naming the case it happened
// in, and the script starts the cases after it in a new process.
//
// RDDP_GPU_TEST_RECORD=FILE   append one line per case: "INDEX<TAB>OUTCOME<TAB>SECONDS<TAB>NAME",
//                             INDEX counting from 1 over the cases the filters pass (doctest's
//                             --first numbers them the same way), OUTCOME passed, failed, crashed
//                             (a signal) or context-lost.
// RDDP_GPU_TESTS_FAULT=KIND:N  case N fails as KIND says: lose-context (as if the context
//                             were lost after it), crash (SIGSEGV at its first assertion) or
//                             hang (it never ends): how the tests of scripts/run_gpu_tests.sh
//                             reach these paths without breaking a GPU.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

namespace {

// The exit status of a process whose context was lost (doctest's own are 0 and 1, and the GPU
// test program's 77 says no device answered); scripts/run_gpu_tests.sh knows it.
constexpr int kContextLostStatus = 3;

// The context is lost when an error survives being read: cudaGetLastError clears every error
// but the sticky ones, which each later call returns again.
std::string lost_context_reason() {
  try {
    const cudaError_t first = cudaDeviceSynchronize();
    if (first == cudaSuccess) return "";
    (void)cudaGetLastError();
    const cudaError_t again = cudaDeviceSynchronize();
    if (again == cudaSuccess) return "";
    return std::string(cudaGetErrorName(again)) + ": " + cudaGetErrorString(again);
  } catch (const std::exception& error) {
    // The emulator reports a kernel's fault by throwing from the wait that runs it.
    return std::string("the wait for the device threw: ") + error.what();
  }
}

// RDDP_GPU_TESTS_FAULT, parsed: the kind and the case (0: none).
struct PlantedFault {
  std::string kind;
  long index = 0;
};

PlantedFault planted_fault() {
  PlantedFault fault;
  const char* text = std::getenv("RDDP_GPU_TESTS_FAULT");
  if (text == nullptr) return fault;
  const std::string spec = text;
  const size_t colon = spec.find(':');
  fault.kind = spec.substr(0, colon);
  if (colon != std::string::npos) fault.index = std::strtol(spec.c_str() + colon + 1, nullptr, 10);
  if ((fault.kind != "lose-context" && fault.kind != "crash" && fault.kind != "hang") ||
      fault.index < 1) {
    std::fprintf(stderr, "RDDP_GPU_TESTS_FAULT='%s': expected lose-context:N, crash:N or hang:N "
                 "with N >= 1\n", text);
    std::exit(2);
  }
  return fault;
}

class CaseRecord : public doctest::IReporter {
 public:
  explicit CaseRecord(const doctest::ContextOptions& options)
      : next_index_(options.first > 1 ? static_cast<long>(options.first) : 1),
        fault_(planted_fault()) {}

  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {
    if (const char* path = std::getenv("RDDP_GPU_TEST_RECORD"))
      record_ = std::fopen(path, "a");
  }
  void test_run_end(const doctest::TestRunStats&) override {
    if (record_ != nullptr) std::fclose(record_);
    record_ = nullptr;
  }
  void test_case_start(const doctest::TestCaseData& data) override {
    current_ = &data;
    index_ = next_index_++;
    if (fault_.kind == "hang" && fault_.index == index_)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}

  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    if (current_ == nullptr) return;
    // Within doctest's signal handler: write the line and nothing else, the process ends next.
    if ((stats.failure_flags & doctest::TestCaseFailureReason::Crash) != 0) {
      write("crashed", stats.seconds);
      return;
    }
    std::string lost = lost_context_reason();
    if (lost.empty() && fault_.kind == "lose-context" && fault_.index == index_)
      lost = "planted by RDDP_GPU_TESTS_FAULT";
    if (lost.empty()) {
      write(stats.testCaseSuccess ? "passed" : "failed", stats.seconds);
      return;
    }
    write("context-lost", stats.seconds);
    std::cout.flush();
    std::printf(
        "\ngpu tests: the CUDA context was lost in case %ld \"%s\" (%s): every later case in "
        "this process would fail for it, so the process stops here (exit status %d); "
        "scripts/run_gpu_tests.sh goes on from case %ld in a new one\n",
        index_, current_->m_name, lost.c_str(), kContextLostStatus, index_ + 1);
    std::fflush(stdout);
    if (record_ != nullptr) std::fclose(record_);
    // No destructors: they would free CUDA resources through the broken context.
    std::_Exit(kContextLostStatus);
  }

  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  // Inside the case's body, where doctest's signal handler reports a crash as a real one would.
  void log_assert(const doctest::AssertData&) override {
    if (fault_.kind == "crash" && fault_.index == index_) std::raise(SIGSEGV);
  }
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}

 private:
  void write(const char* outcome, double seconds) {
    if (record_ == nullptr) return;
    std::fprintf(record_, "%ld\t%s\t%.3f\t%s\n", index_, outcome, seconds, current_->m_name);
    std::fflush(record_);
  }

  long next_index_;
  long index_ = 0;
  PlantedFault fault_;
  const doctest::TestCaseData* current_ = nullptr;
  std::FILE* record_ = nullptr;
};

DOCTEST_REGISTER_LISTENER("case_record", 1, CaseRecord);

}  // namespace

// An NVTX tool for the tests: loaded by a program's NVTX calls when NVTX_INJECTION64_PATH names
// this library, as Nsight Systems loads its own. It writes every domain range the program opens
// and closes to the file RDDP_NVTX_LOG names ("{pid}" replaced by the process id, for MPI
// ranks), one line each:
//   push <thread> <domain> <name>     pop <thread> <domain>
//   start <id> <domain> <name>        end <id>
// so that a test can check which ranges a run produced, and how they nest, without a profiler.
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace {

std::mutex log_mutex;
FILE* log_file = nullptr;

FILE* open_log() {
  const char* pattern = std::getenv("RDDP_NVTX_LOG");
  if (pattern == nullptr) return nullptr;
  std::string path = pattern;
  const size_t at = path.find("{pid}");
  if (at != std::string::npos) path.replace(at, 5, std::to_string(getpid()));
  return std::fopen(path.c_str(), "w");
}

void write_line(const std::string& line) {
  const std::lock_guard<std::mutex> lock(log_mutex);
  if (log_file == nullptr) return;
  std::fprintf(log_file, "%s\n", line.c_str());
  std::fflush(log_file);
}

// A domain handle is the address of the domain's name, which is never freed.
std::string domain_name(nvtxDomainHandle_t domain) {
  return domain == nullptr ? "(default)" : *reinterpret_cast<const std::string*>(domain);
}

std::string message(const nvtxEventAttributes_t* attributes) {
  if (attributes == nullptr || attributes->messageType != NVTX_MESSAGE_TYPE_ASCII) return "(unnamed)";
  return attributes->message.ascii;
}

std::string thread() { return std::to_string(static_cast<long>(syscall(SYS_gettid))); }

nvtxDomainHandle_t create_domain(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(new std::string(name));
}

int push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  write_line("push " + thread() + " " + domain_name(domain) + " " + message(attributes));
  return 0;
}

int pop(nvtxDomainHandle_t domain) {
  write_line("pop " + thread() + " " + domain_name(domain));
  return 0;
}

nvtxRangeId_t start(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  static nvtxRangeId_t next_id = 0;
  nvtxRangeId_t id;
  {
    const std::lock_guard<std::mutex> lock(log_mutex);
    id = ++next_id;
  }
  write_line("start " + std::to_string(id) + " " + domain_name(domain) + " " + message(attributes));
  return id;
}

void end(nvtxDomainHandle_t, nvtxRangeId_t id) { write_line("end " + std::to_string(id)); }

template <typename Function>
void install(NvtxFunctionTable table, unsigned int size, unsigned int slot, Function function) {
  if (slot <= size && table[slot] != nullptr) *table[slot] = reinterpret_cast<NvtxFunctionPointer>(function);
}

}  // namespace

// Each copy of NVTX in the process (ours, and any library's own) calls this once.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  {
    const std::lock_guard<std::mutex> lock(log_mutex);
    if (log_file == nullptr) log_file = open_log();
  }
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->GetModuleFunctionTable == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || table == nullptr) return 0;
  install(table, size, NVTX_CBID_CORE2_DomainCreateA, &create_domain);
  install(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &push);
  install(table, size, NVTX_CBID_CORE2_DomainRangePop, &pop);
  install(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, &start);
  install(table, size, NVTX_CBID_CORE2_DomainRangeEnd, &end);
  return 1;
}

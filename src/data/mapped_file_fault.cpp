#include "resnet_ddp/data/mapped_file_fault.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace rddp::data {

namespace {

// The message is composed when a file is registered, never in the handler, which may only make
// async-signal-safe calls (write).
constexpr size_t kMessageBytes = 8192;
constexpr size_t kNamedFiles = 4;
char g_message[kMessageBytes];
size_t g_message_length = 0;
std::mutex g_mutex;
std::vector<std::string> g_mapped;  // one entry per mapping, in mapping order

void on_bus_error(int) {
  ssize_t ignored = ::write(STDERR_FILENO, g_message, g_message_length);
  (void)ignored;
  // SA_RESETHAND restored the default action: returning re-runs the faulting read, whose SIGBUS
  // now ends the process as it would have without this handler (the launcher sees the signal).
}

void compose_message() {
  std::string files;
  std::vector<std::string> named;
  for (const std::string& path : g_mapped) {
    if (std::find(named.begin(), named.end(), path) != named.end()) continue;
    if (named.size() == kNamedFiles) {
      files += ", ...";
      break;
    }
    files += (named.empty() ? "" : ", ") + path;
    named.push_back(path);
  }
  const int written = std::snprintf(
      g_message, kMessageBytes,
      "resnet_ddp: bus error (SIGBUS) reading a memory-mapped pack: a pack file was truncated or "
      "rewritten in place while this run read it (mapped: %s). Make the pack again with "
      "resnet_ddp_pack, which replaces files by renaming, and do not modify pack files while a "
      "job reads them.\n",
      files.c_str());
  g_message_length = written < 0 ? 0 : std::min(size_t(written), kMessageBytes - 1);
}

}  // namespace

void report_bus_errors_for(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_mapped.push_back(path);
  compose_message();
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action {};
    action.sa_handler = on_bus_error;
    action.sa_flags = SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, nullptr);
  });
}

void stop_reporting_bus_errors_for(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto found = std::find(g_mapped.begin(), g_mapped.end(), path);
  if (found != g_mapped.end()) g_mapped.erase(found);
  compose_message();
}

}  // namespace rddp::data

#pragma once
// A memory-mapped file that shrinks under a running job (someone truncates or rewrites it in
// place) makes the next read of a vanished page raise SIGBUS. Unhandled, the process dies with
// "Bus error" and nothing says which file or what to do; this names the mapped files and the fix
// before the process dies, so that the launcher ends the job with a reason.
#include <string>

namespace rddp::data {

// While a file is mapped: `path` joins the files the SIGBUS message names (the first few of
// those mapped) and the handler is installed, once. The handler writes the message and lets the
// signal end the process as before. Each call is undone by one stop_... call at unmapping.
void report_bus_errors_for(const std::string& path);
void stop_reporting_bus_errors_for(const std::string& path);

}  // namespace rddp::data

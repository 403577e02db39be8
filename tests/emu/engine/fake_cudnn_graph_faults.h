#pragma once
// Faults the graph API's stand-in (fake_cudnn_graph.cpp) shows on request, for tests of what the
// engine does where a GPU's cuDNN refuses what the stand-in otherwise accepts. A fault holds until
// the next call; FakeGraphFault::none clears it.
#include <cstdint>

enum class FakeGraphFault : int {
  none = 0,
  graph_refused = 1,     // every operation graph's finalize: CUDNN_STATUS_NOT_SUPPORTED
  notes_unreadable = 2,  // reading the engine's numerical notes: CUDNN_STATUS_NOT_SUPPORTED
  execution_fails = 3,   // executing a plan of the engine: CUDNN_STATUS_EXECUTION_FAILED
};

// `engine` is the global index the fault applies to (ignored by graph_refused).
extern "C" void fake_cudnn_graph_inject_fault(int fault, int64_t engine);

// Injects a fault for one scope.
class InjectedGraphFault {
 public:
  InjectedGraphFault(FakeGraphFault fault, int64_t engine = -1) {
    fake_cudnn_graph_inject_fault(static_cast<int>(fault), engine);
  }
  ~InjectedGraphFault() {
    fake_cudnn_graph_inject_fault(static_cast<int>(FakeGraphFault::none), -1);
  }
  InjectedGraphFault(const InjectedGraphFault&) = delete;
  InjectedGraphFault& operator=(const InjectedGraphFault&) = delete;
};

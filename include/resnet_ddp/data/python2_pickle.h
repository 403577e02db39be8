#pragma once
// Python 2 pickles of protocol 2 holding what CIFAR's Python version holds: dicts of str keys,
// lists of ints and of str, and numpy uint8 arrays, as Python 2's cPickle wrote them. Only
// the opcodes cPickle emits for those objects are read, and only the globals a numpy array's
// pickle names (numpy.core.multiarray._reconstruct, numpy.ndarray, numpy.dtype), checked as
// numpy's __reduce__ writes them: nothing is looked up or called, so no pickle can run code.
// Anything else is refused, a pickle written by Python 3 by name.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rddp::data::py2pickle {

enum class Type { none, boolean, integer, string, list, tuple, dict, global, array, dtype };

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  Type type = Type::none;
  int64_t integer = 0;          // integer; boolean as 0 or 1
  std::string_view bytes;       // string (into the pickle's bytes); global: "module.name"
  std::vector<ValuePtr> items;  // list and tuple items; dict: key, value, key, value...
  // A numpy array (type array) once BUILD gave it its state; `bytes` is its raw data.
  std::vector<int64_t> shape;
  std::string dtype;           // dtype: its descriptor ("u1"); array: its dtype's
  bool fortran_order = false;
  bool built = false;          // array and dtype: BUILD gave the state numpy's __reduce__ writes
  // Put in a container (or an array's state): no longer changed, so no cycle can form.
  bool sealed = false;
  int depth = 0;  // containers below this one, at most kMaxDepth
};

// The value of `key` in a dict (the last, where the pickle set the key twice), or null.
const Value* dict_get(const Value& dict, std::string_view key);

// Reads the pickle in bytes[0, size), which must outlive the result (strings point into it).
// Throws Error starting with `where` and naming the byte and what is wrong; for a pickle that
// Python 3 wrote (another protocol, or opcodes Python 2 never wrote) it says so.
ValuePtr read_python2_pickle(const uint8_t* bytes, size_t size, const std::string& where);

}  // namespace rddp::data::py2pickle

#include "resnet_ddp/data/python2_pickle.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "resnet_ddp/error.h"

namespace rddp::data::py2pickle {

namespace {

// CIFAR's pickles nest three deep (dict, array, dtype).
constexpr int kMaxDepth = 16;
// Values made, stack pushes, marks and memo entries, all counted together: CIFAR-100's
// training file, the largest, takes some 200,000. Bounds what any input makes the reader hold.
constexpr size_t kMaxSteps = size_t(1) << 21;
constexpr size_t kMaxGlobalPart = 64;
constexpr size_t kMaxDimensions = 8;

constexpr std::string_view kReconstruct = "numpy.core.multiarray._reconstruct";
constexpr std::string_view kNdarray = "numpy.ndarray";
constexpr std::string_view kDtype = "numpy.dtype";

// The opcodes of protocols 3 to 5 and those Python 3 writes for str and bytes at protocol 2.
const char* python3_opcode(uint8_t op) {
  switch (op) {
    case 'X': return "BINUNICODE";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

bool is_integer(const ValuePtr& value, int64_t expected) {
  return value->type == Type::integer && value->integer == expected;
}

bool is_string(const ValuePtr& value, std::string_view expected) {
  return value->type == Type::string && value->bytes == expected;
}

bool is_none(const ValuePtr& value) { return value->type == Type::none; }

class Reader {
 public:
  Reader(const uint8_t* bytes, size_t size, const std::string& where)
      : bytes_(bytes), size_(size), where_(where) {}

  ValuePtr run() {
    if (size_ == 0) fail(where_, ": the file is empty");
    if (bytes_[0] != 0x80)
      fail(where_, ": byte 0 is ", hex(bytes_[0]), ", not the PROTO opcode that starts a pickle "
           "of protocol 2 (0x80 0x02)");
    for (;;) {
      op_at_ = at_;
      if (at_ >= size_) refuse("the pickle ends before its STOP opcode: the file is truncated");
      const uint8_t op = bytes_[at_++];
      if (const char* name = python3_opcode(op)) python3(name);
      switch (op) {
        case 0x80: proto(); break;
        case '.':
          if (!marks_.empty() || stack_.size() != 1)
            refuse("STOP leaves " + std::to_string(stack_.size()) + " values and " +
                   std::to_string(marks_.size()) + " marks, not one value");
          if (at_ != size_)
            refuse("STOP is followed by " + std::to_string(size_ - at_) + " more bytes");
          return stack_.front();
        case '(':
          step();
          marks_.push_back(stack_.size());
          break;
        case '}': push(make(Type::dict)); break;
        case ']': push(make(Type::list)); break;
        case ')': push(make(Type::tuple)); break;
        case 'N': push(make(Type::none)); break;
        case 0x88: push(make_integer(Type::boolean, 1)); break;
        case 0x89: push(make_integer(Type::boolean, 0)); break;
        case 'K': push(make_integer(Type::integer, byte())); break;
        case 'M': push(make_integer(Type::integer, int64_t(little_endian(2)))); break;
        case 'J': push(make_integer(Type::integer, int32_t(little_endian(4)))); break;
        case 0x8a: long1(); break;
        case 'U': push(make_string(take(byte()))); break;
        case 'T': {
          const int32_t length = int32_t(little_endian(4));
          if (length < 0) refuse("a string of negative length " + std::to_string(length));
          push(make_string(take(size_t(length))));
          break;
        }
        case 't': push(make_tuple(pop_to_mark())); break;
        case 0x85: case 0x86: case 0x87: {
          std::vector<ValuePtr> items(size_t(op - 0x84));
          for (size_t i = items.size(); i-- > 0;) items[i] = pop();
          push(make_tuple(std::move(items)));
          break;
        }
        case 'a': {
          ValuePtr item = pop();
          append(target(Type::list, "APPEND"), {item});
          break;
        }
        case 'e': {
          std::vector<ValuePtr> items = pop_to_mark();
          append(target(Type::list, "APPENDS"), items);
          break;
        }
        case 's': {
          std::vector<ValuePtr> pair(2);
          pair[1] = pop();
          pair[0] = pop();
          set_items(target(Type::dict, "SETITEM"), pair);
          break;
        }
        case 'u': {
          std::vector<ValuePtr> pairs = pop_to_mark();
          set_items(target(Type::dict, "SETITEMS"), pairs);
          break;
        }
        case 'c': global(); break;
        case 'R': reduce(); break;
        case 'b': build(); break;
        case 'q': put(byte()); break;
        case 'r': put(little_endian(4)); break;
        case 'h': get(byte()); break;
        case 'j': get(little_endian(4)); break;
        default:
          refuse("opcode " + hex(op) + " is not one that Python 2's pickle of a CIFAR batch "
                 "holds");
      }
    }
  }

 private:
  static std::string hex(uint8_t byte) {
    char text[8];
    std::snprintf(text, sizeof text, "0x%02x", byte);
    return text;
  }

  [[noreturn]] void refuse(const std::string& what) const {
    fail(where_, ": byte ", op_at_, ": ", what);
  }

  [[noreturn]] void python3(const char* what) const {
    fail(where_, ": written by Python 3's pickle (", what, " at byte ", op_at_, "), not by "
         "Python 2's as the files of the download were");
  }

  void step() {
    if (++steps_ > kMaxSteps)
      refuse("more than " + std::to_string(kMaxSteps) + " values and memo entries, more than "
             "any CIFAR file holds");
  }

  std::string_view take(size_t count) {
    if (size_ - at_ < count)
      refuse("the pickle ends " + std::to_string(count - (size_ - at_)) + " bytes short of the " +
             std::to_string(count) + " its opcode needs: the file is truncated");
    const std::string_view bytes(reinterpret_cast<const char*>(bytes_ + at_), count);
    at_ += count;
    return bytes;
  }

  uint8_t byte() { return uint8_t(take(1)[0]); }

  uint32_t little_endian(size_t count) {
    const std::string_view bytes = take(count);
    uint32_t value = 0;
    for (size_t i = count; i-- > 0;) value = value << 8 | uint8_t(bytes[i]);
    return value;
  }

  ValuePtr make(Type type) {
    step();
    auto value = std::make_shared<Value>();
    value->type = type;
    return value;
  }

  ValuePtr make_integer(Type type, int64_t integer) {
    ValuePtr value = make(type);
    value->integer = integer;
    return value;
  }

  ValuePtr make_string(std::string_view bytes) {
    ValuePtr value = make(Type::string);
    value->bytes = bytes;
    return value;
  }

  ValuePtr make_tuple(std::vector<ValuePtr> items) {
    ValuePtr tuple = make(Type::tuple);
    for (const ValuePtr& item : items) adopt(*tuple, item);
    tuple->items = std::move(items);
    return tuple;
  }

  // `child` goes into `parent`: it is complete from now on, which keeps the values a tree
  // with shared branches, never a cycle, and the depth known.
  void adopt(Value& parent, const ValuePtr& child) {
    child->sealed = true;
    parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > kMaxDepth)
      refuse("values nested more than " + std::to_string(kMaxDepth) + " deep");
  }

  void push(ValuePtr value) {
    step();
    stack_.push_back(std::move(value));
  }

  // Values above the innermost mark, as Python's unpickler keeps a stack for each mark.
  size_t available() const { return stack_.size() - (marks_.empty() ? 0 : marks_.back()); }

  ValuePtr pop() {
    if (available() == 0) refuse("an opcode takes a value from an empty stack");
    ValuePtr value = std::move(stack_.back());
    stack_.pop_back();
    return value;
  }

  std::vector<ValuePtr> pop_to_mark() {
    if (marks_.empty()) refuse("an opcode needs a MARK, and there is none");
    std::vector<ValuePtr> items(std::make_move_iterator(stack_.begin() + marks_.back()),
                                std::make_move_iterator(stack_.end()));
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  // The value an opcode changes: the top of the stack, of `type`, not yet inside another.
  Value& target(Type type, const char* opcode) {
    if (available() == 0) refuse(std::string(opcode) + " with nothing on the stack to change");
    Value& value = *stack_.back();
    if (value.type != type)
      refuse(std::string(opcode) + " changes a value that is not a " +
             (type == Type::list ? "list" : "dict"));
    if (value.sealed) refuse(std::string(opcode) + " changes a value already inside another");
    return value;
  }

  void append(Value& list, const std::vector<ValuePtr>& items) {
    for (const ValuePtr& item : items) adopt(list, item);
    if (list.sealed) refuse("a list is appended to itself");
    list.items.insert(list.items.end(), items.begin(), items.end());
  }

  void set_items(Value& dict, const std::vector<ValuePtr>& pairs) {
    if (pairs.size() % 2 != 0) refuse("SETITEMS with a key and no value");
    for (size_t i = 0; i < pairs.size(); i += 2) {
      if (pairs[i]->type != Type::string) refuse("a dict key that is not a str");
      adopt(dict, pairs[i]);
      adopt(dict, pairs[i + 1]);
    }
    if (dict.sealed) refuse("a dict is put into itself");
    // A repeated key is kept; dict_get finds the last, whose value Python keeps.
    dict.items.insert(dict.items.end(), pairs.begin(), pairs.end());
  }

  void proto() {
    const uint8_t protocol = byte();
    if (op_at_ != 0) refuse("a second PROTO opcode");
    if (protocol > 2)
      python3(("PROTO " + std::to_string(protocol)).c_str());
    if (protocol != 2) refuse("protocol " + std::to_string(protocol) + ", not 2");
  }

  void long1() {
    const size_t count = byte();
    if (count > 8) refuse("an integer of " + std::to_string(count) + " bytes");
    const std::string_view bytes = take(count);
    uint64_t value = 0;
    for (size_t i = count; i-- > 0;) value = value << 8 | uint8_t(bytes[i]);
    if (count > 0 && count < 8 && (uint8_t(bytes[count - 1]) & 0x80))
      value |= ~uint64_t(0) << (8 * count);  // two's complement, sign-extended
    push(make_integer(Type::integer, int64_t(value)));
  }

  std::string_view line() {
    const size_t start = at_;
    while (at_ < size_ && at_ - start <= kMaxGlobalPart && bytes_[at_] != '\n') ++at_;
    if (at_ >= size_) refuse("the pickle ends inside a GLOBAL opcode: the file is truncated");
    if (bytes_[at_] != '\n') refuse("a GLOBAL name longer than any numpy uses");
    const std::string_view text(reinterpret_cast<const char*>(bytes_ + start), at_ - start);
    ++at_;
    return text;
  }

  void global() {
    const std::string module(line());
    const std::string name(line());
    const std::string full = module + "." + name;
    for (std::string_view known : {kReconstruct, kNdarray, kDtype})
      if (full == known) {
        ValuePtr value = make(Type::global);
        value->bytes = known;
        push(value);
        return;
      }
    if (module == "_codecs" || module == "builtins" || module == "copyreg" ||
        module == "numpy._core.multiarray")
      python3(("GLOBAL " + full).c_str());
    refuse("GLOBAL " + full + ": a CIFAR batch names no such object");
  }

  void reduce() {
    const ValuePtr arguments = pop();
    const ValuePtr callable = pop();
    if (callable->type != Type::global) refuse("REDUCE calls something that is not a GLOBAL");
    if (arguments->type != Type::tuple || arguments->items.size() != 3)
      refuse(std::string("REDUCE calls ") + std::string(callable->bytes) +
             " with other than the three arguments numpy's pickle gives it");
    const std::vector<ValuePtr>& args = arguments->items;
    ValuePtr result;
    if (callable->bytes == kReconstruct) {
      // numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), 'b'): an empty array.
      const bool as_numpy = args[0]->type == Type::global && args[0]->bytes == kNdarray &&
                            args[1]->type == Type::tuple && args[1]->items.size() == 1 &&
                            is_integer(args[1]->items[0], 0) && is_string(args[2], "b");
      if (!as_numpy)
        refuse("numpy's _reconstruct called with other arguments than (ndarray, (0,), 'b')");
      result = make(Type::array);
    } else if (callable->bytes == kDtype) {
      // numpy.dtype(descriptor, 0, 1)
      if (args[0]->type != Type::string || args[0]->bytes.empty() || args[0]->bytes.size() > 8 ||
          !is_integer(args[1], 0) || !is_integer(args[2], 1))
        refuse("numpy.dtype called with other arguments than (descriptor, 0, 1)");
      result = make(Type::dtype);
      result->dtype = std::string(args[0]->bytes);
    } else {
      refuse("REDUCE calls " + std::string(callable->bytes) + ", which numpy's pickle of an "
             "array does not");
    }
    push(result);
  }

  void build() {
    const ValuePtr state = pop();
    if (available() == 0) refuse("BUILD with nothing on the stack to build");
    Value& target = *stack_.back();
    if ((target.type != Type::array && target.type != Type::dtype) || target.built ||
        target.sealed)
      refuse("BUILD on a value that is not a numpy array or dtype being made");
    if (state->type != Type::tuple) refuse("BUILD with a state that is not a tuple");
    const std::vector<ValuePtr>& s = state->items;
    if (target.type == Type::dtype) {
      // numpy's dtype state, version 3: (3, byte order, None, None, None, -1, -1, flags 0)
      const bool as_numpy = s.size() == 8 && is_integer(s[0], 3) &&
                            s[1]->type == Type::string && s[1]->bytes.size() == 1 &&
                            std::string_view("|<>=").find(s[1]->bytes[0]) != std::string::npos &&
                            is_none(s[2]) && is_none(s[3]) && is_none(s[4]) &&
                            is_integer(s[5], -1) && is_integer(s[6], -1) && is_integer(s[7], 0);
      if (!as_numpy) refuse("a numpy dtype whose state is not that of a plain number type");
      target.built = true;
      return;
    }
    // numpy's array state, version 1: (1, shape, dtype, is_fortran, raw data)
    const bool as_numpy = s.size() == 5 && is_integer(s[0], 1) && s[1]->type == Type::tuple &&
                          s[2]->type == Type::dtype && s[2]->built &&
                          s[3]->type == Type::boolean && s[4]->type == Type::string;
    if (!as_numpy) refuse("a numpy array whose state is not (1, shape, dtype, is_fortran, data)");
    if (s[2]->dtype != "u1")
      refuse("a numpy array of dtype '" + s[2]->dtype + "': CIFAR's images are uint8 ('u1')");
    const std::vector<ValuePtr>& dimensions = s[1]->items;
    if (dimensions.size() > kMaxDimensions) refuse("a numpy array of more than 8 dimensions");
    const uint64_t data_size = s[4]->bytes.size();
    uint64_t product = 1;
    bool overflow = false, empty = false;
    for (const ValuePtr& dimension : dimensions) {
      if (dimension->type != Type::integer || dimension->integer < 0)
        refuse("a numpy array shape of other than non-negative integers");
      empty = empty || dimension->integer == 0;
      overflow = __builtin_mul_overflow(product, uint64_t(dimension->integer), &product) ||
                 overflow;
    }
    if (empty) product = 0, overflow = false;
    if (overflow || product != data_size)
      refuse("a numpy array whose shape needs " +
             (overflow ? std::string("more than 2^64") : std::to_string(product)) +
             " bytes holds " + std::to_string(data_size));
    for (const ValuePtr& item : s) adopt(target, item);
    target.shape.clear();
    for (const ValuePtr& dimension : dimensions) target.shape.push_back(dimension->integer);
    target.dtype = s[2]->dtype;
    target.fortran_order = s[3]->integer != 0;
    target.bytes = s[4]->bytes;
    target.built = true;
  }

  void put(uint32_t index) {
    if (available() == 0) refuse("a memo entry with nothing on the stack");
    step();
    memo_[index] = stack_.back();
  }

  void get(uint32_t index) {
    const auto found = memo_.find(index);
    if (found == memo_.end()) refuse("memo entry " + std::to_string(index) + " was never stored");
    push(found->second);
  }

  const uint8_t* bytes_;
  size_t size_;
  const std::string& where_;
  size_t at_ = 0;
  size_t op_at_ = 0;  // where the opcode being read starts, for messages
  size_t steps_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;  // stack sizes at each MARK
  std::unordered_map<uint32_t, ValuePtr> memo_;
};

}  // namespace

const Value* dict_get(const Value& dict, std::string_view key) {
  if (dict.type != Type::dict) return nullptr;
  for (size_t k = dict.items.size() / 2; k-- > 0;)
    if (dict.items[2 * k]->bytes == key) return dict.items[2 * k + 1].get();
  return nullptr;
}

ValuePtr read_python2_pickle(const uint8_t* bytes, size_t size, const std::string& where) {
  return Reader(bytes, size, where).run();
}

}  // namespace rddp::data::py2pickle

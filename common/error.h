#pragma once
// The one error hierarchy of the project. Libraries throw these and never exit or abort;
// only cli/ maps them to exit codes. Every error carries the file:line where it was thrown.
//   Error
//   ├── TimeoutError     a deadline passed; the message names the operation, what was missing
//   ├── NetworkError     a peer or connection was lost: the group/connection must be rebuilt
//   │   ├── MembershipChanged  the launcher announced a new round (ddp/elastic/elastic.h): re-form in place
//   │   └── Aborted            ProcessGroup::abort(reason) failed the op: the group must be rebuilt
//   ├── StoreError       the store refused or could not serve a request
//   ├── InvalidArgument  bad input from a caller, a flag, a file, a frame or a datagram
//   │   └── NotInitialized  a call that needs init_process_group came before it
//   ├── BackendError     a backend library (Gloo, MPI, NCCL, CUDA) reported a failure
//   └── SystemError      a system call failed (carries errno)
#include <sstream>
#include <stdexcept>
#include <string>

namespace ddp {

class Error : public std::runtime_error {
 public:
  Error(const std::string& what, const char* file, int line);
  const std::string& message() const { return message_; }  // without file:line
  const char* file() const { return file_; }
  int line() const { return line_; }

 private:
  std::string message_;
  const char* file_;
  int line_;
};

#define DDP_DECLARE_ERROR(Name)                                                            \
  class Name : public Error {                                                              \
   public:                                                                                 \
    Name(const std::string& what, const char* file, int line) : Error(what, file, line) {} \
  }

DDP_DECLARE_ERROR(TimeoutError);
DDP_DECLARE_ERROR(NetworkError);
DDP_DECLARE_ERROR(StoreError);
DDP_DECLARE_ERROR(InvalidArgument);
DDP_DECLARE_ERROR(BackendError);

// A NetworkError of its own type: the group's membership changes (a node was lost or is joining) and
// the launcher moves this worker to a new round in place (ddp/elastic/elastic.h).
class MembershipChanged : public NetworkError {
 public:
  MembershipChanged(const std::string& what, const char* file, int line) : NetworkError(what, file, line) {}
};

// A NetworkError of its own type: the op's group was aborted (comm::ProcessGroup::abort), e.g. by
// ddp::elastic::Session when the launcher announced a new round; the message names the op and the
// reason given. The group must be rebuilt, as after a lost peer.
class Aborted : public NetworkError {
 public:
  Aborted(const std::string& what, const char* file, int line) : NetworkError(what, file, line) {}
};

// An InvalidArgument of its own type, so that boundaries (the C ABI's status codes) tell it
// apart by type, never by message text.
class NotInitialized : public InvalidArgument {
 public:
  NotInitialized(const std::string& what, const char* file, int line) : InvalidArgument(what, file, line) {}
};

class SystemError : public Error {
 public:
  SystemError(const std::string& what, int err, const char* file, int line);
  int code() const { return errno_; }

 private:
  int errno_;
};

namespace detail {
// Concatenates any streamable arguments: str("rank ", 3, " of ", 4).
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace ddp

// DDP_THROW(TimeoutError, "get(", key, ") timed out after ", ms, " ms")
#define DDP_THROW(Type, ...) throw ::ddp::Type(::ddp::detail::str(__VA_ARGS__), __FILE__, __LINE__)

// A failed system call: the name of the call, what it was doing, and strerror(errno).
#define DDP_THROW_ERRNO(...) \
  throw ::ddp::SystemError(::ddp::detail::str(__VA_ARGS__), errno, __FILE__, __LINE__)

// Broken invariants and bad arguments: prints the condition and an optional message.
#define DDP_CHECK(cond, ...)                                                             \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      DDP_THROW(InvalidArgument, "check failed: " #cond " " __VA_OPT__(, ) __VA_ARGS__); \
    }                                                                                    \
  } while (0)

// Comparisons that print both values: DDP_CHECK_EQ(a, b, "while ...").
#define DDP_CHECK_OP(a, b, op, ...)                                                               \
  do {                                                                                            \
    const auto& ddp_a_ = (a);                                                                     \
    const auto& ddp_b_ = (b);                                                                     \
    if (!(ddp_a_ op ddp_b_)) {                                                                    \
      DDP_THROW(InvalidArgument, "check failed: " #a " " #op " " #b " (", ddp_a_, " vs ", ddp_b_, \
                ") " __VA_OPT__(, ) __VA_ARGS__);                                                 \
    }                                                                                             \
  } while (0)
#define DDP_CHECK_EQ(a, b, ...) DDP_CHECK_OP(a, b, ==, __VA_ARGS__)
#define DDP_CHECK_NE(a, b, ...) DDP_CHECK_OP(a, b, !=, __VA_ARGS__)
#define DDP_CHECK_LT(a, b, ...) DDP_CHECK_OP(a, b, <, __VA_ARGS__)
#define DDP_CHECK_LE(a, b, ...) DDP_CHECK_OP(a, b, <=, __VA_ARGS__)
#define DDP_CHECK_GE(a, b, ...) DDP_CHECK_OP(a, b, >=, __VA_ARGS__)

// lowbit's one error scheme: every fallible call returns a Status. A Status carries a code
// and a message that names the problem (argument, sizes, rank, step, file:line of the
// failing CUDA/NCCL call). Library code never exits or aborts on a user error.
#pragma once

#include <string>
#include <utility>

namespace lowbit {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // wrong sizes, unsupported combination, null pointer
  kMisaligned,       // a pointer or size violates an alignment requirement
  kNotSupported,     // valid request this build/device cannot serve
  kCudaError,        // a CUDA runtime/driver call failed
  kNcclError,        // an NCCL call failed
  kTimeout,          // a peer never arrived (message names rank and step)
  kCorruptData,      // a file or buffer failed validation
  kIoError,          // open/read/write failed
  kOutOfMemory,
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: encode: n=0 ..." — suitable for logs and exceptions.
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// printf-style helper: make_status(StatusCode::kInvalidArgument, "n=%zu not a multiple of %d", n, g)
Status make_status(StatusCode code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace lowbit

// Propagate a failing Status to the caller.
#define LOWBIT_RETURN_IF_ERROR(expr)              \
  do {                                            \
    ::lowbit::Status _lowbit_st = (expr);         \
    if (!_lowbit_st.ok()) return _lowbit_st;      \
  } while (0)

// Validate an argument: on failure return kInvalidArgument naming the check.
#define LOWBIT_CHECK_ARG(cond, ...)                                                  \
  do {                                                                               \
    if (!(cond)) return ::lowbit::make_status(::lowbit::StatusCode::kInvalidArgument, \
                                              __VA_ARGS__);                          \
  } while (0)

#include "lowbit/status.h"

#include <cstdarg>
#include <cstdio>
#include <vector>

namespace lowbit {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "Ok";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kMisaligned: return "Misaligned";
    case StatusCode::kNotSupported: return "NotSupported";
    case StatusCode::kCudaError: return "CudaError";
    case StatusCode::kNcclError: return "NcclError";
    case StatusCode::kTimeout: return "Timeout";
    case StatusCode::kCorruptData: return "CorruptData";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kOutOfMemory: return "OutOfMemory";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "Ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status make_status(StatusCode code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string msg(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(msg.data(), msg.size() + 1, fmt, ap2);
  va_end(ap2);
  return Status(code, std::move(msg));
}

}  // namespace lowbit

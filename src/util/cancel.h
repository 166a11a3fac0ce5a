// A request's cancel flag: shared by whoever may cancel it (an async handle, the compile
// worker's connection) and whoever runs it (NVRTC's progress callback), set once.
#pragma once

#include <atomic>
#include <memory>

namespace kjit {

using CancelFlag = std::shared_ptr<std::atomic<bool>>;

}  // namespace kjit

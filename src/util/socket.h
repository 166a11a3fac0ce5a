// Unix-socket and file-descriptor helpers shared by the compile worker's client and server
// (worker/client.cpp, worker/main.cpp).
#pragma once

#include <cstddef>
#include <string>

namespace kjit {

// Owns a file descriptor: closes it on scope exit. Movable, not copyable.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Gives the descriptor up without closing it.
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset();  // closes it now (no-op when none)

 private:
  int fd_;
};

// True when the peer of a connected Unix socket runs as `uid` (SO_PEERCRED); false, with
// the peer's uid in *peer_uid (-1 when it cannot be told), otherwise. peer_uid may be null.
bool peer_is_user(int fd, unsigned uid, long* peer_uid);

// Sets up a sockaddr_un for `directory`/`file` in *addr (using /proc/self/fd/<dir_fd>/file
// when the full path does not fit sun_path; dir_fd < 0: no such fallback). Returns the
// address length, 0 when the path cannot fit.
size_t socket_address(const std::string& directory, int dir_fd, const std::string& file,
                      void* addr /* sockaddr_un* */);

}  // namespace kjit

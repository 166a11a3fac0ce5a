#include "util/socket.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

namespace kjit {

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool peer_is_user(int fd, unsigned uid, long* peer_uid) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred) {
    if (peer_uid) *peer_uid = -1;
    return false;
  }
  if (peer_uid) *peer_uid = long(cred.uid);
  return cred.uid == uid;
}

size_t socket_address(const std::string& directory, int dir_fd, const std::string& file,
                      void* out) {
  auto* sa = static_cast<sockaddr_un*>(out);
  std::memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  std::string path = directory + "/" + file;
  if (path.size() >= sizeof sa->sun_path) {
    if (dir_fd < 0) return 0;
    path = "/proc/self/fd/" + std::to_string(dir_fd) + "/" + file;
    if (path.size() >= sizeof sa->sun_path) return 0;
  }
  std::memcpy(sa->sun_path, path.data(), path.size());
  return offsetof(sockaddr_un, sun_path) + path.size() + 1;
}

}  // namespace kjit

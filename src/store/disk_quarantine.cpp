// Moving a corrupt database file aside, and following a file that another process moved.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "store/disk_store.h"
#include "store/sqlite_conn.h"
#include "util/fs.h"
#include "util/log.h"

namespace kjit {

void DiskStore::switch_file(bool move_aside, const std::string& why, std::string* aside) {
  std::lock_guard<std::mutex> lock(switch_mu_);
  const std::string current = file_id(path_);
  std::string ours;
  {
    std::lock_guard<std::mutex> pool_lock(pool_mu_);
    ours = identity_;
  }
  if (move_aside && !current.empty() && current == ours) {
    std::string to = path_ + ".corrupt-" + std::to_string(unix_time());
    for (int i = 1; file_id(to) != ""; ++i) {
      to = path_ + ".corrupt-" + std::to_string(unix_time()) + "-" + std::to_string(i);
    }
    if (std::rename(path_.c_str(), to.c_str()) != 0) {
      fail(KJIT_ERROR_CACHE, "cache database " + path_ + " is corrupt (" + why +
                                 ") and could not be moved aside: " + std::strerror(errno));
    }
    std::rename((path_ + "-wal").c_str(), (to + "-wal").c_str());
    std::rename((path_ + "-shm").c_str(), (to + "-shm").c_str());
    log_warn("cache database " + path_ + " is corrupt (" + why + "); moved it aside to " + to +
             " and started a new one");
    if (aside) *aside = to;
  } else if (move_aside && current != ours) {
    log_info("cache database " + path_ + " was already replaced by another process");
  }
  std::vector<std::unique_ptr<Conn>> old;
  {
    std::lock_guard<std::mutex> pool_lock(pool_mu_);
    ++generation_;
    old.swap(pool_);
  }
  for (auto& c : old) Conn::close_quietly(std::move(c));
  auto fresh = open_connection(true);
  std::lock_guard<std::mutex> pool_lock(pool_mu_);
  fresh->generation = generation_;
  identity_ = file_id(path_);
  if (static_cast<long>(getpid()) == pid_) pool_.push_back(std::move(fresh));
}

std::string DiskStore::quarantine(const std::string& why) {
  if (read_only_) {
    fail(KJIT_ERROR_CACHE,
         "cache database " + path_ + " is corrupt (" + why + ") and read-only here");
  }
  std::string aside;
  switch_file(true, why, &aside);
  return aside;
}

bool DiskStore::replaced() {
  const std::string current = file_id(path_);
  std::lock_guard<std::mutex> lock(pool_mu_);
  return current != identity_;
}

void DiskStore::reopen() {
  switch_file(false, "", nullptr);
  try {
    adopt_if_orphaned();  // a deleted index: the new one takes in the payload files
  } catch (const std::exception& e) {
    log_warn(std::string("could not index the payload files of ") + path_ + ": " + e.what());
  }
}

std::string DiskStore::integrity_problems() {
  const std::string report = exec_for_text("PRAGMA integrity_check");
  return report == "ok\n" ? std::string() : report;
}

}  // namespace kjit

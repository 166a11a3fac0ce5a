#include "store/background_writer.h"

namespace kjit {

void BackgroundWriter::push(EntryPtr e) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(e));
  if (!thread_.joinable()) {
    stop_ = false;
    thread_ = std::thread([this] {
      for (;;) {
        EntryPtr next;
        {
          std::unique_lock<std::mutex> l(mu_);
          cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
          if (queue_.empty()) return;
          next = std::move(queue_.front());
          queue_.pop_front();
        }
        write_(*next);
      }
    });
  }
  cv_.notify_one();
}

void BackgroundWriter::finish() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    t = std::move(thread_);
  }
  cv_.notify_all();
  if (t.joinable()) t.join();  // the queue is empty when it returns
}

}  // namespace kjit

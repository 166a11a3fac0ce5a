#include "store/facts.h"

#include "store/disk_store.h"

namespace kjit {

std::optional<std::string> Facts::get(const std::string& name) {
  if (!disk_) return std::nullopt;
  try {
    return disk_->get_meta(name);
  } catch (const std::exception& e) {
    failed_(e, "reading cache metadata");
    return std::nullopt;
  }
}

void Facts::set(const std::string& name, const std::string& value) {
  if (!disk_) return;
  try {
    disk_->set_meta(name, value);
  } catch (const std::exception& e) {
    failed_(e, "writing cache metadata");
  }
}

std::optional<std::string> Facts::get_value(const std::string& ns, const std::string& key) {
  if (!disk_) return std::nullopt;
  try {
    return disk_->get_value(ns, key);
  } catch (const std::exception& e) {
    failed_(e, "reading a cached value");
    return std::nullopt;
  }
}

void Facts::put_value(const std::string& ns, const std::string& key, const std::string& value) {
  if (!disk_ || disk_->read_only()) return;
  try {
    disk_->put_value(ns, key, value);
  } catch (const std::exception& e) {
    failed_(e, "writing a cached value");
  }
}

}  // namespace kjit

#include "store/facts.h"

#include "store/fact_files.h"
#include "store/named_values.h"

namespace kjit {

std::optional<std::string> Facts::get(const std::string& name) {
  try {
    const FactFiles* files = files_();
    return files ? files->read(name) : std::nullopt;
  } catch (const std::exception& e) {
    failed_(e, "reading cache metadata");
    return std::nullopt;
  }
}

void Facts::set(const std::string& name, const std::string& value) {
  try {
    if (const FactFiles* files = files_()) files->write(name, value);
  } catch (const std::exception& e) {
    failed_(e, "writing cache metadata");
  }
}

std::optional<std::string> Facts::get_value(const std::string& ns, const std::string& key) {
  try {
    NamedValues* values = values_();
    return values ? values->get(ns, key) : std::nullopt;
  } catch (const std::exception& e) {
    failed_(e, "reading a cached value");
    return std::nullopt;
  }
}

void Facts::put_value(const std::string& ns, const std::string& key, const std::string& value) {
  try {
    NamedValues* values = values_();
    if (values && !values->read_only()) values->put(ns, key, value);
  } catch (const std::exception& e) {
    failed_(e, "writing a cached value");
  }
}

}  // namespace kjit

// The binary encodings of an entry's fields through util/wire, generated from their one list
// (store/entry_fields.h): the metadata of payload files (Entry::metadata_binary, after its
// format version) and the entry in the compile worker's reply (worker/protocol.h), each in
// its own order. docs/formats.md states both.
#pragma once

#include <cstdint>

#include "store/entry.h"
#include "util/wire.h"

namespace kjit {

// Metadata: the PCH outcome as a u64, each blob as its size (read back into
// Entry::recorded_sizes). Reply: the PCH outcome as a u32, each blob's bytes as a field.
enum class EntryWire { Metadata, Reply };

// Writes the fields of `form` in its order; `created`, when not 0, in place of e.created.
void put_entry_fields(WireWriter& w, const Entry& e, EntryWire form, int64_t created = 0);
// Reads them into *e. Throws WireError when the bytes end early, a count cannot fit, the
// PCH outcome is not one of the four, the compile time is not finite or the creation time
// is beyond int64_t; the caller checks that nothing follows (WireReader::finish).
void get_entry_fields(WireReader& r, Entry* e, EntryWire form);

}  // namespace kjit

// NVRTC's automatic precompiled headers (-pch), inside this process.
//
// A program whose includes reach the CUDA toolkit (CUB, cuda_fp16.h ...) is compiled with
// -pch: the first compile of a given leading block of #include directives (with the same
// options) creates a PCH in NVRTC's PCH heap, and later compiles that begin the same way
// reuse it (3-5x faster for CUB). NVRTC's PCH messages are removed from the log so the
// stored log is the same either way.
//
// NVRTC never checks a PCH's inputs: a header edited after the PCH was made is not read
// again, and the PCH's old code is compiled. So kjit owns that check. Each PCH lives in a
// directory of its own (a "slot"), named by what decides its contents: the program's
// directory, the options, the leading directives, every in-memory header and the working directory.
// NVRTC only uses PCHs of the directory it is given (tested). When the PCH is created,
// every file NVRTC read for it is recorded with the SHA-256 of its bytes and its stat()
// stamp, and every place it looked and found nothing is recorded as absent (PchInput);
// a PCH whose inputs cannot be vouched for (a file modified within the racy window of the
// compile, a directory read, an audit that is not whole) is never used. Before each use
// the inputs are checked, with the stamps the hit memo trusts and the bytes where a stamp
// moved; when any input changed or a file appeared where NVRTC found none, a new slot is
// made and a new PCH created. A compile that used a PCH reports the PCH's inputs as read
// (with their digests), so the fail-closed audit checks them against the cache key just as
// if NVRTC had opened them. The PCH NVRTC says it used must be the slot's own, by name.
//
// One compile creates the PCH of a slot; others that start the same way while it runs do
// not wait for it (for a heavy program that would serialise whole compiles) but compile
// without PCH (a half-made PCH is never used); later ones reuse it. When creation runs out of PCH
// heap, the heap is grown to the size NVRTC asks for (with no PCH compile running) and the next
// compile creates it again. PCH trouble never fails a compile. Memory: NVRTC keeps the
// PCHs in its heap (one allocation of a few hundred MB, grown on demand) and in files in
// the directory, which NVRTC and kjit remove when the process exits; the directories of
// processes that died are removed by the next process that makes one.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "key/file_audit.h"
#include "key/include_scan.h"
#include "key/inputs.h"
#include "util/pch_outcome.h"

namespace kjit {

// One file a PCH was made from, or one place NVRTC looked for a file and found none.
using PchInput = FileInput;

struct PchSlot;

// What NVRTC's log said about PCHs.
struct PchMessages {
  std::string used;     // the PCH file it used ("" = none)
  std::string created;  // the PCH file it created ("" = none)
};

class PchTicket {
 public:
  PchTicket() = default;
  ~PchTicket();
  PchTicket(PchTicket&& other) noexcept;
  PchTicket& operator=(PchTicket&&) = delete;
  PchTicket(const PchTicket&) = delete;

  // NVRTC options to add (empty when this compile runs without PCH).
  const std::vector<std::string>& options() const { return options_; }

  // Reports what NVRTC did, as soon as it returned: its PCH create status, the heap size it
  // asked for and its PCH messages. Grows the heap when NVRTC ran out of it.
  PchOutcome nvrtc_done(int create_status, size_t heap_required, const PchMessages& said);

  // Ends the ticket once the compile's audit is complete (after nvrtc_done). A creator
  // records the PCH's inputs from `audit` and makes the slot usable when they can be
  // vouched for. A compile that used the slot's PCH gets its inputs appended to
  // audit->opened (each marked from_pch, with its digest). Returns false when the compile
  // used a PCH whose inputs are not known: its result must not be stored.
  bool settle(AuditRecord* audit);

 private:
  friend PchTicket pch_begin(const std::string&, const std::vector<std::string>&,
                             const std::string&,
                             const std::vector<std::pair<std::string, std::string>>&);
  void abandon();

  std::shared_ptr<PchSlot> slot_;
  std::string program_;
  bool creator_ = false;
  bool done_ = false;     // nvrtc_done was called
  bool settled_ = false;  // settle was called
  int64_t started_ns_ = 0;
  int create_status_ = 0;
  PchMessages said_;
  std::vector<std::string> options_;
};

// Decides how to compile `source` (named `program`, with NVRTC options `nvrtc` and the
// in-memory `headers`) for PCH: finds the slot whose PCH this compile may use, checking its
// inputs, or makes a new one; may wait for another thread that is creating that PCH.
PchTicket pch_begin(const std::string& source, const std::vector<std::string>& nvrtc,
                    const std::string& program,
                    const std::vector<std::pair<std::string, std::string>>& headers);

// One of NVRTC's own files of this process (its PCHs and PCH heap file): not an input.
bool nvrtc_private(const std::string& path);

// This process's PCH directory ("" until one is made); slots are directories inside it.
std::string pch_directory();

// Removes NVRTC's PCH messages from a log; says which PCH files it used or created.
std::string strip_pch_messages(const std::string& log, PchMessages* said);

// Held shared while NVRTC compiles with PCH options, exclusively while the heap is resized.
void pch_heap_lock_shared();
void pch_heap_unlock_shared();

}  // namespace kjit

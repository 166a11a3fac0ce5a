// NVRTC's automatic precompiled headers (-pch), inside this process.
//
// A program whose includes reach the CUDA toolkit (CUB, cuda_fp16.h ...) is compiled with
// -pch into a PCH directory private to this process: the first compile of a given leading
// block of #include directives (with the same options) creates a PCH in NVRTC's PCH heap,
// and later compiles that begin the same way reuse it (3-5x faster for CUB). A PCH never
// changes what is produced (tested: byte-identical PTX and CUBIN) and the cache key does not
// depend on it; NVRTC's PCH messages are removed from the log so the stored log is the same
// either way.
//
// One thread creates the PCH of a given beginning; others starting the same way wait for it
// (a half-made PCH is never used), then reuse it. When creation runs out of PCH heap, the
// heap is grown to the size NVRTC asks for (with no PCH compile running) and the next
// compile creates it. PCH trouble never fails a compile. Memory: NVRTC keeps the PCHs in its
// heap (one allocation of a few hundred MB, grown on demand) and in files in the directory,
// which NVRTC and kjit remove when the process exits; the directories of processes that died
// are removed by the next process that makes one.
#pragma once

#include <string>
#include <vector>

namespace kjit {

enum class PchOutcome { None, Created, Used, Failed };

class PchTicket {
 public:
  PchTicket() = default;
  ~PchTicket();
  PchTicket(PchTicket&& other) noexcept;
  PchTicket& operator=(PchTicket&&) = delete;
  PchTicket(const PchTicket&) = delete;

  // NVRTC options to add ("" when this compile runs without PCH).
  const std::vector<std::string>& options() const { return options_; }

  // Reports what NVRTC did: its PCH create status, the heap size it asked for, and
  // whether the log said it used or created a PCH.
  PchOutcome finish(int create_status, size_t heap_required, bool used, bool created);

 private:
  friend PchTicket pch_begin(const std::string&, const std::vector<std::string>&,
                             const std::string&);
  std::string prefix_;
  bool creator_ = false;
  bool finished_ = false;
  std::vector<std::string> options_;
};

// Decides how to compile `source` (named `program`, with NVRTC options `nvrtc`) for PCH;
// may wait for another thread that is creating the PCH this compile would use.
PchTicket pch_begin(const std::string& source, const std::vector<std::string>& nvrtc,
                    const std::string& program);

// This process's PCH directory ("" until one is made).
std::string pch_directory();

// Removes NVRTC's PCH messages from a log; says which it held.
std::string strip_pch_messages(const std::string& log, bool* used, bool* created);

// Held shared while NVRTC compiles with PCH options, exclusively while the heap is resized.
void pch_heap_lock_shared();
void pch_heap_unlock_shared();

}  // namespace kjit

// Reliability of the shared cache: corruption injection, checked against compiles without a
// cache; the tally of what was injected and detected is printed when the program ends.
#include <gtest/gtest.h>

#include "support/reliability.h"

namespace {

using namespace kjit::test::reliability;

// ---- 6: corruption injection ---------------------------------------------------------------

// A populated cache, kept as bytes: two real kernels and synthetic entries of many sizes.
// The payload files of a cache directory (its path below it -> bytes).
std::map<std::string, std::string> payload_files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const std::string& f : kjit::test::entry_files(dir))
    out[f.substr(dir.size() + 1)] = file_bytes(f);
  return out;
}

struct Golden {
  std::string db;
  std::map<std::string, std::string> files;  // the entries' payload files
  std::vector<std::pair<std::string, size_t>> syn;
  std::vector<std::string> real = {"saxpy", "template"};
};

const Golden& golden() {
  static Golden g = [] {
    Golden out;
    TempDir dir;
    kjit_cache* c = open_cache(dir.path());
    for (const auto& kind : out.real) compile(c, program(kind));
    std::mt19937 rng(11);
    for (int i = 0; i < 30; ++i) {
      const size_t size = 200 + rng() % 24000;
      out.syn.emplace_back("gold" + std::to_string(i), size);
      internal(c).insert(synthetic(out.syn.back().first, size));
    }
    kjit_cache_close(c);
    // Everything into kjit.db: the compile worker keeps the database open while it lives,
    // so this close was not the last connection's and did not checkpoint.
    // Without free pages (the store's first transactions leave some), so that every page
    // cut or zeroed below held something.
    Db(dir.file("kjit.db")).query("VACUUM");
    const std::string ckpt = Db(dir.file("kjit.db")).query("PRAGMA wal_checkpoint(TRUNCATE)");
    EXPECT_EQ(ckpt.substr(0, 2), "0|") << ckpt;
    out.db = file_bytes(dir.file("kjit.db"));
    out.files = payload_files(dir.path());
    return out;
  }();
  return g;
}

// Totals over every injection, printed at the end of the run.
struct Tally {
  int injected = 0, detected = 0, moved_aside = 0, lost_only = 0, harmless = 0, wrong = 0;
};
Tally g_tally;

struct Outcome {
  int wrong = 0;    // wrong bytes or a failed compile: must never happen
  int missing = 0;  // entries gone (recompiled or a raw miss): allowed
  int errors = 0;   // unexpected statuses from the raw API
  bool detected = false;
  bool moved_aside = false;
  std::string notes;
};

// Uses every entry of the damaged cache in `dir` the way a program and the tools would,
// comparing with compiles made without a cache, then checks that the cache is sound again.
Outcome exercise(const std::string& dir, const std::vector<std::pair<std::string, size_t>>& syn) {
  Outcome r;
  start_capture();
  kjit_cache* c = open_cache(dir);
  if (!c) {
    r.wrong = 1;
    r.notes = "open failed";
    stop_capture();
    return r;
  }
  for (const auto& kind : golden().real) {
    const Out o = compile(c, program(kind));
    if (o.status != KJIT_OK || o.digest() != reference(kind).digest()) {
      ++r.wrong;
      r.notes += kind + ": status " + std::to_string(o.status) + " " + o.message + "; ";
    }
    if (o.tier == KJIT_TIER_COMPILED) ++r.missing;
  }
  int corrupt = 0;
  for (const auto& [tag, size] : syn) {
    switch (get_synthetic(c, tag, size)) {
      case Got::Right:
        break;
      case Got::Missing:
        ++r.missing;
        break;
      case Got::Corrupt:
        ++r.missing;
        ++corrupt;
        break;
      case Got::Wrong:
        ++r.wrong;
        r.notes += tag + " wrong bytes; ";
        break;
      case Got::Error:
        ++r.errors;
        r.notes += tag + ": " + kjit_last_error() + "; ";
        break;
    }
  }
  uint64_t checked = 0, bad = 0;
  if (kjit_cache_verify(c, &checked, &bad) != KJIT_OK) {
    ++r.errors;
    r.notes += std::string("verify: ") + kjit_last_error() + "; ";
  }
  if (kjit_cache_list(
          c, [](const kjit_cache_entry_info*, void*) { return 0; }, nullptr) != KJIT_OK) {
    ++r.errors;
    r.notes += std::string("list: ") + kjit_last_error() + "; ";
  }
  const kjit_cache_stats s = stats_of(c);
  kjit_cache_close(c);
  const std::vector<std::string> warnings = stop_capture();
  r.moved_aside = count_quarantined(dir) > 0;
  r.detected = s.corrupt_entries > 0 || bad > 0 || corrupt > 0 || r.moved_aside;
  if (r.detected && warnings.empty()) r.notes += "detected but nothing logged; ";
  // Afterwards: a sound database that keeps what is stored in it (damage found only by
  // the verification above may have cost what the first pass stored).
  const std::string check = integrity(dir + "/kjit.db");
  if (check != "ok\n") {
    ++r.errors;
    r.notes += "integrity after use: " + check;
  }
  for (int pass = 0; pass < 2; ++pass) {
    c = open_cache(dir);
    for (const auto& kind : golden().real) {
      const Out o = compile(c, program(kind));
      if (o.status != KJIT_OK || o.digest() != reference(kind).digest()) ++r.wrong;
      if (pass == 1 && o.tier != KJIT_TIER_DISK) {
        ++r.errors;
        r.notes +=
            kind + " not served from disk after recovery (tier " + std::to_string(o.tier) + "); ";
      }
    }
    if (stats_of(c).disk_state != KJIT_DISK_OK || stats_of(c).corrupt_entries != 0) {
      ++r.errors;
      r.notes += "still not sound after recovery: " + std::string(stats_of(c).message) + "; ";
    }
    kjit_cache_close(c);
  }
  return r;
}

// Installs `files` (name -> bytes) in a fresh directory and exercises it.
// A value of `files` that removes the file instead.
const std::string kDeleted = "<deleted>";

Outcome inject(const std::string& what, const std::map<std::string, std::string>& files,
               const std::vector<std::pair<std::string, size_t>>& syn, bool must_detect) {
  TempDir dir;
  // The golden entries' payload files, then `files` over them.
  for (const auto& [name, bytes] : golden().files) put_bytes(dir.file(name), bytes);
  for (const auto& [name, bytes] : files) {
    if (bytes == kDeleted) {
      ::unlink(dir.file(name).c_str());
    } else {
      put_bytes(dir.file(name), bytes);
    }
  }
  Outcome r = exercise(dir.path(), syn);
  g_tally.injected++;
  g_tally.wrong += r.wrong;
  if (r.detected) {
    g_tally.detected++;
    if (r.moved_aside) g_tally.moved_aside++;
  } else if (r.missing) {
    g_tally.lost_only++;
  } else {
    g_tally.harmless++;
  }
  EXPECT_EQ(r.wrong, 0) << what << ": " << r.notes;
  EXPECT_EQ(r.errors, 0) << what << ": " << r.notes;
  if (must_detect) {
    EXPECT_TRUE(r.detected) << what << ": not detected; " << r.notes;
  }
  return r;
}

TEST(Corruption, RandomByteFlipsInTheDatabase) {
  const Golden& g = golden();
  const unsigned seed = unsigned(std::time(nullptr));
  std::mt19937 rng(seed);
  std::printf("byte flips: seed %u, database %zu bytes\n", seed, g.db.size());
  int detected = 0;
  const int trials = 40;
  for (int t = 0; t < trials; ++t) {
    std::string db = g.db;
    const int flips = 1 + int(rng() % 8);
    std::string where;
    for (int i = 0; i < flips; ++i) {
      const size_t at = rng() % db.size();
      db[at] = char(db[at] ^ char(1 + rng() % 255));
      where += std::to_string(at) + " ";
    }
    const Outcome r = inject("flips at " + where + "(seed " + std::to_string(seed) + ")",
                             {{"kjit.db", db}}, g.syn, false);
    detected += r.detected;
  }
  std::printf("byte flips: %d trials, %d detected, the rest harmless or only lost entries\n",
              trials, detected);
}

TEST(Corruption, TruncatedGarbageAndZeroedPages) {
  const Golden& g = golden();
  const size_t n = g.db.size();
  for (size_t len : {size_t(0), size_t(17), size_t(100), size_t(4096), size_t(8192), n / 3, n / 2,
                     n - 4096, n - 1}) {
    // SQLite reads the missing end of a cut page as zeros: a cut that takes only zero bytes
    // (the last byte of the last page is sometimes 0, as the entries' values fall) leaves
    // the same database, with nothing to detect.
    const bool lost_data = g.db.find_first_not_of('\0', len) != std::string::npos;
    inject("truncated to " + std::to_string(len), {{"kjit.db", g.db.substr(0, len)}}, g.syn,
           len > 0 && lost_data);
  }
  std::mt19937 rng(5);
  std::string garbage(n, '\0');
  for (char& ch : garbage) ch = char(rng());
  inject("garbage", {{"kjit.db", garbage}}, g.syn, true);
  inject("header then garbage", {{"kjit.db", g.db.substr(0, 100) + garbage.substr(100)}}, g.syn,
         true);
  for (size_t page : {size_t(1), size_t(2), n / 4096 / 2, n / 4096 - 1}) {
    std::string db = g.db;
    std::fill(db.begin() + long(page * 4096), db.begin() + long(page * 4096 + 4096), '\0');
    inject("page " + std::to_string(page) + " zeroed", {{"kjit.db", db}}, g.syn, false);
  }
}

// Applies `sql` to a copy of the golden database with plain SQLite.
std::string edited(const std::string& sql) {
  TempDir dir;
  put_bytes(dir.file("kjit.db"), golden().db);
  {
    Db d(dir.file("kjit.db"));
    sqlite3_create_function(
        d.h, "sha256", 1, SQLITE_UTF8, nullptr,
        [](sqlite3_context* ctx, int, sqlite3_value** v) {
          const auto* p = static_cast<const char*>(sqlite3_value_blob(v[0]));
          const kjit::Digest dg = kjit::sha256(p ? p : "", size_t(sqlite3_value_bytes(v[0])));
          sqlite3_result_blob(ctx, dg.data(), int(dg.size()), SQLITE_TRANSIENT);
        },
        nullptr, nullptr);
    EXPECT_TRUE(d.exec(sql)) << sql << ": " << sqlite3_errmsg(d.h);
    EXPECT_GT(sqlite3_total_changes(d.h), 0) << sql;
  }
  return file_bytes(dir.file("kjit.db"));
}

using kjit::test::entry_file_relative;
using kjit::test::RawEntry;
using kjit::test::to_json_layout;

// The golden payload file of `key`, parsed.
RawEntry golden_raw(const std::string& key) {
  return kjit::test::parse_raw_entry(golden().files.at(entry_file_relative(key)));
}

// Overrides for inject(): `key`'s payload file replaced by `r`.
std::map<std::string, std::string> rewritten(const std::string& key, const RawEntry& r) {
  return {{entry_file_relative(key), kjit::test::raw_entry_bytes(r)}};
}

// Overrides for inject(): `key`'s payload file bytes changed by `edit`.
std::map<std::string, std::string> edited_file(const std::string& key,
                                               const std::function<void(std::string&)>& edit) {
  std::string bytes = golden().files.at(entry_file_relative(key));
  edit(bytes);
  return {{entry_file_relative(key), bytes}};
}

// Overrides for inject(): the payload files of `a` and `b` under each other's name.
std::map<std::string, std::string> swapped_files(const std::string& a, const std::string& b) {
  const auto& f = golden().files;
  return {{entry_file_relative(a), f.at(entry_file_relative(b))},
          {entry_file_relative(b), f.at(entry_file_relative(a))}};
}

TEST(Corruption, DamagedEntriesAreRemovedAndRecompiled) {
  const Golden& g = golden();
  const std::string saxpy = reference("saxpy").key, templ = reference("template").key;
  const std::string gold3 = synthetic_key("gold3"), elsewhere = synthetic_key("elsewhere");
  const size_t meta_end = 176 + golden_raw(saxpy).parts[0].size();
  auto raw = [](const std::string& key, const std::function<void(RawEntry&)>& edit) {
    RawEntry r = golden_raw(key);
    edit(r);
    return rewritten(key, r);
  };
  const std::vector<std::pair<std::string, std::map<std::string, std::string>>> cases = {
      {"cubin bytes zeroed",
       edited_file(saxpy,
                   [&](std::string& b) {
                     std::fill(b.end() - long(golden_raw(saxpy).parts[2].size()), b.end(), '\0');
                   })},
      {"ptx checksum zeroed",
       edited_file(templ,
                   [](std::string& b) { std::fill(b.begin() + 128, b.begin() + 144, '\0'); })},
      {"synthetic payload one byte changed",
       edited_file(gold3, [](std::string& b) { b[b.size() - 10] ^= 1; })},
      {"layout 1 (metadata as JSON, as development builds before 0.2.0 wrote it)",
       raw(saxpy, [](RawEntry& r) { to_json_layout(&r); })},
      {"binary metadata cut short (checksum matching)",
       raw(saxpy, [](RawEntry& r) { r.parts[0].resize(r.parts[0].size() - 3); })},
      {"binary metadata: a string longer than the rest (checksum matching)",
       raw(templ, [](RawEntry& r) { r.parts[0][8 + 5] = '\x01'; })},
      {"binary metadata with bytes after its last field (checksum matching)",
       raw(saxpy, [](RawEntry& r) { r.parts[0] += '\0'; })},
      {"metadata checksum mismatch", edited_file(saxpy,
                                                 [&](std::string& b) {
                                                   const size_t at = b.find("sm_90", 176);
                                                   ASSERT_LT(at, meta_end);
                                                   b[at + 4] = '8';
                                                 })},
      {"a part missing (checksums matching)", raw(templ, [](RawEntry& r) { r.parts[2].clear(); })},
      {"a part of another entry", raw(saxpy,
                                      [&](RawEntry& r) {
                                        r.parts[3] = golden_raw(gold3).parts[2];
                                        r.sum_as[3] = 2;
                                        r.sum_key = gold3;
                                      })},
      {"another layout version", edited_file(gold3, [](std::string& b) { b[8] = 3; })},
      {"layout 1 with binary metadata", edited_file(gold3, [](std::string& b) { b[8] = 1; })},
      {"not a payload file",
       edited_file(templ, [](std::string& b) { b.replace(0, 8, "SQLite f"); })},
      {"file truncated",
       edited_file(synthetic_key("gold5"), [](std::string& b) { b.resize(b.size() / 2); })},
      {"file cut inside its header",
       edited_file(synthetic_key("gold6"), [](std::string& b) { b.resize(100); })},
      {"file empty", edited_file(synthetic_key("gold8"), [](std::string& b) { b.clear(); })},
      {"file with bytes appended",
       edited_file(synthetic_key("gold9"), [](std::string& b) { b += "more"; })},
      // Files as written; only the name they are filed under changed.
      {"two kernels' files swapped", swapped_files(saxpy, templ)},
      {"two synthetic entries' files swapped", swapped_files(gold3, synthetic_key("gold4"))},
      {"a file moved to an unused key",
       {{entry_file_relative(gold3), kDeleted},
        {entry_file_relative(elsewhere), g.files.at(entry_file_relative(gold3))}}},
      // The index.
      {"index row moved to an unused key",
       {{"kjit.db",
         edited("UPDATE entries SET key = '" + elsewhere + "' WHERE key = '" + gold3 + "'")}}},
      {"schema: a column renamed",
       {{"kjit.db",
         edited(
             "PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql = replace(sql, 'compile_ms', "
             "'compile_mx') WHERE name = 'entries'")}}},
      {"schema: a trigger that still parses but counts wrong",
       {{"kjit.db", edited("PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql = replace(sql, "
                           "'bytes + new.bytes', "
                           "'bytes - new.bytes') WHERE name = 'entries_count_insert'")}}},
  };
  for (const auto& [what, files] : cases) inject(what, files, g.syn, true);
  // A file that is gone is a miss (a hit reads the file alone); the next store of the key
  // replaces its row, verify drops it. Never wrong, not necessarily seen as damage.
  inject("an entry without its file", {{entry_file_relative(synthetic_key("gold7")), kDeleted}},
         g.syn, false);
}

// Leaves `dir` holding a database whose newest transactions are only in its -wal, as after
// a crash: a child inserts entries and exits without closing the cache.
void leave_wal(const std::string& dir, const std::string& prefix, int n) {
  const pid_t pid = fork();
  if (pid == 0) {
    kjit_cache* c = open_cache(dir);
    for (int i = 0; i < n; ++i)
      internal(c).insert(synthetic(prefix + std::to_string(i), 3000 + 100 * size_t(i)));
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
}

TEST(Corruption, DeletedOrMismatchedWalAndShm) {
  const Golden& g = golden();
  std::map<std::string, std::string> ours, foreign;
  std::vector<std::pair<std::string, size_t>> syn = g.syn;
  {
    TempDir a, b;
    put_bytes(a.file("kjit.db"), g.db);
    leave_wal(a.path(), "wal", 12);
    leave_wal(b.path(), "foreign", 12);
    for (const char* f : {"kjit.db", "kjit.db-wal", "kjit.db-shm"}) {
      ours[f] = file_bytes(a.file(f));
      foreign[f] = file_bytes(b.file(f));
    }
    for (const auto& [f, bytes] : payload_files(a.path())) ours[f] = bytes;
    ASSERT_GT(ours["kjit.db-wal"].size(), 0u) << "no WAL was left behind";
  }
  for (int i = 0; i < 12; ++i) syn.emplace_back("wal" + std::to_string(i), 3000 + 100 * size_t(i));
  // The WAL as left behind is replayed: every entry is there.
  const Outcome base = exercise(
      [&] {
        static TempDir d;
        for (const auto& [f, bytes] : golden().files) put_bytes(d.file(f), bytes);
        for (const auto& [f, bytes] : ours) put_bytes(d.file(f), bytes);
        return d.path();
      }(),
      syn);
  EXPECT_EQ(base.wrong + base.missing + base.errors, 0) << base.notes;
  std::mt19937 rng(3);
  auto without = [&](std::initializer_list<const char*> names) {
    auto m = ours;
    for (const char* n : names) m.erase(n);
    return m;
  };
  inject("-wal deleted", without({"kjit.db-wal"}), syn, false);
  inject("-shm deleted", without({"kjit.db-shm"}), syn, false);
  inject("-wal and -shm deleted", without({"kjit.db-wal", "kjit.db-shm"}), syn, false);
  {
    auto m = ours;
    for (char& ch : m["kjit.db-shm"]) ch = char(rng());
    inject("-shm garbage", m, syn, false);
  }
  {
    auto m = ours;
    m["kjit.db-wal"].resize(m["kjit.db-wal"].size() / 2);
    inject("-wal truncated", m, syn, false);
  }
  {
    auto m = ours;
    std::string& w = m["kjit.db-wal"];
    for (int i = 0; i < 8; ++i) {
      const size_t at = rng() % w.size();
      w[at] = char(w[at] ^ 0x5a);
    }
    inject("-wal bytes flipped", m, syn, false);
  }
  {
    auto m = ours;
    m["kjit.db-wal"] = foreign["kjit.db-wal"];
    inject("-wal of another database", m, syn, false);
  }
  {
    auto m = ours;
    m["kjit.db-wal"] = foreign["kjit.db-wal"];
    m["kjit.db-shm"] = foreign["kjit.db-shm"];
    inject("-wal and -shm of another database", m, syn, false);
  }
}

// Printed when the program ends, for whichever corruption tests ran in it.
class TallyPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_tally.injected == 0) return;
    std::printf(
        "corruption: injected=%d detected=%d (database moved aside: %d) lost-only=%d "
        "harmless=%d wrong-bytes=%d\n",
        g_tally.injected, g_tally.detected, g_tally.moved_aside, g_tally.lost_only,
        g_tally.harmless, g_tally.wrong);
  }
};

const ::testing::Environment* const kTallyPrinter =
    ::testing::AddGlobalTestEnvironment(new TallyPrinter);

}  // namespace

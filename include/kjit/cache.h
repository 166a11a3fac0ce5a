/*
 * kjit — the persistent kernel cache: an in-process memory tier over one SQLite (WAL)
 * database shared by every thread and process of the machine.
 */
#ifndef KJIT_CACHE_H
#define KJIT_CACHE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Options for kjit_cache_open(). Initialise with KJIT_CACHE_OPTIONS_INIT or
 *  kjit_cache_options_init(); new fields are only ever appended (see "ABI and versioned
 *  structs" in docs/api.md). */
typedef struct kjit_cache_options {
  uint32_t struct_size;      /**< sizeof(kjit_cache_options) of the caller's header */
  const char* directory;     /**< NULL = default location (see kjit_cache_open) */
  uint64_t max_size_bytes;   /**< disk bound, 0 = default 1 GiB or $KJIT_CACHE_MAX_SIZE */
  uint64_t memory_max_bytes; /**< memory tier bound, 0 = default 64 MiB */
  int read_only;             /**< never write the disk tier */
  int memory_only;           /**< no disk tier at all */
  /** Fleet tier: "redis://host:port[/db]" or "unix:///path/redis.sock"; NULL = $KJIT_REMOTE
   *  (unset = none). Lookups go memory -> disk -> remote -> compile; a remote hit is
   *  verified and stored on disk; compiled entries are written to the remote in the
   *  background. The remote is never required: failures are counted, logged once, and a
   *  circuit breaker stops trying for a cooldown. Tuned by $KJIT_REMOTE_PREFIX,
   *  $KJIT_REMOTE_TTL (s), $KJIT_REMOTE_CONNECT_TIMEOUT_MS (100),
   *  $KJIT_REMOTE_TIMEOUT_MS (1000), $KJIT_REMOTE_COOLDOWN_MS (5000).
   *  Fleet-wide single flight: on a miss in every tier, a read-write node claims the key in
   *  the remote (a lease of $KJIT_REMOTE_CLAIM_LEASE_MS, default 15000, renewed every third
   *  of it while it compiles), compiles, writes the entry and releases the claim; other
   *  nodes (read-only ones too) wait for the entry instead of compiling, at most
   *  $KJIT_REMOTE_CLAIM_WAIT_MS (default 60000; 0 turns claims off). A node whose owner
   *  died takes over at most one lease (plus a 50 ms poll) after the claim's last renewal;
   *  a failing, slow or odd remote ends the wait at once (within one operation timeout),
   *  and the node compiles itself. A claim never makes a call fail. */
  const char* remote_url;
  int remote_read_only; /**< never write to the remote ($KJIT_REMOTE_MODE=ro) */
} kjit_cache_options;

#define KJIT_CACHE_OPTIONS_INIT {sizeof(kjit_cache_options), NULL, 0, 0, 0, 0, NULL, 0}

/**
 * Fill the first `size` bytes of `opts` with the defaults of KJIT_CACHE_OPTIONS_INIT and set
 * opts->struct_size = size. Nothing past `size` bytes is written; bytes past this library's
 * sizeof(kjit_cache_options) (a caller built against a newer kjit) are set to zero.
 * Normally called through the kjit_cache_options_init() macro, which passes the caller's
 * sizeof. Ownership: the caller's struct. Thread-safety: any thread.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT when `opts` is NULL or `size` is smaller
 * than the 0.1.0 struct or larger than 4096 (nothing is written).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_cache_options_init_sized(kjit_cache_options* opts, size_t size);

/** Fill `opts` with defaults (same as KJIT_CACHE_OPTIONS_INIT). The exported function of
 *  0.1.0 writes the 0.1.0 struct (binaries built against 0.1.0 call it); code compiled
 *  against this header calls kjit_cache_options_init_sized(opts, sizeof(*(opts))) through
 *  the macro below and gets its status. NULL is ignored by the function and refused by the
 *  macro's call (KJIT_ERROR_INVALID_ARGUMENT). Thread-safe. */
KJIT_EXPORT void kjit_cache_options_init(kjit_cache_options* opts);
#define kjit_cache_options_init(opts) kjit_cache_options_init_sized((opts), sizeof(*(opts)))

/**
 * Open a cache. `opts` may be NULL (defaults). Location: opts->directory, else
 * $KJIT_CACHE_DIR, else $XDG_CACHE_HOME/kjit, else $HOME/.cache/kjit, else
 * <tmpdir>/kjit-<uid>; created with mode 0700. KJIT_CACHE_DISABLE=1 turns the disk tier
 * off (as memory_only); KJIT_CACHE_READONLY=1 opens it read-only (as read_only). The
 * database is `kjit.db` in that directory.
 *
 * Every entry's metadata and blobs carry XXH3-128 checksums computed over the entry's key
 * as well as the bytes (keys themselves are SHA-256), so rows filed under another key fail
 * verification: such a lookup is a miss, never another kernel's code. A cache is rebuilt,
 * never migrated: a database of an older kjit's schema is rebuilt empty when first opened
 * read-write (logged once); read-only, it is not used. One of a newer kjit's schema is not
 * used and left as it is.
 *
 * Opening never fails because of the disk: if the directory or database cannot be used
 * (read-only, not owned by this user, group/world-writable, corrupt, full disk) the cache
 * runs with the memory tier only, logs the reason once, and kjit_cache_stats() reports it
 * in `disk_state`. A database SQLite reports as corrupt or not a database is renamed to
 * kjit.db.corrupt-<unix time> and a new one is created. On a network file system (NFS,
 * CIFS, SMB, FUSE, ...) WAL is not used: the database uses a rollback journal with
 * exclusive locking semantics of the file system (slower, safe on a single client).
 *
 * Ownership: the caller owns *out and closes it with kjit_cache_close(), after every
 * compiler bound to it is destroyed. Thread-safety: every kjit_cache_* function may be
 * called from any thread at once. After fork() the child reopens the database itself.
 * Returns KJIT_OK, KJIT_ERROR_INVALID_ARGUMENT (out NULL; opts->struct_size smaller than
 * the 0.1.0 struct or larger than 4096), KJIT_ERROR_UNSUPPORTED (opts from a newer kjit
 * that sets fields this library does not know), KJIT_ERROR_OUT_OF_MEMORY.
 */
KJIT_EXPORT kjit_status kjit_cache_open(const kjit_cache_options* opts, kjit_cache** out);

/** Close a cache: flushes pending last-use times. NULL is a no-op. */
KJIT_EXPORT void kjit_cache_close(kjit_cache* cache);

/** Directory of the cache ("" for a memory-only cache). Lives as long as the cache. */
KJIT_EXPORT const char* kjit_cache_directory(const kjit_cache* cache);

/** State of the disk tier. */
typedef enum kjit_disk_state {
  KJIT_DISK_OK = 0,          /**< read-write SQLite tier */
  KJIT_DISK_READ_ONLY = 1,   /**< opened read-only (by request or because not writable) */
  KJIT_DISK_DISABLED = 2,    /**< memory-only by request or KJIT_CACHE_DISABLE */
  KJIT_DISK_UNAVAILABLE = 3  /**< could not be used; see kjit_cache_stats().message */
} kjit_disk_state;

/** Counters and sizes. Initialise with KJIT_CACHE_STATS_INIT or kjit_cache_stats_init();
 *  kjit_cache_stats_get() writes only within the caller's struct_size. */
typedef struct kjit_cache_stats {
  uint32_t struct_size;
  int disk_state;                 /**< kjit_disk_state */
  uint64_t memory_hits;           /**< this handle, since open */
  uint64_t disk_hits;
  uint64_t remote_hits;
  uint64_t misses;                /**< lookups that found nothing in any tier */
  uint64_t compiles;              /**< NVRTC runs done through this handle */
  uint64_t stores;                /**< entries written to disk by this handle */
  uint64_t store_failures;        /**< disk writes that failed (compile still succeeded) */
  uint64_t corrupt_entries;       /**< entries that failed verification and were removed */
  uint64_t evictions;             /**< entries evicted to respect max_size_bytes */
  uint64_t waits;                 /**< times this handle waited for another compiler */
  double compile_ms_saved;        /**< sum of the stored compile times of all hits */
  uint64_t memory_entries;        /**< current memory tier entries and bytes */
  uint64_t memory_bytes;
  uint64_t disk_entries;          /**< current disk entries and bytes (whole database) */
  uint64_t disk_bytes;
  uint64_t max_size_bytes;        /**< effective disk bound */
  uint64_t remote_errors;         /**< remote tier failures, garbage values included (not misses) */
  uint64_t remote_timeouts;
  char message[256];              /**< why the disk tier is not OK, or "" */
  /* Totals over every process that has used this database, this one included (each handle
     adds its counts to the database when it stores an entry and when it closes). */
  uint64_t total_memory_hits;
  uint64_t total_disk_hits;
  uint64_t total_remote_hits;
  uint64_t total_misses;
  uint64_t total_compiles;
  uint64_t total_corrupt_entries;
  uint64_t total_evictions;
  uint64_t total_remote_errors;
  uint64_t total_remote_timeouts;
  double total_compile_ms_saved;
  int remote_state;               /**< kjit_remote_state of this handle */
  /* Since 0.2: */
  uint64_t not_stored;            /**< compiles whose result was not stored because NVRTC
                                       read a file the cache key does not cover (the log
                                       says which); the caller still got the result */
  uint64_t pch_created;           /**< compiles that created a precompiled header */
  uint64_t pch_used;              /**< compiles that used one (kjit_options_set_pch) */
  uint64_t pch_failed;            /**< compiles whose PCH could not be made (they still
                                       compiled, without it) */
  uint64_t total_not_stored;      /**< the same four, over every process of the database */
  uint64_t total_pch_created;
  uint64_t total_pch_used;
  uint64_t total_pch_failed;
  /* Since 0.2: fleet-wide single flight through the remote tier (see remote_url). */
  uint64_t remote_claims;              /**< keys this handle claimed in the remote tier and
                                            compiled for the fleet */
  uint64_t remote_claim_waits;         /**< misses that waited on another node's claim */
  uint64_t remote_claim_wait_hits;     /**< waits that ended with that node's entry */
  uint64_t remote_claim_wait_timeouts; /**< waits that reached the deadline (the handle
                                            then compiled itself) */
  uint64_t total_remote_claims;        /**< the same four, over every process of the database */
  uint64_t total_remote_claim_waits;
  uint64_t total_remote_claim_wait_hits;
  uint64_t total_remote_claim_wait_timeouts;
} kjit_cache_stats;

#define KJIT_CACHE_STATS_INIT                                                          \
  {sizeof(kjit_cache_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
   {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                     \
   0, 0, 0, 0, 0, 0, 0, 0}

/**
 * Zero the first `size` bytes of `stats` and set stats->struct_size = size, ready for
 * kjit_cache_stats_get(). Nothing past `size` bytes is written. Normally called through
 * the kjit_cache_stats_init() macro, which passes the caller's sizeof. Ownership: the
 * caller's struct. Thread-safety: any thread.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_ARGUMENT when `stats` is NULL or `size` is smaller
 * than the 0.1.0 struct or larger than 4096 (nothing is written).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_cache_stats_init_sized(kjit_cache_stats* stats, size_t size);
#define kjit_cache_stats_init(stats) kjit_cache_stats_init_sized((stats), sizeof(*(stats)))

/** State of the remote (fleet) tier of a cache handle. */
typedef enum kjit_remote_state {
  KJIT_REMOTE_NONE = 0,      /**< no remote configured */
  KJIT_REMOTE_OK = 1,        /**< configured; last attempt succeeded or none made yet */
  KJIT_REMOTE_BACKOFF = 2,   /**< circuit breaker open after failures; retried after a cooldown */
  KJIT_REMOTE_NOT_BUILT = 3  /**< configured, but this kjit was built without hiredis */
} kjit_remote_state;

/** Read the statistics. stats->struct_size must be set (KJIT_CACHE_STATS_INIT); only that
 *  many bytes are written, and struct_size keeps its value. Returns KJIT_OK,
 *  KJIT_ERROR_INVALID_HANDLE, KJIT_ERROR_INVALID_ARGUMENT (stats NULL, struct_size smaller
 *  than the 0.1.0 struct or larger than 4096; nothing is written). Thread-safe. */
KJIT_EXPORT kjit_status kjit_cache_stats_get(kjit_cache* cache, kjit_cache_stats* stats);

/**
 * Describe the remote (fleet) tier of `cache` as a JSON object, for tools and logs:
 * {"topology": "single" | "sentinel" | "cluster" | "none", "node": the host:port (or
 * socket) of the node that answered last ("" when none has), "nodes": the master in use
 * (1) or the cluster's masters, "redirections": cluster MOVED/ASK replies followed,
 * "failovers": master changes seen through the Sentinels, or slot owner changes seen in a
 * cluster's slot map, "oversize": entries kept local or values refused for being larger
 * than $KJIT_REMOTE_MAX_ENTRY_BYTES, "breaker_open": true/false, "max_entry_bytes"}.
 * With `probe` non-zero and no node asked yet, one PING is sent first (bounded by the
 * remote's operation timeout; a failure is counted as for lookups), so that "node" names
 * the node in use. Without a remote (or without hiredis) the object is
 * {"topology": "none"}. Ownership: *out belongs to kjit and stays valid until the next
 * call of this function on the same thread. Thread-safety: any thread.
 * Returns KJIT_OK; KJIT_ERROR_INVALID_HANDLE; KJIT_ERROR_INVALID_ARGUMENT (out NULL).
 * @since 0.2
 */
KJIT_EXPORT kjit_status kjit_cache_remote_info(kjit_cache* cache, int probe, const char** out);

/** Drop the in-process memory tier; the disk is untouched. Thread-safe. */
KJIT_EXPORT kjit_status kjit_cache_clear_memory(kjit_cache* cache);

/** Remove every entry from both tiers (other processes' memory tiers keep theirs).
 *  Returns KJIT_ERROR_READ_ONLY for a read-only cache. Thread-safe. */
KJIT_EXPORT kjit_status kjit_cache_clear(kjit_cache* cache);

/**
 * Raw lookup for tools: the entry stored under `key_hex` (64 hex digits), checksums
 * verified, as a binary (tier MEMORY or DISK). Returns KJIT_OK, KJIT_ERROR_NOT_FOUND,
 * KJIT_ERROR_CACHE_CORRUPT (the entry failed verification and was removed; on a read-only
 * cache it is left in place), KJIT_ERROR_INVALID_ARGUMENT, KJIT_ERROR_INVALID_HANDLE. The
 * caller destroys *out.
 */
KJIT_EXPORT kjit_status kjit_cache_get(kjit_cache* cache, const char* key_hex,
                                       kjit_binary** out);

/** Raw insert of a successful binary under its own key (e.g. one taken from another
 *  cache). Returns KJIT_OK, KJIT_ERROR_READ_ONLY, KJIT_ERROR_CACHE, argument errors. */
KJIT_EXPORT kjit_status kjit_cache_put(kjit_cache* cache, const kjit_binary* binary);

/** Remove one entry from both tiers. KJIT_ERROR_NOT_FOUND if it was not there. */
KJIT_EXPORT kjit_status kjit_cache_remove(kjit_cache* cache, const char* key_hex);

/** One row of kjit_cache_list(); strings valid during the callback only. Written by the
 *  library: struct_size is the library's sizeof, so a caller built against a newer kjit
 *  reads a field only when struct_size covers it. */
typedef struct kjit_cache_entry_info {
  uint32_t struct_size;
  const char* key;       /**< 64 hex digits */
  const char* target;    /**< e.g. "sm_90" */
  const char* kernels;   /**< comma-separated entry names */
  uint64_t bytes;        /**< total stored bytes of the entry */
  int64_t created;       /**< unix seconds */
  int64_t last_used;     /**< unix seconds (updated coarsely) */
  double compile_ms;
} kjit_cache_entry_info;

/** An empty kjit_cache_entry_info of this header's size (for code that builds rows itself,
 *  e.g. a test double of a kjit_cache_list_fn). @since 0.2 */
#define KJIT_CACHE_ENTRY_INFO_INIT {sizeof(kjit_cache_entry_info), NULL, NULL, NULL, 0, 0, 0, 0}

/** Callback for kjit_cache_list(); return non-zero to stop early. Must not call kjit. */
typedef int (*kjit_cache_list_fn)(const kjit_cache_entry_info* info, void* user);

/** Call `fn` for every disk entry, most recently used first. Thread-safe. */
KJIT_EXPORT kjit_status kjit_cache_list(kjit_cache* cache, kjit_cache_list_fn fn, void* user);

/** Check every disk entry's checksums (bound to its key), metadata and parts, and the
 *  database itself (PRAGMA integrity_check). Bad entries are removed; a database SQLite
 *  finds damaged is moved aside as kjit.db.corrupt-<time> and replaced by an empty one (its
 *  entries count as bad). On a read-only cache nothing is removed or moved: bad entries are
 *  counted and left in place, and a damaged database gives KJIT_ERROR_CACHE_CORRUPT.
 *  *checked and *bad (either may be NULL) receive the counts. Thread-safe. */
KJIT_EXPORT kjit_status kjit_cache_verify(kjit_cache* cache, uint64_t* checked, uint64_t* bad);

/** Evict least-recently-used entries until the disk tier holds at most `max_bytes`.
 *  *removed (may be NULL) receives the count. Thread-safe. */
KJIT_EXPORT kjit_status kjit_cache_prune(kjit_cache* cache, uint64_t max_bytes,
                                         uint64_t* removed);

/**
 * Write every disk entry to `path` in kjit's portable export format (a single file).
 * *count (may be NULL) receives the number written.
 *
 * Signing: when the environment variable KJIT_EXPORT_KEY is set (a secret shared by the
 * machines that exchange export files, at least 16 bytes), every record is signed with
 * HMAC-SHA256 keyed by it; otherwise the file is unsigned. A shorter key gives
 * KJIT_ERROR_INVALID_ARGUMENT and writes nothing.
 */
KJIT_EXPORT kjit_status kjit_cache_export(kjit_cache* cache, const char* path, uint64_t* count);

/**
 * Read an export file and store its entries. *imported and *rejected (either may be NULL)
 * receive counts. A malformed file gives KJIT_ERROR_CACHE_CORRUPT after importing the
 * valid entries before the damage; a file of another format version (an older kjit's) is
 * refused as a whole with KJIT_ERROR_CACHE_CORRUPT.
 *
 * An export file is trusted input: importing someone else's export is running their code.
 * Every entry is checked before it is stored: its key is 64 lowercase hex digits, its
 * checksums match its key and bytes, its metadata is of this format version and its sizes
 * agree with its blobs; entries that fail are rejected. These checks catch damage and
 * entries moved to another key, not a file written to deceive: anyone can write a
 * consistent entry that files one kernel's code under another kernel's key. To share
 * kernels between machines, use `kjit warm` with a manifest (each machine compiles its
 * own) or signed exports: with KJIT_EXPORT_KEY set (see kjit_cache_export), every entry
 * must also carry a signature that verifies with that key, and unsigned entries or entries
 * with a wrong signature are rejected. Without KJIT_EXPORT_KEY, consistent entries are
 * accepted, signed or not, and a warning is logged that the file was unsigned (or that its
 * signatures were not checked). A KJIT_EXPORT_KEY shorter than 16 bytes gives
 * KJIT_ERROR_INVALID_ARGUMENT before anything is read.
 */
KJIT_EXPORT kjit_status kjit_cache_import(kjit_cache* cache, const char* path,
                                          uint64_t* imported, uint64_t* rejected);

#ifdef __cplusplus
}
#endif

#endif /* KJIT_CACHE_H */

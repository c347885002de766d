/* src/trace/trace.c - the tracer of weft/trace.h, built only on the public event
 * callbacks (weft/hook.h), and the statistics dump.
 *
 * Recording. One buffer per VP, written only by that VP's kernel thread (callbacks
 * on one VP run one at a time, on its kernel thread), so a record is a plain store
 * and a bump of the buffer's count; no lock, no allocation. Events raised on plain
 * OS threads (vp == -1: UNBLOCKED from a waker outside weft) go to one more buffer
 * under a spinlock. A full buffer keeps the older events and counts the rest.
 *
 * Stopping. weft_hook_remove() does not wait for callbacks already running on other
 * VPs, so each callback announces itself in its VP's slot of `active` before it
 * looks at `g.on`, and stop clears `g.on` before it waits for every slot to
 * drop to 0 (both seq_cst: either the callback sees on == 0 and records nothing, or
 * stop sees it active and waits for its release decrement). After that the buffers
 * belong to the caller of stop/write alone.
 *
 * Writing. Per VP the events are in time order; a walk over them rebuilds the run
 * slices (RESTORE/ENTRY opens one, SAVE/EXIT closes it) and idle slices
 * (IDLE_BEGIN..IDLE_END) as "X" events on the VP's track; thread lifetimes are
 * async spans ("b"/"e", id = thread id) from ENTRY to EXIT, which may lie on
 * different VPs; BLOCKED, UNBLOCKED and STEAL are instant events.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "weft/debug.h"
#include "weft/hook.h"
#include "weft/runtime.h"
#include "weft/sync.h"
#include "weft/thread.h"

/* src/core/alloc.c: plain malloc memory, not counted, but failure-injectable */
void *weft__sys_malloc_uncounted(size_t size);
void *weft__sys_aligned_uncounted(size_t align, size_t size);
#include "weft/time.h"
#include "weft/trace.h"

/* One recorded event. tid: weft_thread_id of the event's thread (0 for none);
 * aux: BLOCKED the object's address, UNBLOCKED the waker's id, IDLE_END the next
 * thread's id, STEAL the victim VP (low 32 bits) and the count (high 32 bits). */
typedef struct rec {
  uint64_t ts;
  uint64_t tid;
  uint64_t aux;
  uint32_t ev;
  uint32_t pad;
} rec_t;

/* A VP's buffer and counters, one cache line apart from its neighbours'. */
typedef struct vpbuf {
  rec_t *recs;                /* capacity entries, allocated at start */
  size_t n;                   /* records written: owner VP only (or under os_lock) */
  /* counters: written by the owner only, read by stats_print at any time (relaxed:
   * they are statistics, exact only when quiescent) */
  _Atomic uint64_t dropped, switches, blocks, idles, idle_ns;
  _Atomic uint64_t steals, stolen;  /* STEAL events, and the threads they took */
  uint64_t idle_since;        /* owner only: IDLE_BEGIN's time, 0 when not idle */
  uint64_t named[16];         /* owner only: ids whose name this buffer recorded
                                 (direct-mapped by id): a name is recorded once */
} __attribute__((aligned(64))) vpbuf_t;

/* Callbacks under way, by VP (slot 0: plain OS threads; VPs share slots modulo
 * NACTIVE). Static, not in the buffers: a callback that started before stop may
 * look at its slot after the buffers are freed. See "Stopping" above. */
#define NACTIVE 64
static struct { _Atomic int n; } __attribute__((aligned(64))) active[NACTIVE];

static struct {
  _Atomic int on;             /* callbacks record; see "Stopping" */
  int installed;              /* callbacks pushed (caller of start/stop only) */
  int nvps;                   /* VP buffers; bufs[nvps] is the plain-OS-thread one */
  size_t capacity;
  vpbuf_t *bufs;
  atomic_flag os_lock;        /* serializes writers of bufs[nvps] */
  uint64_t t0, t1;            /* start and stop times */
  char *path;
  int env_registered;
} g = {.os_lock = ATOMIC_FLAG_INIT};

/* The events the tracer installs a callback on (IDLE_SPIN is left out: it is one
 * event per polling round and would fill the buffers with nothing to show). */
static const weft_hook_event_t traced[] = {
    WEFT_HOOK_ENTRY,   WEFT_HOOK_EXIT,      WEFT_HOOK_SAVE,     WEFT_HOOK_RESTORE,
    WEFT_HOOK_BLOCKED, WEFT_HOOK_UNBLOCKED, WEFT_HOOK_IDLE_BEGIN, WEFT_HOOK_IDLE_END,
    WEFT_HOOK_STEAL};
#define NTRACED ((int)(sizeof traced / sizeof traced[0]))

static void count(_Atomic uint64_t *c, uint64_t v) {
  /* single writer: a relaxed load and store suffice (no RMW on the hot path) */
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                        memory_order_relaxed);
}

static void put(vpbuf_t *b, uint64_t ts, int ev, uint64_t tid, uint64_t aux) {
  if (b->n == g.capacity) {
    count(&b->dropped, 1);
    return;
  }
  rec_t *r = &b->recs[b->n++];
  r->ts = ts;
  r->tid = tid;
  r->aux = aux;
  r->ev = (uint32_t)ev;
  r->pad = 0;
}

/* Private record kinds, after the hook events: a thread's name (weft_set_name),
 * recorded at the end of its first run slice that has one: NAME holds bytes 0-15
 * in ts and aux, NAME2 (if longer) bytes 16-23 in ts. No time: write_vp skips them. */
enum { REC_NAME = 1000, REC_NAME2 = 1001 };

static void put_name(vpbuf_t *b, weft_thread_t *t, uint64_t id) {
  uint64_t *slot = &b->named[id % 16];
  if (*slot == id) return;
  char nm[WEFT_NAME_MAX] = {0};
  if (weft_get_name(t, nm, sizeof nm) != 0 || !nm[0]) return;
  *slot = id;
  uint64_t w[3] = {0, 0, 0};
  _Static_assert(sizeof w >= WEFT_NAME_MAX, "a name fits three words");
  memcpy(w, nm, sizeof nm);
  put(b, w[0], REC_NAME, id, w[1]);
  if (strlen(nm) > 16) put(b, w[2], REC_NAME2, id, 0);
}

static void on_event(weft_hook_event_t ev, weft_thread_t *t, int vp, void *obj, void *arg) {
  (void)arg;
  _Atomic int *act = &active[vp < 0 ? 0 : (vp + 1) % NACTIVE].n;
  /* seq_cst: pairs with stop's seq_cst store of g.on then load of the slot */
  atomic_fetch_add_explicit(act, 1, memory_order_seq_cst);
  /* seq_cst load: on == 1 also synchronizes with start's store, after which g's
   * buffers are set up */
  if (atomic_load_explicit(&g.on, memory_order_seq_cst)) {
    int os = vp < 0 || vp >= g.nvps;
    vpbuf_t *b = &g.bufs[os ? g.nvps : vp];
    uint64_t now = weft_time_now();
    uint64_t aux = 0;
    if (ev == WEFT_HOOK_BLOCKED) aux = (uint64_t)(uintptr_t)obj;
    else if (ev == WEFT_HOOK_UNBLOCKED) aux = weft_thread_id((weft_thread_t *)obj);
    else if (ev == WEFT_HOOK_IDLE_END) aux = weft_thread_id(t);
    else if (ev == WEFT_HOOK_STEAL) {
      const weft_hook_steal_t *st = obj;
      aux = (uint32_t)st->victim | (uint64_t)(uint32_t)st->count << 32;
    }
    if (os) {
      while (atomic_flag_test_and_set_explicit(&g.os_lock, memory_order_acquire)) {
      }  /* acquire: pairs with the clear below of the previous holder */
      put(b, now, ev, weft_thread_id(t), aux);
      atomic_flag_clear_explicit(&g.os_lock, memory_order_release);
    } else {
      put(b, now, ev, ev == WEFT_HOOK_IDLE_END ? 0 : weft_thread_id(t), aux);
      switch (ev) {
        case WEFT_HOOK_SAVE:
          count(&b->switches, 1);
          put_name(b, t, weft_thread_id(t));
          break;
        case WEFT_HOOK_EXIT: put_name(b, t, weft_thread_id(t)); break;
        case WEFT_HOOK_BLOCKED: count(&b->blocks, 1); break;
        case WEFT_HOOK_STEAL:
          count(&b->steals, 1);
          count(&b->stolen, aux >> 32);
          break;
        case WEFT_HOOK_IDLE_BEGIN:
          b->idle_since = now;
          count(&b->idles, 1);
          break;
        case WEFT_HOOK_IDLE_END:
          if (b->idle_since) count(&b->idle_ns, now - b->idle_since);
          b->idle_since = 0;
          break;
        default: break;
      }
    }
  }
  /* release: the records above happen before stop's acquire sees the slot at 0 */
  atomic_fetch_sub_explicit(act, 1, memory_order_release);
}

void weft_trace_config_init(weft_trace_config_t *cfg) {
  cfg->capacity = 0;
  cfg->path = NULL;
}

int weft_trace_is_on(void) { return g.installed; }

static void free_recording(void) {
  if (g.bufs) {
    for (int i = 0; i <= g.nvps; i++) free(g.bufs[i].recs);
    free(g.bufs);
  }
  free(g.path);
  g.bufs = NULL;
  g.path = NULL;
  g.nvps = 0;
}

static void quiesce(void);

/* Takes back the tracer's own callbacks, wherever they are in their stacks: a
 * component that pushed after the tracer started (the C-Threads filters) keeps its
 * own (a blind pop took the filter's and left the tracer's). */
static void uninstall(int n) {
  for (int i = n - 1; i >= 0; i--) weft_hook_remove(traced[i], on_event, NULL);
}

int weft_trace_start(const weft_trace_config_t *cfg) {
  if (g.installed) return WEFT_EALREADY;
  int nvps = weft_vp_count();
  if (nvps <= 0) return WEFT_ENOTINIT;
  weft_trace_config_t def;
  if (!cfg) {
    weft_trace_config_init(&def);
    cfg = &def;
  }
  free_recording();
  size_t cap = cfg->capacity ? cfg->capacity : WEFT_TRACE_DEFAULT_CAPACITY;
  /* cap * sizeof(rec_t) must not wrap: a capacity that no allocation can hold is
   * out of memory, not a small buffer written past its end */
  if (cap > SIZE_MAX / sizeof(rec_t)) return WEFT_ENOMEM;
  /* not counted (a recording outlives weft_shutdown() until it is written), but
   * injectable (weft_debug_fail_alloc) */
  vpbuf_t *bufs = weft__sys_aligned_uncounted(64, sizeof(vpbuf_t) * (size_t)(nvps + 1));
  if (!bufs) return WEFT_ENOMEM;
  memset(bufs, 0, sizeof(vpbuf_t) * (size_t)(nvps + 1));
  int ok = 1;
  for (int i = 0; i <= nvps; i++) {
    bufs[i].recs = weft__sys_malloc_uncounted(cap * sizeof(rec_t));
    if (!bufs[i].recs) ok = 0;
  }
  char *path = NULL;
  if (ok && cfg->path) {
    size_t len = strlen(cfg->path) + 1;
    ok = (path = weft__sys_malloc_uncounted(len)) != NULL;
    if (ok) memcpy(path, cfg->path, len);
  }
  g.bufs = bufs;
  g.nvps = nvps;
  g.capacity = cap;
  g.path = path;
  if (!ok) {
    free_recording();
    return WEFT_ENOMEM;
  }
  g.t0 = weft_time_now();
  g.t1 = 0;
  /* seq_cst store (a release): pairs with the callbacks' seq_cst load of on, so
   * the buffers above are set up before any callback uses them */
  atomic_store_explicit(&g.on, 1, memory_order_seq_cst);
  for (int i = 0; i < NTRACED; i++) {
    int rc = weft_hook_push(traced[i], on_event, NULL);
    if (rc != 0) {
      atomic_store_explicit(&g.on, 0, memory_order_seq_cst);  /* as in stop */
      uninstall(i);
      quiesce();
      free_recording();
      return rc;
    }
  }
  g.installed = 1;
  return 0;
}

/* Waits until no callback is under way (after g.on was cleared). */
static void quiesce(void) {
  for (int i = 0; i < NACTIVE; i++) {
    /* seq_cst (so also acquire): pairs with the callbacks' seq_cst increment and
     * release decrement; a callback that increments later sees on == 0 */
    while (atomic_load_explicit(&active[i].n, memory_order_seq_cst) != 0) {
    }
  }
}

int weft_trace_stop(void) {
  if (!g.installed) return WEFT_EINVAL;
  /* seq_cst: pairs with each callback's seq_cst increment of its slot, then load */
  atomic_store_explicit(&g.on, 0, memory_order_seq_cst);
  uninstall(NTRACED);
  quiesce();
  g.t1 = weft_time_now();
  g.installed = 0;
  return 0;
}

uint64_t weft_trace_dropped(void) {
  uint64_t d = 0;
  for (int i = 0; g.bufs && i <= g.nvps; i++)
    d += atomic_load_explicit(&g.bufs[i].dropped, memory_order_relaxed);
  return d;
}

void weft_trace_discard(void) {
  if (g.installed) weft_trace_stop();
  free_recording();
}

/* ---- JSON -------------------------------------------------------------------------- */

/* Thread names found in the recording (REC_NAME records): an open-addressing table
 * built by weft_trace_write_file, NULL when there are none. */
typedef struct name_ent { uint64_t id; char name[WEFT_NAME_MAX]; } name_ent_t;
static struct { name_ent_t *v; size_t cap; } names;

static name_ent_t *name_slot(uint64_t id) {
  size_t i = (size_t)(id * 0x9E3779B97F4A7C15ull) & (names.cap - 1);
  while (names.v[i].id && names.v[i].id != id) i = (i + 1) & (names.cap - 1);
  return &names.v[i];
}

static const char *name_of(uint64_t id) {
  if (!names.v || !id) return NULL;
  name_ent_t *e = name_slot(id);
  return e->id ? e->name : NULL;
}

static void names_build(void) {
  size_t n = 0;
  for (int i = 0; i < g.nvps; i++)
    for (size_t k = 0; k < g.bufs[i].n; k++) n += g.bufs[i].recs[k].ev == REC_NAME;
  names.v = NULL;
  if (!n) return;
  for (names.cap = 16; names.cap < 2 * n; names.cap *= 2) {
  }
  names.v = calloc(names.cap, sizeof *names.v);
  if (!names.v) return;  /* out of memory: the trace shows ids only */
  for (int i = 0; i < g.nvps; i++)
    for (size_t k = 0; k < g.bufs[i].n; k++) {
      const rec_t *r = &g.bufs[i].recs[k];
      if (r->ev != REC_NAME && r->ev != REC_NAME2) continue;
      name_ent_t *e = name_slot(r->tid);
      e->id = r->tid;
      if (r->ev == REC_NAME) {
        memcpy(e->name, &r->ts, 8);
        memcpy(e->name + 8, &r->aux, 8);
      } else {
        memcpy(e->name + 16, &r->ts, WEFT_NAME_MAX - 16);
      }
      e->name[WEFT_NAME_MAX - 1] = 0;
    }
}

/* The length of the well-formed UTF-8 sequence at s (1 to 4), or 0 if the bytes there
 * are not one (a stray continuation byte, a truncated or overlong sequence, a
 * surrogate, a code point past U+10FFFF). s[0] >= 0x80. */
static int utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;  /* also stops at the terminating 0 */
  if (n == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f))) return 0;
  if (n == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))) return 0;
  return n;
}

/* Writes s as a JSON string body: quotes, backslashes and control bytes escaped, and
 * each byte that is not part of well-formed UTF-8 written as U+FFFD (JSON text is
 * UTF-8; a thread's name is any bytes, weft_set_name). */
static void json_str(FILE *f, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned char c = *p;
    if (c < 0x80) {
      if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
      else if (c < 0x20) fprintf(f, "\\u%04x", c);
      else fputc(c, f);
      p++;
      continue;
    }
    int n = utf8_len(p);
    if (n == 0) {
      fputs("\\ufffd", f);
      p++;
    } else {
      fwrite(p, 1, (size_t)n, f);
      p += n;
    }
  }
}

/* A thread's display name: its name and id, or "thread <id>". */
static void thread_label(FILE *f, uint64_t id) {
  const char *nm = name_of(id);
  if (nm) {
    json_str(f, nm);
    fprintf(f, " (%" PRIu64 ")", id);
  } else {
    fprintf(f, "thread %" PRIu64, id);
  }
}

/* Microseconds since the start, with the nanoseconds as the fraction. */
static void ts(FILE *f, uint64_t t) {
  uint64_t d = t > g.t0 ? t - g.t0 : 0;
  fprintf(f, "%" PRIu64 ".%03u", d / 1000, (unsigned)(d % 1000));
}

typedef struct out { FILE *f; int first; } out_t;

static void sep(out_t *o) {
  fputs(o->first ? "\n" : ",\n", o->f);
  o->first = 0;
}

static void slice(out_t *o, int tid, const char *cat, uint64_t id, uint64_t a, uint64_t b,
                  const char *end) {
  sep(o);
  if (id) {
    fprintf(o->f, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"", cat);
    thread_label(o->f, id);
    fprintf(o->f, "\",\"pid\":1,\"tid\":%d,\"ts\":", tid);
  } else
    fprintf(o->f, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"idle\",\"pid\":1,\"tid\":%d,\"ts\":",
            cat, tid);
  ts(o->f, a);
  fputs(",\"dur\":", o->f);
  uint64_t d = b > a ? b - a : 0;
  fprintf(o->f, "%" PRIu64 ".%03u", d / 1000, (unsigned)(d % 1000));
  if (id) fprintf(o->f, ",\"args\":{\"thread\":%" PRIu64 ",\"end\":\"%s\"}}", id, end);
  else fprintf(o->f, ",\"args\":{\"end\":\"%s\"}}", end);
}

static void instant(out_t *o, int tid, const char *name, uint64_t t, uint64_t thread,
                    const char *key, uint64_t val, int hex) {
  sep(o);
  fprintf(o->f, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"weft.sync\",\"name\":\"%s\",\"pid\":1,"
          "\"tid\":%d,\"ts\":", name, tid);
  ts(o->f, t);
  fprintf(o->f, ",\"args\":{\"thread\":%" PRIu64, thread);
  if (hex) fprintf(o->f, ",\"%s\":\"0x%" PRIx64 "\"}}", key, val);
  else fprintf(o->f, ",\"%s\":%" PRIu64 "}}", key, val);
}

static void lifetime(out_t *o, int tid, const char *ph, uint64_t t, uint64_t id) {
  sep(o);
  fprintf(o->f, "{\"ph\":\"%s\",\"cat\":\"weft.thread\",\"name\":\"", ph);
  thread_label(o->f, id);
  fprintf(o->f, "\",\"id\":%" PRIu64 ",\"pid\":1,\"tid\":%d,\"ts\":", id, tid);
  ts(o->f, t);
  fputs("}", o->f);
}

/* Rebuilds one VP's slices from its events (see the comment at the top). */
static void write_vp(out_t *o, int vp) {
  const vpbuf_t *b = &g.bufs[vp];
  uint64_t cur = 0, cur_since = 0, idle_since = 0;
  int idle = 0, seen = 0;  /* seen: a slice boundary was met (before it, assume t0) */
  for (size_t i = 0; i < b->n; i++) {
    const rec_t *r = &b->recs[i];
    switch (r->ev) {
      case WEFT_HOOK_ENTRY:
      case WEFT_HOOK_RESTORE:
        if (idle) {
          slice(o, vp, "weft.idle", 0, idle_since, r->ts, "run");
          idle = 0;
        }
        if (cur != r->tid) {
          if (cur) slice(o, vp, "weft.run", cur, cur_since, r->ts, "preempted");
          cur = r->tid;
          cur_since = r->ts;
        }
        if (r->ev == WEFT_HOOK_ENTRY) lifetime(o, vp, "b", r->ts, r->tid);
        seen = 1;
        break;
      case WEFT_HOOK_SAVE:
      case WEFT_HOOK_EXIT:
        if (cur) slice(o, vp, "weft.run", cur, cur_since, r->ts,
                       r->ev == WEFT_HOOK_EXIT ? "exit" : "switch");
        else if (!seen) slice(o, vp, "weft.run", r->tid, g.t0, r->ts,
                              r->ev == WEFT_HOOK_EXIT ? "exit" : "switch");
        cur = 0;
        seen = 1;
        if (r->ev == WEFT_HOOK_EXIT) lifetime(o, vp, "e", r->ts, r->tid);
        break;
      case WEFT_HOOK_BLOCKED:
        /* no object: a sleep (or a bare weft_thread_block) */
        instant(o, vp, r->aux ? "blocked" : "blocked (sleep)", r->ts, r->tid, "obj", r->aux, 1);
        break;
      case WEFT_HOOK_UNBLOCKED:
        instant(o, vp, "unblocked", r->ts, r->tid, "waker", r->aux, 0);
        break;
      case WEFT_HOOK_STEAL:
        sep(o);
        fprintf(o->f, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"weft.steal\",\"name\":\"steal\","
                "\"pid\":1,\"tid\":%d,\"ts\":", vp);
        ts(o->f, r->ts);
        fprintf(o->f, ",\"args\":{\"thread\":%" PRIu64 ",\"victim\":%u,\"count\":%u}}", r->tid,
                (unsigned)(r->aux & 0xffffffffu), (unsigned)(r->aux >> 32));
        break;
      case WEFT_HOOK_IDLE_BEGIN:
        if (cur) slice(o, vp, "weft.run", cur, cur_since, r->ts, "idle");
        cur = 0;
        idle = 1;
        idle_since = r->ts;
        seen = 1;
        break;
      case WEFT_HOOK_IDLE_END:
        if (idle || !seen) slice(o, vp, "weft.idle", 0, idle ? idle_since : g.t0, r->ts, "run");
        idle = 0;
        seen = 1;
        break;
      default: break;
    }
  }
  uint64_t end = g.t1 ? g.t1 : weft_time_now();
  if (cur) slice(o, vp, "weft.run", cur, cur_since, end, "trace stopped");
  if (idle) slice(o, vp, "weft.idle", 0, idle_since, end, "trace stopped");
}

static void meta(out_t *o, int tid, const char *what, const char *name) {
  sep(o);
  fprintf(o->f, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
          what, tid, name);
}

int weft_trace_write_file(FILE *f) {
  if (g.installed) return WEFT_EBUSY;
  if (!g.bufs || !f) return WEFT_EINVAL;
  out_t o = {f, 1};
  names_build();
  fputs("{\"traceEvents\":[", f);
  meta(&o, 0, "process_name", "weft");
  char name[32];
  for (int vp = 0; vp <= g.nvps; vp++) {
    if (vp < g.nvps) snprintf(name, sizeof name, "VP %d", vp);
    else snprintf(name, sizeof name, "OS threads");
    meta(&o, vp, "thread_name", name);
    sep(&o);
    fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":1,\"tid\":%d,"
            "\"args\":{\"sort_index\":%d}}", vp, vp);
  }
  for (int vp = 0; vp < g.nvps; vp++) write_vp(&o, vp);
  const vpbuf_t *ob = &g.bufs[g.nvps];
  /* the shared buffer holds the plain OS threads' wake-ups and the events of
   * threads that ran on the system monitor's spare VPs (their index is past the
   * VPs'): slices of several spares cannot be rebuilt from one buffer, but a
   * thread that started or finished there keeps its lifetime span */
  for (size_t i = 0; i < ob->n; i++) {
    const rec_t *r = &ob->recs[i];
    if (r->ev == WEFT_HOOK_UNBLOCKED)
      instant(&o, g.nvps, "unblocked", r->ts, r->tid, "waker", r->aux, 0);
    else if (r->ev == WEFT_HOOK_ENTRY)
      lifetime(&o, g.nvps, "b", r->ts, r->tid);
    else if (r->ev == WEFT_HOOK_EXIT)
      lifetime(&o, g.nvps, "e", r->ts, r->tid);
  }
  uint64_t dropped = weft_trace_dropped();
  if (dropped) {
    sep(&o);
    fprintf(f, "{\"ph\":\"i\",\"s\":\"g\",\"name\":\"weft trace: %" PRIu64 " events dropped "
            "(buffers full)\",\"pid\":1,\"tid\":0,\"ts\":", dropped);
    ts(f, g.t1);
    fputs("}", f);
  }
  fprintf(f, "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{\"tracer\":\"weft\",\"vps\":%d,"
          "\"capacity_per_buffer\":%zu,\"dropped_events\":%" PRIu64 ",\"dropped_per_buffer\":[",
          g.nvps, g.capacity, dropped);
  for (int i = 0; i <= g.nvps; i++)
    fprintf(f, "%s%" PRIu64, i ? "," : "",
            atomic_load_explicit(&g.bufs[i].dropped, memory_order_relaxed));
  fputs("],\"last_buffer\":\"plain OS threads\"}}\n", f);
  free(names.v);
  names.v = NULL;
  return ferror(f) ? WEFT_ESYS : 0;
}

int weft_trace_write(const char *path) {
  if (g.installed) return WEFT_EBUSY;
  if (!g.bufs) return WEFT_EINVAL;
  if (!path) path = g.path;
  if (!path) return WEFT_EINVAL;
  FILE *f = fopen(path, "w");
  if (!f) return WEFT_ESYS;
  int rc = weft_trace_write_file(f);
  if (fclose(f) != 0 && rc == 0) rc = WEFT_ESYS;
  return rc;
}

/* ---- environment mode and statistics ----------------------------------------------- */

static void at_exit_write(void) {
  if (g.installed) weft_trace_stop();
  if (g.bufs && g.path) {
    int rc = weft_trace_write(NULL);
    if (rc != 0) fprintf(stderr, "weft: WEFT_TRACE=%s: %s\n", g.path, weft_strerror(rc));
  }
  free_recording();
}

int weft_trace_from_env(void) {
  const char *p = getenv("WEFT_TRACE");
  if (!p || !*p) return 0;
  weft_trace_config_t cfg;
  weft_trace_config_init(&cfg);
  cfg.path = p;
  const char *c = getenv("WEFT_TRACE_CAPACITY");
  if (c && *c) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(c, &end, 10);
    if (errno || end == c || *end || c[0] == '-' || v == 0)
      fprintf(stderr, "weft: WEFT_TRACE_CAPACITY=%s is not a number of events: the default is used\n", c);
    else
      cfg.capacity = (size_t)v;
  }
  int rc = weft_trace_start(&cfg);
  if (rc != 0) {
    /* said, not silent: the user asked for a trace */
    fprintf(stderr, "weft: WEFT_TRACE=%s: tracing not started: %s\n", p, weft_strerror(rc));
    return rc;
  }
  if (!g.env_registered && atexit(at_exit_write) == 0) g.env_registered = 1;
  return 1;
}

void weft_trace_stats_print(FILE *f) {
  if (!g.bufs) {
    fprintf(f, "weft trace: no recording\n");
  } else {
    uint64_t now = g.t1 ? g.t1 : weft_time_now();
    fprintf(f, "weft trace statistics over %.3f ms (%s)\n", (double)(now - g.t0) / 1e6,
            g.installed ? "tracing" : "stopped");
    fprintf(f, "%-6s %10s %10s %10s %14s %10s %10s %10s %10s\n", "VP", "switches", "blocks",
            "idles", "idle ms", "steals", "stolen", "events", "dropped");
    for (int i = 0; i <= g.nvps; i++) {
      const vpbuf_t *b = &g.bufs[i];
      char name[16];
      if (i < g.nvps) snprintf(name, sizeof name, "%d", i);
      else snprintf(name, sizeof name, "OS");
      /* the events recorded: their count is the VP's own while tracing (no other
       * thread may read it then): "-" until weft_trace_stop() */
      char events[24];
      if (g.installed) snprintf(events, sizeof events, "-");
      else snprintf(events, sizeof events, "%zu", b->n);
      fprintf(f, "%-6s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %14.3f %10" PRIu64
              " %10" PRIu64 " %10s %10" PRIu64 "\n",
              name, atomic_load_explicit(&b->switches, memory_order_relaxed),
              atomic_load_explicit(&b->blocks, memory_order_relaxed),
              atomic_load_explicit(&b->idles, memory_order_relaxed),
              (double)atomic_load_explicit(&b->idle_ns, memory_order_relaxed) / 1e6,
              atomic_load_explicit(&b->steals, memory_order_relaxed),
              atomic_load_explicit(&b->stolen, memory_order_relaxed), events,
              atomic_load_explicit(&b->dropped, memory_order_relaxed));
    }
  }
  weft_debug_stats_t d;
  memset(&d, 0, sizeof d);
  if (weft_is_running()) weft_debug_stats(&d);
  weft_sync_stats_t s;
  weft_sync_stats(&s);
  fprintf(f, "totals over all VPs (weft_debug_stats/weft_sync_stats, not per VP):\n"
          "  created %" PRIu64 ", finished %" PRIu64 ", steals %" PRIu64 ", sleeps %" PRIu64
          ", blocks %" PRIu64 " (%" PRIu64 " left a VP idle), mutex misses %" PRIu64 "\n",
          d.created, d.finished, d.steals, d.sleeps, s.blocked, s.idled, s.mutex_missed);
}

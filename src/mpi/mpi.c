/* src/mpi/mpi.c - parking weft threads on MPI requests (weft/mpi.h, docs/mpi.md).
 *
 * One set of outstanding requests, g.reqs[0..n) (contiguous, for MPI_Testsome), with
 * g.slot[k] saying whose it is: a waiter (one parked weft_mpi_wait* call) and the
 * position in the caller's array. Everything below is guarded by g.lock (a
 * spinlock: it is taken in release callbacks and on idle VPs, which cannot block).
 *
 * Park protocol (exactly-once wake-up):
 *   1. the caller tests its own requests, for up to cfg.spin_ns, yielding between
 *      tests (the first phase of a two-phase wait: done, no park);
 *   2. under g.lock it reserves room for its requests (g.reserved) and makes sure a
 *      poller thread runs;
 *   3. weft_thread_block(publish): publish runs after the caller's context is saved
 *      and moves its requests into the set (using the reservation). No poll can see
 *      them before the caller is blocked, so the unblock never precedes the block;
 *   4. a poll (g.lock held) runs MPI_Testsome over the set; for a completed request it
 *      stores the status and the request's new handle in the caller's arrays; when a
 *      waiter is finished (all done; waitany: one done) its slots all leave the set
 *      and it goes on a local wake list. After g.lock is released each is unblocked
 *      once: the waiter is finished exactly once and leaves the set with it.
 * Pollers: the do-when-idle function (registered while g.n > 0), the poller thread
 * (alive while g.n + g.reserved > 0), the park path. Polls from idle VPs use trylock:
 * an idle VP never waits for another poll.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "weft/mpi.h"
#include "weft/runtime.h"
#include "weft/sched.h"
#include "weft/sem.h"
#include "weft/spinlock.h"
#include "weft/thread.h"
#include "weft/time.h"
#include "weft/vp.h"

typedef struct waiter {
  weft_thread_t *t;
  MPI_Request *user;   /* the caller's requests */
  MPI_Status *st;      /* statuses (all) or one status (!all), or an IGNORE */
  int n;               /* requests in user[] */
  int all;             /* st is an array indexed like user[] */
  int any;             /* waitany: finished at the first completion */
  int remaining;       /* requests still in the set */
  int index;           /* waitany: the completed one */
  int err;             /* MPI_SUCCESS, MPI_ERR_IN_STATUS, or a poll's error */
  int finished;
  struct waiter *next; /* wake list */
  struct waiter *anext; /* g.anyw list */
} waiter_t;

typedef struct slot {
  waiter_t *w;
  int i;
} slot_t;

static struct {
  weft_spin_t lock;      /* guards everything below but `mpi` */
  weft_spin_t mpi;       /* serialises MPI calls when MPI gives less than MULTIPLE */
  int inited, finalized, serialize;
  weft_mpi_config_t cfg;
  MPI_Request *reqs;
  slot_t *slot;
  int *idx;
  MPI_Status *sts;
  int n, cap, reserved;
  int active;            /* weft_mpi calls in progress (enter/leave), which may still
                            call MPI: finalize waits for none */
  waiter_t *anyw;        /* parked weft_mpi_waitany calls (tested with MPI_Testany) */
  int nany;
  int poller;            /* a poller thread runs (or is being made: starting) */
  int starting;          /* a parker is making the poller thread: the others wait for
                            the outcome before they park (park) */
  int poller_asleep;     /* it waits on `kick` until its next interval, or lingers */
  int poller_lingering;  /* it waits on `kick` with nothing outstanding (LINGER):
                            a parker kicks it back to its interval */
  weft_sem_t kick;       /* the do-when-idle function wakes the poller early (all
                            zero: a semaphore with count 0) */
  int idle_on;           /* the do-when-idle function is registered */
  uint64_t last_poll;    /* weft_time_now() of the last poll */
} g = {.lock = WEFT_SPIN_INIT, .mpi = WEFT_SPIN_INIT};

static inline void mlock(void) {
  if (g.serialize) weft_spin_lock(&g.mpi);
}
static inline void munlock(void) {
  if (g.serialize) weft_spin_unlock(&g.mpi);
}

void weft_mpi_lock(void) { mlock(); }
void weft_mpi_unlock(void) { munlock(); }
int weft_mpi_serialized(void) { return g.serialize; }

/* A weft_mpi call that may call MPI starts: 0 if MPI is not (or no longer)
 * initialized. Counted under the lock, where finalize looks: a thread still spinning
 * on its own requests (first phase), or between its nonblocking call and its wait,
 * keeps finalize from going ahead under it. */
static int enter(void) {
  weft_spin_lock(&g.lock);
  int ok = g.inited;
  g.active += ok;
  weft_spin_unlock(&g.lock);
  return ok;
}
static int leave(int rc) {
  weft_spin_lock(&g.lock);
  g.active--;
  weft_spin_unlock(&g.lock);
  return rc;
}

int weft_mpi_outstanding(void) {
  weft_spin_lock(&g.lock);
  int n = g.n + g.nany;
  weft_spin_unlock(&g.lock);
  return n;
}

void weft_mpi_config_init(weft_mpi_config_t *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->thread_level = MPI_THREAD_MULTIPLE;
  cfg->poll_interval_ns = 100000;
  cfg->idle_poll = 1;
  cfg->spin_ns = 20000;
}

int weft_mpi_init_config(int *argc, char ***argv, const weft_mpi_config_t *cfg, int *provided) {
  weft_mpi_config_t c;
  weft_mpi_config_init(&c);
  if (cfg) c = *cfg;
  if ((c.thread_level != MPI_THREAD_SINGLE && c.thread_level != MPI_THREAD_FUNNELED &&
       c.thread_level != MPI_THREAD_SERIALIZED && c.thread_level != MPI_THREAD_MULTIPLE) ||
      c.poll_interval_ns == 0)
    return MPI_ERR_ARG;
  int flag = 0;
  MPI_Initialized(&flag);
  if (flag || g.inited || g.finalized) return MPI_ERR_OTHER;
  int prov = MPI_THREAD_SINGLE;
  int rc = MPI_Init_thread(argc, argv, c.thread_level, &prov);
  if (rc != MPI_SUCCESS) return rc;
  weft_spin_lock(&g.lock);
  g.cfg = c;
  g.serialize = prov < MPI_THREAD_MULTIPLE;
  g.inited = 1;
  weft_spin_unlock(&g.lock);
  if (provided) *provided = prov;
  return MPI_SUCCESS;
}

int weft_mpi_init(int *argc, char ***argv, int *provided) {
  return weft_mpi_init_config(argc, argv, NULL, provided);
}

/* ---- polling --------------------------------------------------------------------- */

static void idle_poll(void *arg);

/* One MPI_Testsome over the set; g.lock held. Returns the finished waiters (linked
 * by next), to be unblocked after g.lock is released. */
static waiter_t *poll_locked(void) {
  waiter_t *wake = NULL;
  g.last_poll = weft_time_now();
  if (!g.inited) return NULL;
  /* waitany: MPI_Testany on the caller's own array completes at most one request
   * (MPI_Testsome over the set could complete two of one waitany) */
  for (waiter_t **pp = &g.anyw; *pp;) {
    waiter_t *w = *pp;
    int flag = 0;
    mlock();
    int rc = MPI_Testany(w->n, w->user, &w->index, &flag, w->st);
    munlock();
    if (rc != MPI_SUCCESS || flag) {
      w->err = rc;
      w->finished = 1;
      *pp = w->anext;
      g.nany--;
      w->next = wake;
      wake = w;
    } else {
      pp = &w->anext;
    }
  }
  if (g.n == 0) goto out;
  int outc = 0;
  mlock();
  int rc = MPI_Testsome(g.n, g.reqs, &outc, g.idx, g.sts);
  munlock();
  if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
    /* the whole call failed (errors return on some communicator): every waiter
     * gets the error rather than waiting forever */
    for (int k = 0; k < g.n; k++) {
      waiter_t *w = g.slot[k].w;
      if (!w->finished) {
        w->finished = 1;
        w->err = rc;
        w->next = wake;
        wake = w;
      }
    }
    g.n = 0;
  } else {
    if (outc == MPI_UNDEFINED) outc = 0;
    for (int j = 0; j < outc; j++) {
      int k = g.idx[j];
      waiter_t *w = g.slot[k].w;
      int i = g.slot[k].i;
      w->user[i] = g.reqs[k];  /* MPI_REQUEST_NULL, or an inactive persistent one */
      /* MPI_Testsome sets the error fields only when it returns MPI_ERR_IN_STATUS;
       * a waitall that ends with MPI_ERR_IN_STATUS must show MPI_SUCCESS in the
       * statuses of the requests an earlier poll completed */
      if (rc != MPI_ERR_IN_STATUS) g.sts[j].MPI_ERROR = MPI_SUCCESS;
      else if (g.sts[j].MPI_ERROR != MPI_SUCCESS)
        w->err = w->all ? MPI_ERR_IN_STATUS : g.sts[j].MPI_ERROR;
      if (w->all) {
        if (w->st != MPI_STATUSES_IGNORE) w->st[i] = g.sts[j];
      } else if (w->st != MPI_STATUS_IGNORE) {
        w->st[0] = g.sts[j];
      }
      g.slot[k].w = NULL;  /* done: leaves the set below */
      if (--w->remaining == 0) {
        w->finished = 1;
        w->next = wake;
        wake = w;
      }
    }
    if (outc > 0) {  /* compact: drop the done slots */
      int m = 0;
      for (int k = 0; k < g.n; k++) {
        if (!g.slot[k].w) continue;
        g.reqs[m] = g.reqs[k];
        g.slot[m] = g.slot[k];
        m++;
      }
      g.n = m;
    }
  }
out:
  if (g.n == 0 && g.nany == 0 && g.idle_on) {
    weft_idle_func_remove(idle_poll, NULL);
    g.idle_on = 0;
  }
  return wake;
}

static void wake_all(waiter_t *w) {
  while (w) {
    waiter_t *next = w->next;  /* read before the unblock: w lives on t's stack */
    weft_thread_unblock(w->t);
    w = next;
  }
}

/* The do-when-idle function. It does not call MPI itself: it runs on a VP's idle
 * context, whose stack may be small (VP 0's), and MPI's progress engine can take more.
 * It makes the poller thread (a stack of POLLER_STACK) run now instead of at its next
 * interval. Never waits for the set (trylock). */
static void idle_poll(void *arg) {
  (void)arg;
  if (weft_spin_trylock(&g.lock) != 0) return;
  int kick = g.poller_asleep;
  g.poller_asleep = 0;
  weft_spin_unlock(&g.lock);
  if (kick) weft_sem_signal(&g.kick);
}

/* MPICH's and its transports' progress functions have large frames. */
#define POLLER_STACK ((size_t)1 << 20)

/* How long the poller thread stays after nothing is outstanding: LINGER poll
 * intervals. A program that exchanges messages between slices of compute (M3 with
 * one thread per rank) parks about once per exchange; a poller that finished as soon
 * as the set emptied was made anew for a large share of those parks, each time
 * mapping, faulting in and unmapping its POLLER_STACK. Lingering costs one blocked
 * thread and one timer. */
#define LINGER 10

/* The poller thread: tests every poll_interval_ns (or when an idle VP kicks it)
 * while anything is outstanding or reserved; then lingers, waiting on `kick` for
 * LINGER intervals (a parker or finalize kicks it), and finishes if nothing came
 * (g.poller = 0 under the lock, where parkers look). A kick that comes after a
 * timeout leaves a unit in `kick`: the next wait returns at once, one early poll. */
static void *poller_main(void *arg) {
  (void)arg;
  uint64_t quiet_since = 0;  /* when the set was first seen empty, 0 while it is not */
  for (;;) {
    weft_spin_lock(&g.lock);
    g.poller_asleep = 0;
    g.poller_lingering = 0;
    if (!g.inited) {
      g.poller = 0;
      weft_spin_unlock(&g.lock);
      return NULL;
    }
    if (g.n == 0 && g.nany == 0 && g.reserved == 0) {
      uint64_t now = weft_time_now(), iv = g.cfg.poll_interval_ns;
      uint64_t linger = iv > UINT64_MAX / LINGER ? UINT64_MAX : iv * LINGER;
      if (!quiet_since) quiet_since = now;
      if (now - quiet_since >= linger) {
        g.poller = 0;
        weft_spin_unlock(&g.lock);
        return NULL;
      }
      g.poller_asleep = g.poller_lingering = 1;
      weft_spin_unlock(&g.lock);
      weft_sem_timedwait(&g.kick, weft_deadline_after(linger - (now - quiet_since)));
      continue;
    }
    quiet_since = 0;
    waiter_t *w = poll_locked();
    /* about to wait: an idle VP may kick it from now on, even when this poll left the
     * set empty (a thread that parks before the timeout is then polled at once, not
     * a poll_interval_ns later) */
    g.poller_asleep = 1;
    weft_spin_unlock(&g.lock);
    wake_all(w);
    /* The wait returns at once when the interval is shorter than a poll (or a kick
     * is pending) and then does not switch: yield, or with one VP the poller would
     * keep it for ever and no other thread would run. */
    weft_yield();
    weft_sem_timedwait(&g.kick, weft_deadline_after(g.cfg.poll_interval_ns));
  }
}

/* ---- parking --------------------------------------------------------------------- */

/* Release callback of weft_thread_block: the caller is saved; publish its requests. */
static void publish(void *arg) {
  waiter_t *w = arg;
  weft_spin_lock(&g.lock);
  g.reserved -= w->n;
  if (w->any) {
    w->anext = g.anyw;
    g.anyw = w;
    g.nany++;
  } else for (int i = 0; i < w->n; i++) {
    if (w->user[i] == MPI_REQUEST_NULL) continue;
    g.reqs[g.n] = w->user[i];
    g.slot[g.n].w = w;
    g.slot[g.n].i = i;
    g.n++;
    w->remaining++;
  }
  if (g.cfg.idle_poll && !g.idle_on && weft_idle_func_add(idle_poll, NULL) == 0) g.idle_on = 1;
  weft_spin_unlock(&g.lock);
}

static int grow(int need) {
  if (need <= g.cap) return 0;
  int cap = g.cap ? g.cap : 64;
  while (cap < need) cap *= 2;
  MPI_Request *r = realloc(g.reqs, (size_t)cap * sizeof *r);
  if (r) g.reqs = r;
  slot_t *s = realloc(g.slot, (size_t)cap * sizeof *s);
  if (s) g.slot = s;
  int *x = realloc(g.idx, (size_t)cap * sizeof *x);
  if (x) g.idx = x;
  MPI_Status *st = realloc(g.sts, (size_t)cap * sizeof *st);
  if (st) g.sts = st;
  if (!r || !s || !x || !st) return -1;
  g.cap = cap;
  return 0;
}

/* park's answer when no poller thread exists and none can be made (weft_create
 * failed: weft_config_t.max_threads reached, no memory): the caller tests its own
 * requests until they complete (self_poll) instead of parking. */
#define PARK_SELF (-1)

/* Parks the calling weft thread until w (fast path already failed) is finished, or
 * returns PARK_SELF. A thread parks only while a poller thread exists: nothing else
 * calls MPI for a parked thread once every thread is parked (the do-when-idle function
 * only wakes the poller), so a park without one would never end. */
static int park(waiter_t *w) {
  int start_poller = 0;
  waiter_t *wake = NULL;
  for (;;) {
    weft_spin_lock(&g.lock);
    if (!g.inited) {
      weft_spin_unlock(&g.lock);
      return MPI_ERR_OTHER;
    }
    if (!g.starting) break;
    /* another parker is making the poller thread: whether it exists decides */
    weft_spin_unlock(&g.lock);
    weft_yield();
  }
  if (grow(g.n + g.reserved + w->n) != 0) {
    weft_spin_unlock(&g.lock);
    return MPI_ERR_NO_MEM;
  }
  g.reserved += w->n;  /* before the poller exists: it does not finish while reserved */
  int kick = 0;
  if (!g.poller) {
    g.poller = g.starting = start_poller = 1;
    g.poller_asleep = 0;  /* `kick` is never re-initialized: an idle VP may still be
                             signalling it; a unit left there is one early poll */
  } else if (g.poller_lingering) {  /* back to its interval (one unit: asleep cleared) */
    g.poller_asleep = g.poller_lingering = 0;
    kick = 1;
  }
  /* the park-path check: progress for every parked thread when polls are overdue
   * (a VP busy with threads that never leave it idle) */
  if (weft_time_now() - g.last_poll >= g.cfg.poll_interval_ns) wake = poll_locked();
  weft_spin_unlock(&g.lock);
  if (kick) weft_sem_signal(&g.kick);
  wake_all(wake);
  if (start_poller) {
    weft_attr_t a;
    weft_attr_init(&a);
    a.detached = 1;
    a.stack_size = POLLER_STACK;
    weft_thread_t *t;
    int rc = weft_create(&t, &a, poller_main, NULL);
    weft_spin_lock(&g.lock);
    g.starting = 0;
    if (rc != 0) {  /* no poller: this thread polls for itself */
      g.poller = 0;
      g.reserved -= w->n;
      weft_spin_unlock(&g.lock);
      return PARK_SELF;
    }
    weft_spin_unlock(&g.lock);
  }
  w->t = weft_self();
  weft_thread_block(publish, w);
  return w->err;
}

static int is_weft(void) { return weft_sched_vp_self() != NULL; }

enum { T_ONE, T_ALL, T_ANY };

/* One test of the caller's own requests (kind: MPI_Test, Testall or Testany). */
static int test_own(int kind, int n, MPI_Request *reqs, int *index, MPI_Status *st, int *flag) {
  int rc;
  mlock();
  if (kind == T_ONE) rc = MPI_Test(reqs, flag, st);
  else if (kind == T_ALL) rc = MPI_Testall(n, reqs, flag, st);
  else rc = MPI_Testany(n, reqs, index, flag, st);
  munlock();
  return rc;
}

/* A plain OS thread's wait when weft serialises: test under the lock, let go between. */
static int os_wait(int n, MPI_Request *reqs, int *index, MPI_Status *st, int kind) {
  for (;;) {
    int flag = 0;
    int rc = test_own(kind, n, reqs, index, st, &flag);
    if (rc != MPI_SUCCESS || flag) return rc;
    sched_yield();
  }
}

/* The first phase of a weft thread's wait: tests its own requests, and while
 * cfg.spin_ns has not passed, yields (other ready threads of the VP run) and tests
 * again. *flag says whether they completed; if not, the caller parks. */
static int test_spin(int kind, int n, MPI_Request *reqs, int *index, MPI_Status *st, int *flag) {
  uint64_t until = 0;
  for (;;) {
    int rc = test_own(kind, n, reqs, index, st, flag);
    if (rc != MPI_SUCCESS || *flag || g.cfg.spin_ns == 0) return rc;
    uint64_t now = weft_time_now();
    if (!until) until = now + g.cfg.spin_ns;
    else if (now >= until) return rc;
    weft_yield();
  }
}

/* A weft thread's wait when no poller thread can be made (park's PARK_SELF): tests
 * its own requests, yielding between tests, until they complete. Slower than a park
 * (the thread keeps its VP's queue turning), but it never waits for a poll nobody
 * makes. */
static int self_poll(int kind, int n, MPI_Request *reqs, int *index, MPI_Status *st) {
  for (;;) {
    int flag = 0;
    int rc = test_own(kind, n, reqs, index, st, &flag);
    if (rc != MPI_SUCCESS || flag) return rc;
    weft_yield();
  }
}

static int mpi_wait_body(MPI_Request *req, MPI_Status *status) {
  if (!is_weft()) {
    if (!g.serialize) return MPI_Wait(req, status);
    return os_wait(1, req, NULL, status, T_ONE);
  }
  int flag = 0;
  int rc = test_spin(T_ONE, 1, req, NULL, status, &flag);
  if (rc != MPI_SUCCESS || flag) return rc;
  waiter_t w = {.user = req, .st = status, .n = 1};
  rc = park(&w);
  return rc == PARK_SELF ? self_poll(T_ONE, 1, req, NULL, status) : rc;
}

static int mpi_waitall_body(int n, MPI_Request *reqs, MPI_Status *statuses) {
  if (!is_weft()) {
    if (!g.serialize) return MPI_Waitall(n, reqs, statuses);
    return os_wait(n, reqs, NULL, statuses, T_ALL);
  }
  int flag = 0;
  int rc = test_spin(T_ALL, n, reqs, NULL, statuses, &flag);
  if (rc != MPI_SUCCESS || flag) return rc;
  waiter_t w = {.user = reqs, .st = statuses, .n = n, .all = 1};
  if (statuses != MPI_STATUSES_IGNORE)  /* null requests get an empty status, as in MPI */
    for (int i = 0; i < n; i++)
      if (reqs[i] == MPI_REQUEST_NULL) {
        memset(&statuses[i], 0, sizeof statuses[i]);
        statuses[i].MPI_SOURCE = MPI_ANY_SOURCE;
        statuses[i].MPI_TAG = MPI_ANY_TAG;
        statuses[i].MPI_ERROR = MPI_SUCCESS;
      }
  rc = park(&w);
  return rc == PARK_SELF ? self_poll(T_ALL, n, reqs, NULL, statuses) : rc;
}

static int mpi_waitany_body(int n, MPI_Request *reqs, int *index, MPI_Status *status) {
  if (!is_weft()) {
    if (!g.serialize) return MPI_Waitany(n, reqs, index, status);
    return os_wait(n, reqs, index, status, T_ANY);
  }
  int flag = 0;
  int rc = test_spin(T_ANY, n, reqs, index, status, &flag);
  if (rc != MPI_SUCCESS || flag) return rc;
  waiter_t w = {.user = reqs, .st = status, .n = n, .any = 1, .index = MPI_UNDEFINED};
  rc = park(&w);
  if (rc == PARK_SELF) return self_poll(T_ANY, n, reqs, index, status);
  *index = w.index;
  return rc;
}

/* ---- blocking calls through their nonblocking forms ------------------------------- */

static int mpi_send_body(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!is_weft() && !g.serialize) return MPI_Send(buf, count, type, dest, tag, comm);
  MPI_Request r;
  mlock();
  int rc = MPI_Isend(buf, count, type, dest, tag, comm, &r);
  munlock();
  return rc != MPI_SUCCESS ? rc : mpi_wait_body(&r, MPI_STATUS_IGNORE);
}

static int mpi_recv_body(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                  MPI_Status *status) {
  if (!is_weft() && !g.serialize) return MPI_Recv(buf, count, type, source, tag, comm, status);
  MPI_Request r;
  mlock();
  int rc = MPI_Irecv(buf, count, type, source, tag, comm, &r);
  munlock();
  return rc != MPI_SUCCESS ? rc : mpi_wait_body(&r, status);
}

static int mpi_sendrecv_body(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                             int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                             int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
  if (!is_weft() && !g.serialize)
    return MPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                        source, recvtag, comm, status);
  /* MPI_Irecv + MPI_Isend, as MPICH's own MPI_Sendrecv. MPI 4's MPI_Isendrecv (one
   * request) was used while fewer than 32 were outstanding: in MPICH 4.0 it is a
   * schedule that every progress call walks, and in M3 it was no faster at any
   * thread count measured, and slower with 1 to 4 threads a rank (docs/mpi.md). */
  MPI_Request r[2];
  mlock();
  int rc = MPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &r[0]);
  int sent = rc == MPI_SUCCESS ? MPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &r[1])
                               : MPI_SUCCESS;
  if (sent != MPI_SUCCESS) MPI_Cancel(&r[0]);
  munlock();
  if (rc != MPI_SUCCESS) return rc;
  if (sent != MPI_SUCCESS) {  /* the receive must not land in recvbuf after the return */
    mpi_wait_body(&r[0], MPI_STATUS_IGNORE);
    return sent;
  }
  MPI_Status st[2];
  rc = mpi_waitall_body(2, r, st);
  if (rc == MPI_ERR_IN_STATUS) {
    /* One request failed. A wait-all may return with the other still active (its
     * status says MPI_ERR_PENDING), but MPI_Sendrecv returns only once both are done:
     * the send may still read sendbuf, which the caller may free after the return (a
     * truncated receive returned at once while a rendezvous send was unmatched). And
     * MPI_Sendrecv gives the failed operation's own error, never MPI_ERR_IN_STATUS. */
    for (int k = 0; k < 2; k++)
      if (st[k].MPI_ERROR == MPI_ERR_PENDING) st[k].MPI_ERROR = mpi_wait_body(&r[k], &st[k]);
    for (int k = 0; k < 2; k++)
      if (st[k].MPI_ERROR != MPI_SUCCESS) {
        rc = st[k].MPI_ERROR;
        break;
      }
  }
  if (status != MPI_STATUS_IGNORE) *status = st[0];
  return rc;
}

static int mpi_barrier_body(MPI_Comm comm) {
  if (!is_weft() && !g.serialize) return MPI_Barrier(comm);
  MPI_Request r;
  mlock();
  int rc = MPI_Ibarrier(comm, &r);
  munlock();
  return rc != MPI_SUCCESS ? rc : mpi_wait_body(&r, MPI_STATUS_IGNORE);
}

static int mpi_allreduce_body(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm) {
  if (!is_weft() && !g.serialize) return MPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
  MPI_Request r;
  mlock();
  int rc = MPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, &r);
  munlock();
  return rc != MPI_SUCCESS ? rc : mpi_wait_body(&r, MPI_STATUS_IGNORE);
}

/* ---- the public calls: each counted in g.active while it runs ------------------- */

int weft_mpi_wait(MPI_Request *req, MPI_Status *status) {
  if (!req) return MPI_ERR_ARG;
  if (!enter()) return MPI_ERR_OTHER;
  return leave(mpi_wait_body(req, status));
}
int weft_mpi_waitall(int n, MPI_Request *reqs, MPI_Status *statuses) {
  if (n < 0 || (n > 0 && !reqs)) return MPI_ERR_ARG;
  if (!enter()) return MPI_ERR_OTHER;
  return leave(mpi_waitall_body(n, reqs, statuses));
}
int weft_mpi_waitany(int n, MPI_Request *reqs, int *index, MPI_Status *status) {
  if (n < 0 || (n > 0 && !reqs) || !index) return MPI_ERR_ARG;
  if (!enter()) return MPI_ERR_OTHER;
  return leave(mpi_waitany_body(n, reqs, index, status));
}
int weft_mpi_send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!enter()) return MPI_ERR_OTHER;
  return leave(mpi_send_body(buf, count, type, dest, tag, comm));
}
int weft_mpi_recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                  MPI_Status *status) {
  if (!enter()) return MPI_ERR_OTHER;
  return leave(mpi_recv_body(buf, count, type, source, tag, comm, status));
}
int weft_mpi_sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                      int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                      int recvtag, MPI_Comm comm, MPI_Status *status) {
  if (!enter()) return MPI_ERR_OTHER;
  return leave(mpi_sendrecv_body(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                                 recvtype, source, recvtag, comm, status));
}
int weft_mpi_barrier(MPI_Comm comm) {
  if (!enter()) return MPI_ERR_OTHER;
  return leave(mpi_barrier_body(comm));
}
int weft_mpi_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm) {
  if (!enter()) return MPI_ERR_OTHER;
  return leave(mpi_allreduce_body(sendbuf, recvbuf, count, type, op, comm));
}

/* ---- finalize -------------------------------------------------------------------- */

int weft_mpi_finalize(void) {
  weft_spin_lock(&g.lock);
  if (!g.inited) {
    weft_spin_unlock(&g.lock);
    return MPI_ERR_OTHER;
  }
  if (g.n > 0 || g.nany > 0 || g.reserved > 0 || g.active > 0) {
    weft_spin_unlock(&g.lock);
    return MPI_ERR_PENDING;
  }
  g.inited = 0;  /* no poll calls MPI from now on; a poller thread finishes */
  g.finalized = 1;
  if (g.idle_on) {
    weft_idle_func_remove(idle_poll, NULL);
    g.idle_on = 0;
  }
  int kick = g.poller && g.poller_asleep;  /* a lingering one: now, not at its deadline */
  g.poller_asleep = g.poller_lingering = 0;
  weft_spin_unlock(&g.lock);
  if (kick) weft_sem_signal(&g.kick);
  /* A poller thread may still be on its way out (it only reads g under the lock). */
  mlock();
  int rc = MPI_Finalize();
  munlock();
  free(g.reqs);
  free(g.slot);
  free(g.idx);
  free(g.sts);
  g.reqs = NULL;
  g.slot = NULL;
  g.idx = NULL;
  g.sts = NULL;
  g.cap = 0;
  return rc;
}

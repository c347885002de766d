/* tests/mpi/mpi_test.c - weft_mpi under mpiexec (run by ctest with -n 2 and -n 4).
 *
 * One program, one scenario per argument:
 *   p2p       hundreds of weft threads per rank exchange tagged messages around the
 *             ring (send/recv, waitall, waitany, sendrecv): exact counts, contents and
 *             order
 *   serial    p2p with MPI_THREAD_SERIALIZED asked for: weft's own lock
 *   compute   one VP: a thread computes (yielding now and then) while the others
 *             wait for messages; no idle VP ever exists, so the poller thread and the
 *             park path must make progress (idle polling is switched off)
 *   idle      two VPs: a thread computes without ever yielding; idle VP polls
 *   coll      many threads, each with its own communicator (MPI_Comm_dup), run
 *             allreduce and barrier concurrently
 *   finalize  finalize with parked receives returns MPI_ERR_PENDING and changes
 *             nothing; MPI_Cancel wakes one parked thread (cancelled status); after
 *             the other's message arrives finalize succeeds
 *   finspin   finalize while a thread is still in the first (spinning) phase of its
 *             receive returns MPI_ERR_PENDING (it went ahead and MPI crashed)
 *   statuses  a parked waitall whose second request fails (truncated) after the
 *             first completed in an earlier poll: MPI_ERR_IN_STATUS, and the first
 *             status says MPI_SUCCESS (it held stale memory)
 *   interval  one VP and a poll interval of 1 ns: the poller thread must still let
 *             the other threads run (it kept the VP for ever)
 *   pairs     weft_mpi_sendrecv parks on two requests per exchange (counted through
 *             weft_mpi_outstanding while 48 large exchanges wait for their partner),
 *             every byte checked
 *   nopoller  weft_config_t.max_threads leaves no room for the poller thread: a
 *             receive that would park (its message is sent 100 ms later) tests for
 *             itself instead (it parked with nobody to poll for it, for ever), and so
 *             do the sends and the final barrier
 *   linger    rounds of one thread parked on a receive from the rank itself, with
 *             gaps longer than the poll interval and shorter than the poller's
 *             linger between them: the poller thread is made once, not once a
 *             round (it was: a stack mapped and unmapped per park)
 * A watchdog (alarm) turns a hang into a failure. WEFT_TEST_SCALE scales the counts.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weft/debug.h"
#include "weft/mpi.h"
#include "weft/runtime.h"
#include "weft/thread.h"
#include "weft/time.h"

static int rank, size;
#ifndef WEFT_TEST_DEFAULT_SCALE
#define WEFT_TEST_DEFAULT_SCALE 1.0
#endif
static double scale = WEFT_TEST_DEFAULT_SCALE;
static int failures;

#define CHECK(c)                                                                \
  do {                                                                          \
    if (!(c)) {                                                                 \
      fprintf(stderr, "rank %d: %s:%d: CHECK(%s) failed\n", rank, __FILE__, __LINE__, #c); \
      __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                       \
    }                                                                           \
  } while (0)

static int scaled(int n) {
  int v = (int)(n * scale);
  return v < 4 ? 4 : v;
}

static int nthreads, nmsgs;

/* ---- p2p: thread i sends nmsgs messages {rank, i, seq} with tag i to rank+1 and
 * receives nmsgs with tag i from rank-1, in order ---- */
static void *p2p_thread(void *arg) {
  int i = (int)(intptr_t)arg;
  int to = (rank + 1) % size, from = (rank + size - 1) % size;
  int mode = i % 4;
  for (int s = 0; s < nmsgs; s++) {
    int out[3] = {rank, i, s}, in[3] = {-1, -1, -1};
    MPI_Status st;
    if (mode == 3) {
      /* with the status and without */
      int ignore = (i / 4) % 2;
      CHECK(weft_mpi_sendrecv(out, 3, MPI_INT, to, i, in, 3, MPI_INT, from, i, MPI_COMM_WORLD,
                              ignore ? MPI_STATUS_IGNORE : &st) == MPI_SUCCESS);
      if (ignore) {  /* what the checks below read */
        st.MPI_SOURCE = from;
        st.MPI_TAG = i;
        MPI_Status_set_elements(&st, MPI_INT, 3);
      }
    } else if (mode == 0) {
      CHECK(weft_mpi_send(out, 3, MPI_INT, to, i, MPI_COMM_WORLD) == MPI_SUCCESS);
      CHECK(weft_mpi_recv(in, 3, MPI_INT, from, i, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    } else {
      MPI_Request r[2];
      weft_mpi_lock();
      MPI_Irecv(in, 3, MPI_INT, from, i, MPI_COMM_WORLD, &r[0]);
      MPI_Isend(out, 3, MPI_INT, to, i, MPI_COMM_WORLD, &r[1]);
      weft_mpi_unlock();
      if (mode == 1) {
        MPI_Status sts[2];
        CHECK(weft_mpi_waitall(2, r, sts) == MPI_SUCCESS);
        st = sts[0];
      } else {
        int got[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
          int idx = -1;
          MPI_Status s1;
          CHECK(weft_mpi_waitany(2, r, &idx, &s1) == MPI_SUCCESS);
          CHECK(idx == 0 || idx == 1);
          if (idx < 0 || idx > 1) break;
          CHECK(!got[idx]);
          got[idx] = 1;
          CHECK(r[idx] == MPI_REQUEST_NULL);
          if (idx == 0) st = s1;
        }
        int idx = 7;  /* all null now */
        CHECK(weft_mpi_waitany(2, r, &idx, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        CHECK(idx == MPI_UNDEFINED);
      }
      CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL);
    }
    CHECK(in[0] == from && in[1] == i && in[2] == s);
    CHECK(st.MPI_SOURCE == from && st.MPI_TAG == i);
    int cnt = -1;
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == 3);
  }
  return NULL;
}

static void run_threads(void *(*fn)(void *), int n) {
  weft_thread_t **t = calloc((size_t)n, sizeof *t);
  for (int i = 0; i < n; i++) CHECK(weft_create(&t[i], NULL, fn, (void *)(intptr_t)i) == 0);
  for (int i = 0; i < n; i++) CHECK(weft_join(t[i], NULL) == 0);
  free(t);
}

/* ---- compute: rank 0's threads wait for messages from rank 1 while one computes ---- */
static volatile int compute_done;
static int yield_every;

static void *compute_thread(void *arg) {
  (void)arg;
  volatile unsigned long x = 1;
  long iters = (long)(40000000 * scale);
  for (long k = 0; k < iters; k++) {
    x = x * 6364136223846793005ul + 1442695040888963407ul;
    if (yield_every && k % yield_every == 0) weft_yield();
  }
  CHECK(x != 0 || x == 0);  /* the work itself is not checked; finishing is */
  compute_done = 1;
  return NULL;
}

static void *waiter_thread(void *arg) {
  int i = (int)(intptr_t)arg;
  int v = -1;
  CHECK(weft_mpi_recv(&v, 1, MPI_INT, 1, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(v == i * 7);
  /* answer, so that rank 1 knows the message arrived while rank 0 may still compute */
  CHECK(weft_mpi_send(&v, 1, MPI_INT, 1, i, MPI_COMM_WORLD) == MPI_SUCCESS);
  return NULL;
}

static void *sender_thread(void *arg) {
  int i = (int)(intptr_t)arg;
  int v = i * 7, back = -1;
  CHECK(weft_mpi_send(&v, 1, MPI_INT, 0, i, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(weft_mpi_recv(&back, 1, MPI_INT, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(back == v);
  return NULL;
}

static void compute_scenario(void) {
  int n = scaled(100);
  if (rank == 0) {
    weft_thread_t *c;
    CHECK(weft_create(&c, NULL, compute_thread, NULL) == 0);
    run_threads(waiter_thread, n);
    CHECK(weft_join(c, NULL) == 0);
    CHECK(compute_done);
  } else if (rank == 1) {
    run_threads(sender_thread, n);
  }
}

/* ---- coll: each thread its own communicator ---- */
static MPI_Comm *comms;

static void *coll_thread(void *arg) {
  int i = (int)(intptr_t)arg;
  for (int it = 0; it < 5; it++) {
    long v = (long)rank * 1000 + i + it, sum = -1;
    CHECK(weft_mpi_allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, comms[i]) == MPI_SUCCESS);
    long want = 1000L * size * (size - 1) / 2 + (long)size * (i + it);
    CHECK(sum == want);
    CHECK(weft_mpi_barrier(comms[i]) == MPI_SUCCESS);
  }
  return NULL;
}

static void coll_scenario(void) {
  int n = scaled(64);
  comms = calloc((size_t)n, sizeof *comms);
  for (int i = 0; i < n; i++) CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]) == MPI_SUCCESS);
  run_threads(coll_thread, n);
  for (int i = 0; i < n; i++) MPI_Comm_free(&comms[i]);
  free(comms);
}

/* ---- finalize with a parked receive ---- */
static int fin_val = -1;
static MPI_Request cancel_req = MPI_REQUEST_NULL;
static int cancel_buf, cancelled = -1;
static void *cancel_thread(void *arg) {
  (void)arg;
  MPI_Status st;
  weft_mpi_lock();
  MPI_Irecv(&cancel_buf, 1, MPI_INT, 1, 997, MPI_COMM_WORLD, &cancel_req);
  weft_mpi_unlock();
  MPI_Request r = cancel_req;  /* main cancels through its copy of the handle */
  CHECK(weft_mpi_wait(&r, &st) == MPI_SUCCESS);
  CHECK(r == MPI_REQUEST_NULL);
  MPI_Test_cancelled(&st, &cancelled);
  return NULL;
}
static void *fin_thread(void *arg) {
  (void)arg;
  CHECK(weft_mpi_recv(&fin_val, 1, MPI_INT, 1, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
        MPI_SUCCESS);
  return NULL;
}

/* ---- finalize while a receive spins ---- */
static int spin_started;  /* __atomic */
static void *spin_recv_thread(void *arg) {
  (void)arg;
  int v = -1;
  __atomic_store_n(&spin_started, 1, __ATOMIC_RELEASE);
  CHECK(weft_mpi_recv(&v, 1, MPI_INT, 1, 996, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(v == 7);
  return NULL;
}

/* ---- waitall statuses ---- */
static MPI_Comm errcomm;  /* MPI_ERRORS_RETURN: a truncation comes back as an error */
static void *statuses_thread(void *arg) {
  (void)arg;
  int a = -1, b = -1;
  MPI_Request r[2];
  MPI_Status st[2];
  memset(st, 0x5a, sizeof st);
  weft_mpi_lock();
  MPI_Irecv(&a, 1, MPI_INT, 0, 1, errcomm, &r[0]);
  MPI_Irecv(&b, 1, MPI_INT, 0, 2, errcomm, &r[1]);
  weft_mpi_unlock();
  CHECK(weft_mpi_waitall(2, r, st) == MPI_ERR_IN_STATUS);
  CHECK(a == 11);
  CHECK(st[0].MPI_ERROR == MPI_SUCCESS);
  int cls = -1;
  MPI_Error_class(st[1].MPI_ERROR, &cls);
  CHECK(cls == MPI_ERR_TRUNCATE);
  return NULL;
}

/* ---- sendrecv whose receive fails (truncated) while its send is unmatched ---- */
#define SRT_INTS (1024 * 1024)  /* 4 MiB: a rendezvous send, unmatched until rank 0 posts */
static int srt_sendbuf[SRT_INTS];
static void *sendrecv_trunc_thread(void *arg) {
  (void)arg;
  for (int k = 0; k < SRT_INTS; k++) srt_sendbuf[k] = k ^ 0x5a5a;
  int small[2];
  MPI_Status st;
  weft_sleep_ns(50 * 1000000ull);  /* rank 0's 8 ints are here: the receive fails at once */
  int rc = weft_mpi_sendrecv(srt_sendbuf, SRT_INTS, MPI_INT, 0, 5, small, 2, MPI_INT, 0, 6,
                             errcomm, &st);
  /* MPI_Sendrecv's own error for the failed receive, never MPI_ERR_IN_STATUS */
  int cls = -1;
  MPI_Error_class(rc, &cls);
  CHECK(cls == MPI_ERR_TRUNCATE);
  /* and it returned only once the send was done: the buffer is ours again (rank 0
   * checks it received the pattern, not these zeros) */
  memset(srt_sendbuf, 0, sizeof srt_sendbuf);
  return NULL;
}

/* ---- one VP, poll interval 1 ns ---- */
static void *self_recv_thread(void *arg) {
  (void)arg;
  int v = -1;
  CHECK(weft_mpi_recv(&v, 1, MPI_INT, 0, 5, MPI_COMM_SELF, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(v == 5);
  return NULL;
}

/* ---- linger: a receive from the rank itself, parked (spin_ns 0) ---- */
static void *self_recv_round(void *arg) {
  int v = -1;
  CHECK(weft_mpi_recv(&v, 1, MPI_INT, 0, 6, MPI_COMM_SELF, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  CHECK(v == (int)(intptr_t)arg);
  return NULL;
}
/* ---- pairs: weft_mpi_sendrecv parks on MPI_Irecv + MPI_Isend (two requests, with the
 * status ignored too; docs/mpi.md). The even rank of each pair parks SR_THREADS such
 * exchanges before its partner answers any; the messages are large enough (SR_BYTES)
 * that no send completes before its receive is posted, so every request stays in the
 * parked set and weft_mpi_outstanding() counts 2 x SR_THREADS. Then every byte is
 * checked. */
#define SR_THREADS 48
#define SR_BYTES (512 * 1024)
static unsigned char *sr_out, *sr_in;

static unsigned char sr_byte(int from, int i, size_t k) {
  return (unsigned char)(from * 131 + i * 7 + (int)(k % 251));
}

static void *sr_thread(void *arg) {
  int i = (int)(intptr_t)arg, partner = rank ^ 1;
  unsigned char *out = sr_out + (size_t)i * SR_BYTES, *in = sr_in + (size_t)i * SR_BYTES;
  for (size_t k = 0; k < SR_BYTES; k++) out[k] = sr_byte(rank, i, k);
  memset(in, 0, SR_BYTES);
  CHECK(weft_mpi_sendrecv(out, SR_BYTES, MPI_BYTE, partner, 100 + i, in, SR_BYTES, MPI_BYTE,
                          partner, 100 + i, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  size_t bad = 0;
  for (size_t k = 0; k < SR_BYTES; k++) bad += in[k] != sr_byte(partner, i, k);
  CHECK(bad == 0);
  return NULL;
}

static int nopoller_val;
static void *nopoller_recv(void *arg) {
  int v = 0;
  CHECK(weft_mpi_recv(&v, 1, MPI_INT, (int)(intptr_t)arg, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
        MPI_SUCCESS);
  nopoller_val = v;
  return NULL;
}

static void pairs_scenario(void) {
  if ((rank ^ 1) >= size) return;  /* an odd rank count: the last rank sits out */
  sr_out = malloc((size_t)SR_THREADS * SR_BYTES);
  sr_in = malloc((size_t)SR_THREADS * SR_BYTES);
  CHECK(sr_out && sr_in);
  if (!sr_out || !sr_in) return;
  weft_thread_t *t[SR_THREADS];
  int go = 1;
  if (rank % 2 == 0) {
    for (int i = 0; i < SR_THREADS; i++)
      CHECK(weft_create(&t[i], NULL, sr_thread, (void *)(intptr_t)i) == 0);
    int want = 2 * SR_THREADS;
    uint64_t deadline = weft_time_now() + 30ull * 1000000000u;
    int got;
    while ((got = weft_mpi_outstanding()) < want && weft_time_now() < deadline) weft_yield();
    weft_sleep_ns(20 * 1000000ull);  /* and no more come */
    got = weft_mpi_outstanding();
    if (got != want)
      fprintf(stderr, "rank %d: pairs: %d requests parked, want %d\n", rank, got, want);
    CHECK(got == want);
    CHECK(weft_mpi_send(&go, 1, MPI_INT, rank ^ 1, 99, MPI_COMM_WORLD) == MPI_SUCCESS);
  } else {
    CHECK(weft_mpi_recv(&go, 1, MPI_INT, rank ^ 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
          MPI_SUCCESS);
    for (int i = 0; i < SR_THREADS; i++)
      CHECK(weft_create(&t[i], NULL, sr_thread, (void *)(intptr_t)i) == 0);
  }
  for (int i = 0; i < SR_THREADS; i++) CHECK(weft_join(t[i], NULL) == 0);
  free(sr_out);
  free(sr_in);
}

#define LINGER_INTERVAL_NS 1000000ull  /* the poller lingers 10 intervals: 10 ms */

int main(int argc, char **argv) {
  alarm(100);  /* watchdog: a hang fails (SIGALRM kills the rank, mpiexec reports it) */
  const char *sc = getenv("WEFT_TEST_SCALE");
  if (sc) scale = atof(sc);
  if (scale <= 0) scale = WEFT_TEST_DEFAULT_SCALE;
  const char *mode = argc > 1 ? argv[1] : "p2p";
  weft_mpi_config_t mc;
  weft_mpi_config_init(&mc);
  if (!strcmp(mode, "serial")) mc.thread_level = MPI_THREAD_SERIALIZED;
  if (!strcmp(mode, "compute")) {
    mc.idle_poll = 0;
    yield_every = 1000;
  }
  if (!strcmp(mode, "finspin")) mc.spin_ns = 60ull * 1000000000u;  /* spins until it comes */
  if (!strcmp(mode, "interval")) mc.poll_interval_ns = 1;
  if (!strcmp(mode, "linger")) {
    mc.poll_interval_ns = LINGER_INTERVAL_NS;
    mc.spin_ns = 0;
  }
  int prov = -1;
  if (weft_mpi_init_config(&argc, &argv, &mc, &prov) != MPI_SUCCESS) return 2;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(weft_mpi_serialized() == (prov < MPI_THREAD_MULTIPLE));
  if (!strcmp(mode, "serial")) CHECK(weft_mpi_serialized() == 1 || prov == MPI_THREAD_MULTIPLE);
  /* a second init is refused */
  CHECK(weft_mpi_init(&argc, &argv, NULL) == MPI_ERR_OTHER);

  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = !strcmp(mode, "compute") || !strcmp(mode, "interval") ? 1 : 2;
  if (!strcmp(mode, "nopoller")) cfg.max_threads = 1;  /* one thread besides main */
  if (weft_init(&cfg) != 0) return 3;

  nthreads = scaled(300);
  nmsgs = scaled(20);
  if (!strcmp(mode, "p2p") || !strcmp(mode, "serial")) {
    run_threads(p2p_thread, nthreads);
  } else if (!strcmp(mode, "compute") || !strcmp(mode, "idle")) {
    compute_scenario();
  } else if (!strcmp(mode, "coll")) {
    coll_scenario();
  } else if (!strcmp(mode, "pairs")) {
    pairs_scenario();
  } else if (!strcmp(mode, "finalize")) {
    if (rank == 0) {
      weft_thread_t *t, *c;
      CHECK(weft_create(&t, NULL, fin_thread, NULL) == 0);
      CHECK(weft_create(&c, NULL, cancel_thread, NULL) == 0);
      while (weft_mpi_outstanding() < 2) weft_yield();
      CHECK(weft_mpi_finalize() == MPI_ERR_PENDING);
      /* a cancelled request completes: its parked thread wakes, cancelled */
      MPI_Request cr = cancel_req;
      weft_mpi_lock();
      CHECK(MPI_Cancel(&cr) == MPI_SUCCESS);
      weft_mpi_unlock();
      CHECK(weft_join(c, NULL) == 0);
      CHECK(cancelled == 1);
      CHECK(weft_mpi_outstanding() == 1);
      CHECK(weft_mpi_finalize() == MPI_ERR_PENDING);
      int go = 1;  /* MPI still works: finalize changed nothing */
      CHECK(weft_mpi_send(&go, 1, MPI_INT, 1, 998, MPI_COMM_WORLD) == MPI_SUCCESS);
      CHECK(weft_join(t, NULL) == 0);
      CHECK(fin_val == 42);
    } else if (rank == 1) {
      int go = 0, v = 42;
      CHECK(weft_mpi_recv(&go, 1, MPI_INT, 0, 998, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
            MPI_SUCCESS);
      CHECK(go == 1);
      CHECK(weft_mpi_send(&v, 1, MPI_INT, 0, 999, MPI_COMM_WORLD) == MPI_SUCCESS);
    }
  } else if (!strcmp(mode, "finspin")) {
    if (rank == 0) {
      weft_thread_t *t;
      CHECK(weft_create(&t, NULL, spin_recv_thread, NULL) == 0);
      while (!__atomic_load_n(&spin_started, __ATOMIC_ACQUIRE)) weft_yield();
      for (int i = 0; i < 100; i++) weft_yield();  /* it is in its spin phase */
      CHECK(weft_mpi_outstanding() == 0);           /* not parked */
      CHECK(weft_mpi_finalize() == MPI_ERR_PENDING);
      int go = 1;
      CHECK(weft_mpi_send(&go, 1, MPI_INT, 1, 995, MPI_COMM_WORLD) == MPI_SUCCESS);
      CHECK(weft_join(t, NULL) == 0);
    } else if (rank == 1) {
      int go = 0, v = 7;
      CHECK(weft_mpi_recv(&go, 1, MPI_INT, 0, 995, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
            MPI_SUCCESS);
      CHECK(weft_mpi_send(&v, 1, MPI_INT, 0, 996, MPI_COMM_WORLD) == MPI_SUCCESS);
    }
  } else if (!strcmp(mode, "statuses")) {
    /* MPICH raises an error found by MPI_Testsome on MPI_COMM_WORLD's handler, not
     * on the request's communicator: both return errors here */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &errcomm);
    MPI_Comm_set_errhandler(errcomm, MPI_ERRORS_RETURN);
    if (rank == 1) {
      weft_thread_t *t;
      CHECK(weft_create(&t, NULL, statuses_thread, NULL) == 0);
      while (weft_mpi_outstanding() < 2) weft_yield();  /* parked on both */
      int go = 1;
      CHECK(weft_mpi_send(&go, 1, MPI_INT, 0, 3, MPI_COMM_WORLD) == MPI_SUCCESS);
      /* the first completes in a poll of its own before the second is sent */
      while (weft_mpi_outstanding() > 1) weft_yield();
      CHECK(weft_mpi_send(&go, 1, MPI_INT, 0, 4, MPI_COMM_WORLD) == MPI_SUCCESS);
      CHECK(weft_join(t, NULL) == 0);
    } else if (rank == 0) {
      int go = 0, one = 11, two[2] = {21, 22};
      CHECK(weft_mpi_recv(&go, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == 0);
      CHECK(weft_mpi_send(&one, 1, MPI_INT, 1, 1, errcomm) == MPI_SUCCESS);
      CHECK(weft_mpi_recv(&go, 1, MPI_INT, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == 0);
      CHECK(weft_mpi_send(two, 2, MPI_INT, 1, 2, errcomm) == MPI_SUCCESS);  /* truncated there */
    }
    /* weft_mpi_sendrecv on rank 1: its receive is truncated at once, its 4 MiB send is
     * matched only 200 ms later; it must return MPI_ERR_TRUNCATE after the send is
     * done (it returned MPI_ERR_IN_STATUS at once, and the send then read a buffer the
     * caller had already overwritten) */
    if (rank == 1) {
      weft_thread_t *t;
      CHECK(weft_create(&t, NULL, sendrecv_trunc_thread, NULL) == 0);
      CHECK(weft_join(t, NULL) == 0);
    } else if (rank == 0) {
      int eight[8] = {1, 2, 3, 4, 5, 6, 7, 8};
      CHECK(weft_mpi_send(eight, 8, MPI_INT, 1, 6, errcomm) == MPI_SUCCESS);
      weft_sleep_ns(200 * 1000000ull);
      int *in = malloc(sizeof(int) * SRT_INTS);
      CHECK(in != NULL);
      if (in) {
        CHECK(weft_mpi_recv(in, SRT_INTS, MPI_INT, 1, 5, errcomm, MPI_STATUS_IGNORE) ==
              MPI_SUCCESS);
        long bad = 0;
        for (int k = 0; k < SRT_INTS; k++) bad += in[k] != (k ^ 0x5a5a);
        if (bad) fprintf(stderr, "rank 0: sendrecv's send delivered %ld wrong ints\n", bad);
        CHECK(bad == 0);
        free(in);
      }
    }
    MPI_Comm_free(&errcomm);
  } else if (!strcmp(mode, "interval")) {
    weft_thread_t *t;
    CHECK(weft_create(&t, NULL, self_recv_thread, NULL) == 0);
    while (weft_mpi_outstanding() < 1) weft_yield();  /* parked: the poller runs */
    for (int i = 0; i < 100; i++) weft_yield();       /* the poller must let us run */
    int v = 5;
    CHECK(weft_mpi_send(&v, 1, MPI_INT, 0, 5, MPI_COMM_SELF) == MPI_SUCCESS);
    CHECK(weft_join(t, NULL) == 0);
  } else if (!strcmp(mode, "nopoller")) {
    /* ranks in pairs: the even one receives in a thread, the odd one sends late */
    int peer_rank = rank ^ 1;
    if (peer_rank < size) {
      if (rank % 2 == 0) {
        weft_thread_t *t;
        CHECK(weft_create(&t, NULL, nopoller_recv, (void *)(intptr_t)peer_rank) == 0);
        weft_thread_t *more;  /* the limit is reached: no poller thread can be made */
        CHECK(weft_create(&more, NULL, nopoller_recv, NULL) == WEFT_EAGAIN);
        CHECK(weft_join(t, NULL) == 0);
        CHECK(nopoller_val == 42);
      } else {
        weft_sleep_ns(100 * 1000 * 1000);
        int v = 42;
        CHECK(weft_mpi_send(&v, 1, MPI_INT, peer_rank, 7, MPI_COMM_WORLD) == MPI_SUCCESS);
      }
    }
  } else if (!strcmp(mode, "linger")) {
    int rounds = scaled(40);
    weft_debug_stats_t before, after;
    weft_debug_stats(&before);
    for (int i = 0; i < rounds; i++) {
      weft_thread_t *t;
      CHECK(weft_create(&t, NULL, self_recv_round, (void *)(intptr_t)i) == 0);
      while (weft_mpi_outstanding() < 1) weft_yield();  /* parked */
      CHECK(weft_mpi_send(&i, 1, MPI_INT, 0, 6, MPI_COMM_SELF) == MPI_SUCCESS);
      CHECK(weft_join(t, NULL) == 0);
      /* nothing outstanding for 3 intervals: a poller that finished when the set
       * emptied is gone by the next round */
      weft_sleep_ns(3 * LINGER_INTERVAL_NS);
    }
    weft_debug_stats(&after);
    /* one thread a round is the test's; the poller adds one, or a few if a gap ran
     * past the linger on a loaded machine, not one a round */
    long made = (long)(after.created - before.created);
    if (made > rounds + rounds / 2)
      fprintf(stderr, "rank %d: linger: %ld threads made in %d rounds\n", rank, made, rounds);
    CHECK(made >= rounds + 1 && made <= rounds + rounds / 2);
  } else {
    fprintf(stderr, "unknown scenario %s\n", mode);
    return 2;
  }
  CHECK(weft_mpi_outstanding() == 0);
  /* all ranks done before finalize: a plain barrier from the main weft thread parks */
  CHECK(weft_mpi_barrier(MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(weft_shutdown() == 0);
  /* weft is down: the calls are MPI's blocking ones */
  long one = 1, n = 0;
  CHECK(weft_mpi_allreduce(&one, &n, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
  CHECK(n == size);
  int f = failures, total = 0;
  MPI_Allreduce(&f, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(weft_mpi_finalize() == MPI_SUCCESS);
  CHECK(weft_mpi_finalize() == MPI_ERR_OTHER);
  CHECK(weft_mpi_wait(NULL, NULL) == MPI_ERR_ARG);
  if (rank == 0) printf("weft_mpi %s: %d ranks, %s\n", mode, size, total ? "FAILED" : "ok");
  return total || failures ? 1 : 0;
}
